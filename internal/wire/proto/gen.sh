#!/bin/sh
# Regenerates the Go code (kiln*.pb.go) from kiln.proto and kiln_v2.proto. Installs protoc
# (Debian package protobuf-compiler) and the Go code generators when they are missing.
set -eu
cd "$(dirname "$0")"

PROTOC_GEN_GO_VERSION=v1.36.5
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1

if ! command -v protoc >/dev/null 2>&1; then
	if command -v apt-get >/dev/null 2>&1; then
		SUDO=
		[ "$(id -u)" -eq 0 ] || SUDO=sudo
		$SUDO apt-get update -qq
		$SUDO apt-get install -y -qq protobuf-compiler
	else
		echo "gen.sh: protoc is not installed and apt-get is not available. Fix: install protoc (https://protobuf.dev/installation/) and rerun." >&2
		exit 1
	fi
fi

GOBIN="$(go env GOPATH)/bin"
export PATH="$GOBIN:$PATH"
if ! command -v protoc-gen-go >/dev/null 2>&1; then
	go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
fi
if ! command -v protoc-gen-go-grpc >/dev/null 2>&1; then
	go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
fi

protoc --proto_path=. \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	kiln.proto kiln_v2.proto

# kiln — build, test, run and benchmark. Every target works on a fresh Debian
# machine with Go; nothing else needs to be installed by hand.

GO      ?= go
BIN     := bin
GOFLAGS ?=
# kiln --version prints it; go install builds print the module version instead.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

# Every plugin is a directory under plugins/ with a main.go; it is installed as
# bin/plugins/kiln-backend-<directory>. The example plugin (examples/plugin) is
# built by its own tests, never installed: installed, it would compete with the
# real backends for selection and for the routes kiln certify writes.
PLUGIN_DIRS := $(patsubst %/main.go,%,$(wildcard plugins/*/main.go))

.PHONY: all deps build test run bench proto vet fmt-check clean

# Debian packages the Vulkan backend and its tests need: the headers cgo builds
# against, lavapipe (Mesa's CPU Vulkan driver) so the suite runs real Vulkan
# compute without a GPU, spirv-tools for spirv-val, and the Khronos validation layer.
VULKAN_PKGS := libvulkan-dev mesa-vulkan-drivers spirv-tools vulkan-validationlayers

all: build

## deps: install the Debian packages above when any is missing (apt-get, as root or via sudo)
deps:
	@missing=$$(for p in $(VULKAN_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		if [ "$$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null; then sudo=sudo; \
		else echo "need root to install $$missing. Fix: run 'apt-get install $$missing' as root"; exit 1; fi; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing >/dev/null; \
	fi

## build: bin/kiln and bin/plugins/kiln-backend-* for every plugin under plugins/
build: deps
	$(GO) build $(GOFLAGS) ./...
	$(GO) build $(GOFLAGS) -ldflags "-X main.version=$(VERSION)" -o $(BIN)/kiln ./cmd/kiln
	@set -e; for dir in $(PLUGIN_DIRS); do \
		echo "$(GO) build -o $(BIN)/plugins/kiln-backend-$$(basename $$dir) ./$$dir"; \
		$(GO) build $(GOFLAGS) -o $(BIN)/plugins/kiln-backend-$$(basename $$dir) ./$$dir; \
	done
	@if [ -e $(BIN)/plugins/kiln-backend-example ]; then \
		echo "rm $(BIN)/plugins/kiln-backend-example (an earlier make build installed the example plugin)"; \
		rm -f $(BIN)/plugins/kiln-backend-example; \
	fi

## test: vet, gofmt check and the whole suite under the race detector; Vulkan tests
## run for real on lavapipe and fail (instead of skipping) when Vulkan is unusable
test: deps vet fmt-check
	KILN_REQUIRE_VULKAN=1 $(GO) test $(GOFLAGS) -race -timeout 15m ./...
	@echo "512 MiB buffer round trip through the raised gRPC limits (too big for -race):"
	$(GO) test $(GOFLAGS) -count=1 -timeout 5m -run '^TestWireLargeBuffer$$' ./pluginapi

vet: deps
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## run: every corpus kernel on every ready backend (cpu-ref included), verified, one table
run: build
	$(BIN)/kiln --plugins $(BIN)/plugins run --all

## bench: plugin start, 1-element round trip, 256 MiB in+out through the plugin vs in-process
bench: build
	$(BIN)/kiln --plugins $(BIN)/plugins bench

## proto: regenerate internal/wire/proto (installs protoc and the Go generators if missing)
proto:
	sh internal/wire/proto/gen.sh

clean:
	rm -rf $(BIN)

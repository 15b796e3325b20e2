// Package kilnpb is the wire between the kiln host and a backend plugin: the gRPC
// service and messages of kiln.proto (protocol version 1) and the code protoc
// generates from it. Plugin authors and hosts never use it directly; pluginapi
// wraps it. The program crosses as ir's canonical encoding in a bytes field, never
// as a second schema of the IR.
//
// The generated files are committed; gen.sh regenerates them, installing protoc and
// the Go generators when they are missing.
package kilnpb

//go:generate sh gen.sh

// Package kilnpb is the wire between the kiln host and a backend plugin: the gRPC
// services and messages of kiln.proto (protocol version 1) and kiln_v2.proto
// (protocol 2's Device service: buffers, submits, the data plane's opening) and
// the code protoc generates from them. Plugin authors and applications never
// use it directly: pluginapi's Serve and the host's client wrap it. The program
// crosses as ir's canonical encoding in a bytes field, never as a second schema
// of the IR.
//
// The generated files are committed; gen.sh regenerates them, installing protoc and
// the Go generators when they are missing.
package kilnpb

//go:generate sh gen.sh

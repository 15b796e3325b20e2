// Package pluginapi is the SDK for kiln backend plugins, in the spirit of
// database/sql/driver: a plugin author implements Backend and calls Serve; the host
// starts the plugin executable, talks to it over hashicorp/go-plugin's gRPC
// transport, and sees the same Backend interface on its side (ClientConfig,
// Dispense). The pluginapi/conformance package checks a Backend against the CPU
// reference on the standard kernel corpus.
//
// The wire (pluginapi/proto) carries the program in ir's canonical encoding; the SDK
// decodes it and runs ir.Validate before a backend sees it, checks the
// specialization map against the program's parameters and the workgroup override's
// shape, and rejects anything else with a RejectedError. Buffers are byte slices on
// both sides. Typed errors (RejectedError, UnavailableError, DeviceError) cross the
// wire as gRPC status codes with a kiln marker and come back as the same type with
// the same message; a deadline or cancellation wraps the context error; a broken
// connection (the plugin crashed) stays an untyped gRPC Unavailable error, for the
// host to turn into its own crashed-plugin error.
//
// # Write a plugin
//
// A plugin is an executable named kiln-backend-<name> in the host's plugins
// directory (see the host package and `kiln doctor`). Its main is one line over a
// library that implements Backend:
//
//	package main
//
//	import (
//		"example.com/mybackend"
//		"github.com/kiln-dev/kiln/pluginapi"
//	)
//
//	func main() { pluginapi.Serve(mybackend.New()) }
//
// The Backend's methods, in the order the host calls them:
//
//   - Describe reports the id (the registry key users pass to Acquire), version,
//     whether the backend is a reference oracle (never picked implicitly), whether
//     it dispatches, its precedence (lower wins, nil sorts last), the IR features
//     it supports ("ir.v1", "shared", "atomics", "barrier") and its adapters. Each
//     adapter has a DeviceProfile, whose CapabilityScore, TimingQuality and
//     MemBWGBps order the host's preferred backend, and a DeviceIdentity, whose
//     Fingerprint keys the host's pipeline cache. An unavailable adapter says why in
//     Reason, ending with "Fix: …".
//   - Open prepares an adapter. It may be called again for the same adapter.
//   - Compile gets a validated *ir.Program, the specialization map, an optional
//     workgroup-size override and, on a pipeline-cache hit, the blob an earlier
//     Compile returned. It returns a pipeline handle of the backend's choosing and,
//     optionally, a blob for the host to cache (compiled device code). A blob from
//     the cache is untrusted input: if it cannot be used, compile from the program.
//   - Dispatch runs a pipeline over a grid of workgroups. Inputs are by binding (the
//     bytes of read and read_write buffers, nil for write buffers), OutputCounts
//     size the write buffers without a fixed count, and the result holds every
//     write and read_write buffer in binding order, with the semantics of
//     DESIGN.md's IR v1 (out-of-bounds loads give 0, write buffers start zeroed, …).
//     The host checks the outputs' number and sizes against the program.
//   - Release frees a pipeline; Close frees everything before the process exits.
//
// Every method takes the host's context: honour its deadline and return its error.
// Return Rejected(…) for a program, specialization or launch the backend cannot
// run, Unavailable(…) for an adapter that cannot be used, DeviceFailed(…) for a
// device failure; messages should say what failed with which value and end with
// "Fix: …" where the user can act. Do not recover panics: a panic crashes the
// process, and the host reports a crashed plugin and relaunches it.
//
// Serve owns the process's stdout and stderr: stdout carries only the handshake
// line (on Unix, stray writes to file descriptor 1 are sent to stderr); logs go to
// stderr as hclog JSON at the level named by KILN_LOG_LEVEL and appear in the host's
// log under the plugin's name. A plugin exits within about 200ms when its host dies,
// even by SIGKILL. Started by hand, a plugin binary prints a notice and exits.
//
// Test the backend in-process with the conformance kit, from the plugin's own test:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, mybackend.New(), conformance.Options{})
//	}
//
// It runs every corpus kernel at several sizes on the backend and compares the
// outputs with the CPU reference interpreter under DESIGN.md's rules. The
// examples/plugin folder is a complete minimal plugin, and plugins/cpuref the
// reference backend.
package pluginapi

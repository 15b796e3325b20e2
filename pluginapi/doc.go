// Package pluginapi is the SDK for kiln backend plugins, in the spirit of
// database/sql/driver: a plugin author implements [Backend] and calls [Serve]; the
// host starts the plugin executable, talks to it over hashicorp/go-plugin's gRPC
// transport, and sees the same interface on its side ([ClientConfig], [Dispense],
// [Conn]). The pluginapi/conformance package checks a Backend against the CPU
// reference on the standard kernel corpus.
//
// The wire (internal/wire/proto) carries the program in ir's canonical encoding;
// the SDK decodes it and, before a backend sees it, runs ir.Validate, checks the
// specialization map against the program's parameters and the workgroup override
// ([CheckCompile]) and every dispatch against its pipeline's program
// ([CheckLaunch]), rejecting anything else with a [RejectedError]; [Checked] is
// that layer, which the conformance kit puts in front of the backend it checks
// too. A backend checks only what depends on its device. Buffers are byte slices
// on both sides. Typed errors ([RejectedError], [UnavailableError], [DeviceError])
// cross the wire as gRPC status codes with a kiln marker and come back as the same
// type with the same message; a deadline or cancellation wraps the context error; a
// broken connection (the plugin crashed) stays an untyped gRPC Unavailable error,
// for the host to turn into its own crashed-plugin error.
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
//     adapter has a [DeviceProfile], whose [DeviceProfile.CapabilityScore],
//     TimingQuality and MemBWGBps order the host's preferred backend, and a
//     [DeviceIdentity], whose [DeviceIdentity.Fingerprint] keys the host's pipeline
//     cache. An unavailable adapter says why in Reason, ending with "Fix: …".
//   - Open prepares an adapter. It may be called again for the same adapter.
//   - Compile gets a validated *ir.Program, the specialization map, an optional
//     workgroup-size override and, on a pipeline-cache hit, the blob an earlier
//     Compile returned. It returns a pipeline handle of the backend's choosing and,
//     optionally, a blob for the host to cache (compiled device code). A blob from
//     the cache is untrusted input: if it cannot be used, compile from the program.
//   - Dispatch runs a pipeline over a grid of workgroups. Inputs are by binding (the
//     bytes of read and read_write buffers, nil for write buffers), OutputCounts
//     size the write buffers without a fixed count, Uniforms is the program's
//     uniform block, and the result holds every write and read_write buffer in
//     binding order, with the semantics of docs/design.md, "IR v1" (out-of-bounds
//     loads give 0, write buffers start zeroed, …). The host checks the outputs'
//     number and sizes against the program.
//   - Release frees a pipeline; Close frees everything before the process exits.
//
// Every method takes the host's context: honour its deadline and return its error.
// Return [Rejected] for a program, specialization or launch the backend cannot
// run, [Unavailable] for an adapter that cannot be used, [DeviceFailed] for a
// device failure; messages should say what failed with which value and end with
// "Fix: …" where the user can act. Do not recover panics: a panic crashes the
// process, and the host reports a crashed plugin and relaunches it.
//
// # Optional interfaces
//
// The core Backend never grows. Each capability added since is an interface of its
// own that a backend may also implement; Serve finds them with type assertions, the
// plugin answers "unimplemented" for the others, and the host adapts
// ([Capabilities.Missing] says how, and `kiln doctor` prints it):
//
//   - [Buffers] and [Submitter]: buffers that live on the device until freed, and
//     ordered batches of dispatches, copies and fills over them ([SubmitRequest]).
//     The SDK checks every range against its table of live buffers before the
//     backend sees it. A backend that can run on host memory keeps a UsageMap
//     buffer in [AllocRequest.Shared] and reports it Mapped: the host then fills
//     and reads it in place. Without both interfaces the host keeps buffers itself
//     and sends their bytes with each Dispatch.
//   - [Artifacts]: the device code a program compiles to, for `kiln compile`.
//   - [HealthChecker]: whether the devices still work.
//   - [Segments]: notices of the data plane's shared segments as the SDK maps and
//     unmaps them, so a GPU backend can register the memory with its driver and
//     copy from and to it directly; [AllocRequest.SharedSegment] and
//     [AllocRequest.SharedOffset] place a mapped buffer in its segment, and
//     [ViewOffset] places any other view the SDK hands over.
//   - [PeerCopier]: copies between two of the backend's buffers, on one adapter
//     or across two (CUDA peer access), without the bytes leaving the plugin;
//     without it the host's CopyBuffer moves them through the host.
//
// [CapabilitiesOf] reports which ones a backend implements.
//
// # Concurrent calls
//
// What a backend may assume about the calls of the data plane (the Buffers,
// Submitter and Segments methods and the inline Dispatch): the calls for one
// adapter (AllocBuffer on it, WriteBuffer, ReadBuffer and FreeBuffer of its
// buffers, Submit on it) arrive one at a time, in the order the host sent them,
// so a write and then a submit that reads the buffer, or a submit and then a
// free, stay in that order. A backend that implements [ConcurrentAdapters]
// (returning true) gets one queue per adapter: calls for different adapters, a
// Dispatch, and the Segments notices of staging segments may run at the same
// time, and it must be safe for that (a device lock per adapter, its tables
// under a mutex). Any other backend gets every data-plane call one at a time in
// the host's order, as a backend written for serial calls expects; the SDK still
// reads the host's next requests while one runs. Calls over gRPC (Describe,
// Compile, Release, and every call without a data plane) may come concurrently
// with anything, as [Backend] says. Completions go back in the order calls
// finish; across adapters there is no order (the host's caller orders them by
// waiting). Each queue holds at most 64 requests: when one is full the SDK stops
// reading until it has room, so the host's callers wait and nothing is dropped.
//
// # Protocols and the data plane
//
// Protocol 1 ([ProtocolV1]) is the Backend gRPC service alone. Protocol 2
// ([ProtocolV2]) adds the Device service: the optional interfaces over gRPC, and
// on Linux a shared-memory data plane that carries buffer bytes, submits and the
// inline Dispatch without gRPC. [Serve] offers both (limit them with [Protocols] or
// $KILN_PLUGIN_PROTOCOLS); go-plugin picks the newest the host also offers.
//
// What a backend sees of the data plane: buffer bytes in shared memory, handed
// over as []byte views (a backend with [Segments] is told of each segment), and
// the calls of "Concurrent calls" above. The sockets, rings and frames are the
// SDK's business, not the backend's: their format is package internal/wire's.
// [ServeInProcess] runs both sides inside one process, for a plugin's own tests.
//
// docs/design.md ("Protocol v2: buffers, submits, shared memory, fast path") tells
// the whole story.
//
// # Output, host death, testing
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
// outputs with the CPU reference interpreter under the rules of docs/design.md,
// "Conformance kit". The examples/plugin folder is a complete minimal plugin, and
// plugins/cpuref the reference backend.
package pluginapi

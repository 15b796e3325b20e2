// Package pluginapi is the SDK for kiln backend plugins, in the spirit of
// database/sql/driver: a plugin author implements [Backend] and calls [Serve]; the
// host starts the plugin executable, talks to it over hashicorp/go-plugin's gRPC
// transport, and sees the same interface on its side ([ClientConfig], [Dispense],
// [Conn]). The pluginapi/conformance package checks a Backend against the CPU
// reference on the standard kernel corpus.
//
// The wire (pluginapi/proto) carries the program in ir's canonical encoding; the SDK
// decodes it and runs ir.Validate before a backend sees it, checks the
// specialization map against the program's parameters and the workgroup override's
// shape, and rejects anything else with a [RejectedError]. Buffers are byte slices
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
// The data plane: after Describe, the host asks the plugin to open it; the plugin
// listens on a unix socket in a new private directory and returns its path and a
// random token; the host connects (the plugin checks the peer's user and removes
// the socket) and sends the token in its first frame, the hello, together with
// the ring segment (below). Buffer bytes travel in memfd segments both processes
// map, each handed to the plugin with SCM_RIGHTS (the memfd holds the announced
// size rounded up to whole pages, and both sides map all of it); the backend only
// ever sees []byte views of them, and a backend with [Segments] is told of each
// one. The host checks every size it gets back against what it asked for, and a
// frame or ring index that breaks the format closes the plane ([ProtocolError]).
// [ServeInProcess] runs all of it inside one process, for a plugin's own tests.
//
// # Rings
//
// Requests and completions travel through two single-producer, single-consumer
// byte rings in one more memfd, the ring segment ([RingSegmentName]), which the
// host creates and sends with the hello frame. Its first page holds a header (u64
// magic "kilnring", u32 version 1, u32 request ring size, u32 completion ring
// size) and a control block per ring, at offsets 256 (requests, host to plugin)
// and 512 (completions, plugin to host); the request ring's 2 MiB of data start at
// 4096 and the completion ring's 64 KiB follow. A control block has four words,
// each on a 64-byte line of its own:
//
//	+0    u64  head: bytes published; written by the producer only
//	+64   u64  tail: bytes consumed; written by the consumer only
//	+128  u32  sleeping: 1 while the consumer may sleep; written by the consumer only
//	+192  u32  wake: the futex word, bumped to wake the consumer
//
// Indices count bytes and never wrap; byte i lies at i mod size, so a frame may
// run over the ring's end. The producer copies a whole frame in, then stores
// head; the consumer copies the whole frame out into its own memory, then stores
// tail. A consumer that finds no frame polls head for up to 50 µs when it expects
// one soon (the host after a request, the plugin after an answer), back to back
// at first (the first 20 µs on machines of at least 4 CPUs) and then yielding the
// CPU between looks, then stores sleeping = 1, reads wake, looks at head once
// more and sleeps in FUTEX_WAIT on wake (at most 100 ms, then it checks that the
// peer's end of the socket is still open). A producer stores head, then reads
// sleeping, and only when it is set bumps wake and calls FUTEX_WAKE: while both
// sides are busy a round trip makes no system call. A frame with a descriptor
// keeps its place: the host sends the descriptor on the socket first, with an
// 8-byte note holding the frame's sequence number, then publishes the frame, and
// the plugin takes the note when it reads the frame. The socket stays open as
// the liveness channel: either side closing it ends the plane at once.
//
// Neither side trusts the other's words. A consumer accepts a head only if it
// does not move back and is at most a ring ahead of its own tail, then needs a
// whole header within what was published, a frame size within its direction's
// limit and within what was published, and decodes the frame from its private
// copy; a producer accepts a tail only if it does not move back and does not
// pass its own head. On the host any failed check closes the plane with a
// ProtocolError; on the plugin it ends the plane.
//
// # Frame format
//
// Frames are little-endian records in the data plane's rings (the hello frame
// alone goes on the socket). Reserved bytes and padding are zero; variable parts
// (tokens, uniform bytes, messages) are padded to a multiple of 8 bytes; a request
// frame is at most 1 MiB. Every frame starts with a 16-byte header:
//
//	offset 0  u32  size of the frame, header included
//	offset 4  u8   kind
//	offset 5  u8   flags: bit 0 set when a file descriptor rides with the frame;
//	               bit 1 set on a completion that carries a spans trailer
//	offset 6  u16  zero
//	offset 8  u64  sequence number (the host's; a completion repeats its request's)
//
// Requests, host to plugin (a "staged range" is u32 segment, u32 zero, u64 offset,
// u64 size: bytes of a segment the host attached):
//
//	1 hello     u32 n, u32 0, n token bytes (n <= 64); the ring segment's
//	            memfd rides along
//	2 attach    u32 segment, u32 0, u64 size; a memfd rides along
//	3 detach    u32 segment, u32 0
//	4 alloc     u32 adapter, u32 usage, u64 size, u32 segment, u32 0;
//	            a memfd rides along when segment is not 0
//	5 free      u64 buffer
//	6 write     u64 buffer, u64 offset, staged range (the bytes to write)
//	7 read      u64 buffer, u64 offset, staged range (where the bytes go)
//	8 submit    u32 adapter, u32 n, n commands
//	9 dispatch  u64 pipeline, u32 grid x, y, z, u32 n, n bindings (u32 has-input,
//	            u32 output count, staged range of the input), u32 m, u32 uniform
//	            length, m staged ranges for the outputs, the uniform bytes
//	11 copy     source, then destination, each u64 buffer, u64 offset, u64 size
//	            (PeerCopier.PeerCopy; sent only to a plugin that reported it)
//
// A submit command is u8 opcode, three zero bytes, u32 length of the record (these
// 8 bytes included), then: opcode 1 dispatch — u64 pipeline, u32 grid x, y, z,
// u32 n bindings, u32 uniform length, u32 0, n × (u64 buffer, u64 offset, u64
// size), the uniform bytes; opcode 2 copy — source and destination, each u64
// buffer, u64 offset, u64 size; opcode 3 fill — destination range, u32 value, u32 0.
//
// Every request gets one completion, kind 10: u32 status (0 ok, 1 rejected, 2
// unavailable, 3 device error, 4 cancelled, 5 deadline exceeded, 6 other error, 7
// unimplemented, 8 bad result), u32 message length (at most 16 KiB), then for a
// status of 0 the result of the request's kind — alloc: u64 buffer, u32 mapped (0
// or 1), u32 0; submit: i64 host nanoseconds, i64 device nanoseconds; dispatch: the
// two times, u32 m (the request's output count), u32 0, m × u64 output size — and
// the message; with flag bit 1 (a submit's or dispatch's completion, from a plugin
// started with SpansEnv) a spans trailer follows: u32 n (1 to 8), u32 0, n × (u32
// kind, u32 0, i64 start, i64 end) on CLOCK_MONOTONIC. A request whose caller gave
// up is cancelled with the Device service's Cancel call.
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

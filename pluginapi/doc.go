// Package pluginapi is the SDK for kiln backend plugins, in the spirit of
// database/sql/driver: a plugin author implements [Backend] and calls [Serve]
// from the plugin's main:
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
// The executable, named kiln-backend-<name> in the host's plugins directory, is
// started by the host over hashicorp/go-plugin's gRPC transport. The SDK decodes
// and checks every request before a backend sees it — ir.Validate, the
// specialization map against the program's parameters and the workgroup override
// ([CheckCompile]), every dispatch against its pipeline's program ([CheckLaunch]),
// buffer ranges against its table of live buffers — and refuses anything else
// with a [RejectedError]. [Checked] is that layer; the conformance kit puts it in
// front of the backend it checks too, so a backend checks only what depends on
// its device. Return [Rejected], [Unavailable] or [DeviceFailed] so the host sees the right
// kind of error; each crosses the wire and comes back as the same type with the
// same message.
//
// The core Backend never grows. Each capability added since is an optional
// interface a backend may also implement, found with type assertions as
// database/sql/driver does ([CapabilitiesOf] reports which): [Buffers] and
// [Submitter] (buffers that stay on the device and ordered batches over them),
// [Artifacts] (device code for `kiln compile`), [HealthChecker], [Segments]
// (the data plane's shared memory, to register with a driver), [PeerCopier]
// (copies between the backend's own buffers), [ConcurrentAdapters] (which
// also says what a backend may assume about concurrent calls), [Pipelined]
// (submits, writes and reads started on the device without the adapter's queue
// waiting for them) and [DispatchStarter] (v1 dispatches started the same way).
// For each one a backend lacks, the host adapts.
//
// Protocol 1 ([ProtocolV1]) is the Backend gRPC service alone; protocol 2
// ([ProtocolV2]) adds the optional interfaces and, on Linux, a shared-memory
// data plane for buffer bytes, submits and the inline Dispatch. Serve offers
// both ([Protocols] or $KILN_PLUGIN_PROTOCOLS limit them). A backend sees the
// data plane only as []byte views of shared memory; its sockets, rings and
// frames are the SDK's (package internal/wire's format).
//
// Serve owns stdout (the handshake line alone; stray writes go to stderr) and
// logs to stderr as hclog JSON at the level of $KILN_LOG_LEVEL; a plugin exits
// within about 200ms when its host dies, and started by hand it prints a notice
// and exits. Test a backend with the conformance kit, pluginapi/conformance,
// which runs the kernel corpus on it and compares the outputs with the CPU
// reference; [ServeTest] serves it in process over the real wire for a host's
// test harness. examples/plugin is a complete minimal plugin, plugins/cpuref the
// reference backend, and docs/design.md ("Wire between host and plugin",
// "Protocol v2: buffers, submits, shared memory, fast path") the whole story.
package pluginapi

// Command kiln-backend-example is a minimal third-party kiln backend plugin, built
// only on the public SDK (pluginapi) as an outside author would write one. Its
// "device" is kiln's CPU interpreter: where this example calls interp.Compile and
// Kernel.Run, a real backend compiles the program for its device (SPIR-V, PTX, …)
// and runs it there. Its test runs the conformance kit (pluginapi/conformance).
//
// Install it by building it into the host's plugins directory:
//
//	go build -o bin/plugins/kiln-backend-example ./examples/plugin
//
// It reports itself as "example-cpu", not a reference oracle, so once installed the
// host may pick it as the preferred backend.
package main

// Command kiln-backend-cpuref is the CPU reference backend plugin (id "cpu-ref"):
// the interpreter of ir/interp served over pluginapi. The host starts
// it from its plugins directory; run by hand it prints a notice and exits. Build it
// with
//
//	go build -o bin/plugins/kiln-backend-cpuref ./plugins/cpuref
package main

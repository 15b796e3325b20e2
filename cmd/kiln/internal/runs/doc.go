// Package runs is what `kiln run` does: it turns a corpus kernel or a program file
// with its command-line inputs into a host.Launch, dispatches it, and verifies the
// outputs against the CPU reference backend (cpu-ref, run as a plugin like any
// other) with the conformance kit's comparison (verify.Outputs, which also runs
// the program's accepted variants there when the outputs differ); for corpus kernels the
// kernel's plain-Go reference is checked as well. All runs every corpus kernel on
// every ready backend, cpu-ref included.
package runs

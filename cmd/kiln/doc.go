// Command kiln is the command-line face of the host package: it lists the
// backends in the plugins directory (kiln backends), runs corpus kernels or
// program files on them with optional verification against the CPU reference
// (kiln run), diagnoses the installation and its stores (kiln doctor), measures
// the plugin boundary (kiln bench), maintains the pipeline cache (kiln cache),
// records PGO routes (kiln certify) and emits a program's SPIR-V (kiln
// compile). It is thin: the work is done by host, the store packages and the
// packages under cmd/kiln/internal. Every listing takes --json.
package main

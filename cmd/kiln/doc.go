// Command kiln is the command-line face of the host package: it lists the
// backends in the plugins directory (kiln backends), runs corpus kernels or
// program files on them with optional verification against the CPU reference
// (kiln run), diagnoses the installation (kiln doctor) and measures the plugin
// boundary (kiln bench). It is thin: the work is done by host and the packages
// under cmd/kiln/internal. Every listing takes --json.
package main

// Package testbuild serves the test binaries that build kiln's executables and
// run them on stores of their own: Isolate moves the XDG homes out of the
// user's way, and the Env it returns still builds packages with the user's Go
// build cache. It is imported by tests only.
package testbuild

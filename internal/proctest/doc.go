// Package proctest runs the multi-process tests of the stores that processes
// share (autotune, pgo, cache, atomicfile, filelock): it re-executes the test
// binary as a child that runs only the package's TestHelperProcess, with the
// child's role in its environment, starts and waits for a group of such
// children, and kills a looping child at a random moment once it has said
// "ready". It is imported by tests only.
package proctest

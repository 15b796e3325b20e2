// Package driver binds the part of the CUDA driver API (libcuda.so.1) that kiln's
// CUDA backend uses. The library is opened at run time with purego, so building
// needs no CUDA headers or toolkit, and a program that imports the package starts
// on a machine without an NVIDIA driver: Load then returns a
// *LibraryMissingError.
//
// Every call that fails returns an *Error naming the driver function and its
// CUresult by name and description (from cuGetErrorName and cuGetErrorString).
// Sticky reports the results after which a context is unusable (an illegal
// address, a failed launch, ...): the process needs a new context, in practice a
// restart.
//
// CUDA's current context is per OS thread. Context.Do locks the calling goroutine
// to its thread and makes the context current for the duration of a function;
// every method of Context other than Do and Release must be called inside Do.
//
// Pointers into Go memory are passed for the length of a call only, as cgo's rules
// require, with two exceptions that hold pinned memory (runtime.Pinner): Params,
// which keeps kernel arguments where cuLaunchKernel reads them, and Link, which
// keeps its log buffer pinned while the linker writes into it.
package driver

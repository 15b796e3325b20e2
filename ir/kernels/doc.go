// Package kernels is kiln's standard kernel corpus: a fixed set of IR programs that
// every backend must run correctly, used for conformance and benchmarks.
//
// Each Kernel bundles the program's builder, its committed JSON file (embedded, see
// JSON), a generator of random cases for a problem size, a plain-Go reference that
// computes the expected outputs, and a Check that compares a backend's outputs with
// the reference: bit for bit where the kernel does the very same rounded operations
// as the reference, within a bound stated in the kernel's source where it does not
// (package verify, ir/verify, does the comparing).
//
// Five kernels use IR v1.1: matmul takes its shape as uniforms (one compile for
// every shape) and stages tiles of any depth up to the workgroup's sides;
// matmul_reg, register-tiled, keeps a block of c per invocation in registers
// (at stages = 2 with ping-pong tiles and register prefetch, at vec = 4 with
// runs of adjacent columns for wide shared loads);
// subgroup_sum reduces with subgroup operations at any subgroup size; scatter_add
// adds f32 values with compare-exchange loops; softmax reduces rows in shared
// memory. A Case carries the uniform block its dispatch needs (Case.Uniforms).
// Every kernel runs clean under the interpreter's strict mode.
//
// Two kernels use IR v1.2: vector_add_f16 adds f16 vectors, and matmul_tc
// multiplies on workgroup matrices (bf16, f16 or f32 operands, f32
// accumulation) with small-integer inputs whose sums are exact on every
// backend. A matrix's shape is fixed in its program, so matmul_tc's element
// type and tile shape are options (Option, Kernel.Configure) that build its
// program; `--spec type=f16` sets them.
//
// vector_add, matmul and matmul_reg declare tunables (parameters with
// candidates) that change speed, never results, and set Kernel.Invocations, so
// a tuner may vary their workgroup size and tunables (Kernel.Retune); see
// docs/design.md, "Tunables".
//
// The JSON files in json/ are generated from the builders; regenerate them with
//
//	go test ./ir/kernels -update
package kernels

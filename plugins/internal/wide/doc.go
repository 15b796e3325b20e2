// Package wide finds the runs of 16-bit accesses that the IR emitters (PTX in
// plugins/cuda/ptx, SPIR-V in plugins/vulkan/spirv) turn into one wide access.
// A run is N consecutive statements of one block (N = 8, 4 or 2) that load, or
// store, elements base+0 … base+N−1 of one buffer:
//
//	loads:  let (or assign) d_k = load(buf, base+k)   for k = 0 … N−1
//	stores: store(buf, base+k, v_k)                   for k = 0 … N−1
//
// base is a local (let, var or loop counter) that no statement of the run
// rebinds; base+0 may be written base. The stored values v_k read no memory,
// so computing them all before the first store is what the statements do one
// after the other. Which buffers qualify (16-bit elements) and the run-time
// guards (in bounds, aligned) are the emitter's; [Match] only reads the IR.
//
// Only the emitters import it; it imports ir, never a plugin.
package wide

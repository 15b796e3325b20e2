// Package scope holds the scope and block structure the IR emitters (PTX in
// plugins/cuda/ptx, SPIR-V in plugins/vulkan/spirv) share: a stack of lexical
// scopes ([Stack]), a block that emits its statements in a scope of its own
// until one cannot be reached ([Block]), and the type check of an operand
// ([Typed]). What a name is bound to is the emitter's own type.
//
// Only the emitters import it; it imports ir, never a plugin.
package scope

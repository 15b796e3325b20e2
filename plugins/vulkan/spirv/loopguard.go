package spirv

import "github.com/kiln-dev/kiln/ir"

// The loop guard (Target.LoopGuard) makes a driver's loop limit visible instead
// of silent. Mesa's llvmpipe (lavapipe) counts every pass through the end of
// every loop of a shader, for all of its loops together, and once the count
// reaches 65535 it leaves each loop at its back edge, whatever the loop's
// condition says (gallivm's loop limiter, LP_MAX_TGSI_LOOP_ITERATIONS), so a
// program whose invocation loops longer computes wrong values without any
// error. No loop form avoids it: the limit is on the shader's loops together.
//
// A guarded module records, for each loop, whether the invocation left it the
// way the program says, and reports every other way out in the guard buffer:
//
//   - The guard buffer is one more storage buffer, at binding len(buffers)
//     (after the program's), of two u32 words the backend zeroes before the
//     dispatch: word 0 is the flag the module sets, word 1 stays 0 and is
//     loaded once, in the entry block, as never = (word 1 != 0).
//   - A Function bool per loop depth, stored false before the loop, is stored
//     true where the loop ends as the program says: the header's exit when the
//     condition is false (a block of its own) and every break.
//   - The back edge is OpBranchConditional never merge header. The branch to the
//     merge block is never taken, but the compiler cannot know that, so it
//     cannot prove the bool true at the merge block; a driver's forced exit
//     leaves from the back edge too and arrives with the bool false.
//   - The merge block tests the bool and, when it is false, sets word 0 with
//     OpAtomicOr (Device scope, relaxed); the backend turns a set flag into an
//     error and never returns the dispatch's outputs as its result.
//
// Without Target.LoopGuard none of this is emitted.

// loopGuard is the guard's state in the emitter.
type loopGuard struct {
	// buffer is the guard buffer's variable, 0 until the first loop; never
	// the bool loaded from its word 1.
	buffer, never uint32
	// left holds the Function bool of each loop depth, declared on first use.
	left []uint32
}

// Words of the guard buffer.
const (
	guardFlagWord  = 0
	guardNeverWord = 1
	// GuardBytes is the size of the guard buffer the backend binds.
	GuardBytes = 8
)

// enterLoop returns the bool that records a normal exit of a loop at the
// current depth, stored false, or 0 without Target.LoopGuard. It declares the
// guard buffer on the first loop.
func (e *emitter) enterLoop() uint32 {
	if !e.target.LoopGuard {
		return 0
	}
	if e.guard.buffer == 0 {
		e.declareGuard()
	}
	depth := len(e.loops)
	for len(e.guard.left) <= depth {
		id := e.id()
		e.vars = appendInst(e.vars, opVariable, e.pointer(storageFunction, e.bool()), id, storageFunction)
		e.guard.left = append(e.guard.left, id)
	}
	left := e.guard.left[depth]
	e.inst(opStore, left, e.constant(ir.LitBool(false)))
	return left
}

// declareGuard declares the guard buffer at binding len(buffers) and loads
// never in the entry block.
func (e *emitter) declareGuard() {
	u := e.u32()
	st := e.global(opTypeStruct, false, e.runtimeArray(u, 4))
	e.decorate(st, decorationBlock)
	e.memberDecorate(st, 0, decorationOffset, 0)
	v := e.global(opVariable, true, e.pointer(storageStorageBuffer, st), storageStorageBuffer)
	e.decorate(v, decorationDescriptorSet, 0)
	e.decorate(v, decorationBinding, uint32(len(e.prog.Buffers)))
	e.name(v, "kiln_loop_guard")
	ptr, word, never := e.id(), e.id(), e.id()
	e.preamble = appendInst(e.preamble, opAccessChain, e.pointer(storageStorageBuffer, u), ptr, v, e.cu32(0), e.cu32(guardNeverWord))
	e.preamble = appendInst(e.preamble, opLoad, u, word, ptr)
	e.preamble = appendInst(e.preamble, opINotEqual, e.bool(), never, word, e.cu32(0))
	e.dynamic[word], e.dynamic[never] = true, true
	e.guard.buffer, e.guard.never = v, never
}

// loopHeaderBranch ends a loop header: to body while cond holds, else to the
// merge block, through a block that stores left true when the loop is guarded.
func (e *emitter) loopHeaderBranch(cond, body, merge, left uint32) {
	if left == 0 {
		e.terminate(opBranchConditional, cond, body, merge)
		return
	}
	exit := e.id()
	e.terminate(opBranchConditional, cond, body, exit)
	e.label(exit)
	e.inst(opStore, left, e.constant(ir.LitBool(true)))
	e.terminate(opBranch, merge)
}

// backEdge ends a loop's continue block: back to the header, or, guarded, to
// the header unless never holds.
func (e *emitter) backEdge(header, merge, left uint32) {
	if left == 0 {
		e.terminate(opBranch, header)
		return
	}
	e.terminate(opBranchConditional, e.guard.never, merge, header)
}

// checkLoopExit, at a guarded loop's merge block, sets the guard's flag when
// the invocation arrived without leaving the loop as the program says.
func (e *emitter) checkLoopExit(left uint32) {
	if left == 0 {
		return
	}
	ok := e.op(opLoad, e.bool(), left)
	done, flag := e.id(), e.id()
	e.inst(opSelectionMerge, done, selectionControlNone)
	e.terminate(opBranchConditional, ok, done, flag)
	e.label(flag)
	u := e.u32()
	ptr := e.op(opAccessChain, e.pointer(storageStorageBuffer, u), e.guard.buffer, e.cu32(0), e.cu32(guardFlagWord))
	e.op(opAtomicOr, u, ptr, e.cu32(scopeDevice), e.cu32(semanticsNone), e.cu32(1))
	e.terminate(opBranch, done)
	e.label(done)
}

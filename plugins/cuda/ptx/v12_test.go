package ptx

import (
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// dispatch12 is dispatchCase for IR v1.2 programs. Until ir.Validate takes
// every v1.2 program (the validation lands on its own branch), a program it
// rejects is emitted past it, with emit, so the emitter's v1.2 code is pinned
// already; once Validate accepts the program this is dispatchCase.
func dispatch12(p *ir.Program, c kernels.Case, uniformBlock []byte) ([][]byte, error) {
	return dispatch12On(Target{}, p, c, uniformBlock)
}

// dispatch12On is dispatch12 for a module emitted for target.
func dispatch12On(target Target, p *ir.Program, c kernels.Case, uniformBlock []byte) ([][]byte, error) {
	m, err := emit12(p, Options{Target: target, Spec: c.Spec, WorkgroupSize: c.WorkgroupSize, NonCoherentReads: true})
	if err != nil {
		return nil, err
	}
	return runModule(m, p, c, uniformBlock)
}

// emit12 is Emit, but for an IR v1.2 program ir.Validate does not take yet,
// which it emits past the validation (see dispatch12).
func emit12(p *ir.Program, opts Options) (*Module, error) {
	if ir.Validate(p) != nil && (p.Uses16BitTypes() || p.UsesMatrices()) {
		return emit(p, opts)
	}
	return Emit(p, opts)
}

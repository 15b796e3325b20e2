package interp

import (
	"context"
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// DefaultSubgroupSize is the subgroup size the interpreter emulates for a program
// that leaves it open, when Options do not name one and it divides the workgroup.
const DefaultSubgroupSize = 32

// Options fix what a GPU backend fixes at pipeline compile time.
type Options struct {
	// WorkgroupSize overrides the program's workgroup size when it is not the zero
	// value; each axis must be at least 1 and the product at most 1024.
	WorkgroupSize [3]uint32
	// Spec overrides parameter defaults by name; every name must be a parameter of
	// the program and every value must have that parameter's type.
	Spec ir.SpecMap
	// SubgroupSize is the subgroup size to emulate (IR v1.1): a power of two up to
	// ir.MaxSubgroupSize that divides the workgroup's invocation count. A program
	// that fixes its subgroup size runs with that size, and naming another here is
	// an error. 0 emulates the program's size, else DefaultSubgroupSize, else the
	// largest power of two below it that divides the workgroup.
	SubgroupSize uint32
	// Strict turns on strict mode: a run that races on shared memory — a lane
	// reading or writing a word another lane wrote, read or updated atomically since
	// the last barrier, two lanes writing one word — or that reads shared memory no
	// lane of the workgroup wrote, or indexes a shared array out of bounds — or
	// whose matrix statements (IR v1.2) get operands that differ between
	// invocations, read a matrix the workgroup has not written, or race with the
	// invocations' own shared accesses — stops with a *StrictError instead of
	// returning outputs. See docs/design.md, "The oracle and strict mode".
	Strict bool
}

// Launch is one dispatch.
type Launch struct {
	// Grid is the number of workgroups on each axis; an axis of 0 runs nothing (the
	// outputs are still returned).
	Grid [3]uint32
	// Inputs is indexed by binding: the little-endian data of read and read_write
	// buffers (whole elements: 2 bytes each for f16 and bf16, 4 for the other types;
	// exactly Count elements for a buffer with a fixed Count), nil for write buffers.
	// It may be shorter than the buffer list when the missing bindings are write
	// buffers or empty inputs. Outputs come back in the same layout.
	Inputs [][]byte
	// OutputCounts is indexed by binding and may be shorter or nil: the element count
	// of each write buffer without a fixed Count (missing means 0). Other entries are
	// ignored.
	OutputCounts []uint32
	// Uniforms is the program's uniform block (IR v1.1): 4 little-endian bytes per
	// uniform, in declaration order (ir.EncodeUniforms packs it); empty for a
	// program without uniforms.
	Uniforms []byte
}

// Kernel is a program compiled for execution. It is immutable and safe for
// concurrent use.
type Kernel struct {
	prog *ir.Program
	wg   [3]uint32
	// group is the number of invocations of a workgroup; lanes the width of the
	// registers: batch workgroups of group lanes each (batch > 1 only for programs
	// without barriers and shared arrays, whose workgroups are independent).
	group   int
	batch   int
	lanes   int
	sgSize  int  // the emulated subgroup size
	strict  bool // strict mode checks every shared-memory access
	linear  bool // global_id(0) is base + lane: a workgroup is one row of x
	sites   []site
	body    stmtFn
	params  map[string]ir.Literal
	localID [3][]uint32
	// used builtins that change per workgroup, filled only when a program reads them
	usesGlobal [3]bool
	usesGroup  [3]bool
	atomicBuf  []bool // by binding: buffer is an atomic target, so every access is atomic
	elemSizes  []int  // by binding: the bytes of one element in the caller's memory
	returns    bool   // the program has a return statement
	nLocals    int
	nTemps     int
	nMasks     int
	// workers overrides the number of worker goroutines when > 0 (tests use it).
	workers int
	// pool keeps per-run scratch memory between runs (pool.go).
	pool *scratchPool
}

// Compile validates p (ir.Validate) and compiles it once into an executable form.
func Compile(p *ir.Program, opts Options) (*Kernel, error) {
	if p == nil {
		return nil, fmt.Errorf("interp: no program to compile. Fix: pass a *ir.Program")
	}
	if err := ir.Validate(p); err != nil {
		return nil, fmt.Errorf("interp: program %q is invalid: %w", p.Name, err)
	}
	return compile(p, opts)
}

// compile compiles a non-nil program that Validate accepted; the compiler still
// checks what it relies on (types, names, shapes) and errs instead of panicking.
func compile(p *ir.Program, opts Options) (*Kernel, error) {
	wg := p.WorkgroupSize
	if opts.WorkgroupSize != ([3]uint32{}) {
		wg = opts.WorkgroupSize
		if err := ir.CheckWorkgroupSize(wg); err != nil {
			return nil, fmt.Errorf("interp: program %q: bad workgroup size override: %w", p.Name, err)
		}
	}
	n := int(wg[0] * wg[1] * wg[2]) // at most ir.MaxInvocations, checked by Validate or above
	params, err := resolveParams(p, opts.Spec)
	if err != nil {
		return nil, err
	}
	sg, err := subgroupSize(p, wg, opts.SubgroupSize)
	if err != nil {
		return nil, err
	}
	k := &Kernel{prog: p, wg: wg, group: n, batch: 1, sgSize: int(sg), strict: opts.Strict, params: params, pool: &scratchPool{},
		linear: wg[1] == 1 && wg[2] == 1}
	if len(p.Shared) == 0 && len(p.Matrices) == 0 && !hasBarrier(p.Body) {
		// Independent workgroups run batch at a time, in registers of about
		// batchLanes lanes, so per-workgroup overhead is paid once per batch.
		k.batch = max(1, batchLanes/n)
	}
	k.lanes = k.batch * n
	for a := range k.localID {
		k.localID[a] = make([]uint32, k.lanes)
	}
	for l := range k.lanes {
		i := l % n
		x, y, z := i%int(wg[0]), i/int(wg[0])%int(wg[1]), i/int(wg[0]*wg[1])
		k.localID[0][l], k.localID[1][l], k.localID[2][l] = uint32(x), uint32(y), uint32(z)
	}
	if err := compileProgram(k); err != nil {
		return nil, err
	}
	return k, nil
}

// batchLanes is the register width the interpreter aims for when it runs several
// independent workgroups together.
const batchLanes = 2048

// subgroupSize picks the subgroup size to emulate (see Options.SubgroupSize).
func subgroupSize(p *ir.Program, wg [3]uint32, asked uint32) (uint32, error) {
	size := p.SubgroupSize
	switch {
	case size != 0 && asked != 0 && asked != size:
		return 0, fmt.Errorf("interp: program %q requires subgroups of %d lanes, but %d were asked for. Fix: leave Options.SubgroupSize 0 or set it to %d",
			p.Name, size, asked, size)
	case size == 0 && asked != 0:
		size = asked
	case size == 0:
		n := wg[0] * wg[1] * wg[2]
		size = DefaultSubgroupSize
		for n%size != 0 {
			size /= 2
		}
	}
	if err := ir.CheckSubgroupSize(wg, size); err != nil {
		return 0, fmt.Errorf("interp: program %q cannot run with subgroups of %d lanes: %w", p.Name, size, err)
	}
	return size, nil
}

// hasBarrier reports whether list holds a barrier statement.
func hasBarrier(list []ir.Stmt) bool {
	found := false
	ir.Inspect(list, func(node any) bool {
		_, barrier := node.(ir.BarrierStmt)
		found = found || barrier
		return !found
	})
	return found
}

// resolveParams gives every parameter its default or its specialization value.
func resolveParams(p *ir.Program, spec ir.SpecMap) (map[string]ir.Literal, error) {
	params := make(map[string]ir.Literal, len(p.Params))
	for _, d := range p.Params {
		params[d.Name] = d.Default
	}
	for _, name := range spec.Names() {
		d, ok := p.Param(name)
		if !ok {
			return nil, fmt.Errorf("interp: program %q has no parameter %q to specialize (parameters: %v). Fix: use one of the program's parameter names",
				p.Name, name, paramNames(p))
		}
		v, _ := spec.Get(name)
		lit, ok := v.Literal()
		if !ok || lit.Type != d.Type {
			return nil, fmt.Errorf("interp: program %q: parameter %q is %s but the specialization value is %s. Fix: pass a %s value",
				p.Name, name, d.Type, v, d.Type)
		}
		params[name] = lit
	}
	return params, nil
}

func paramNames(p *ir.Program) []string {
	names := make([]string, len(p.Params))
	for i, d := range p.Params {
		names[i] = d.Name
	}
	return names
}

// Program returns the program the kernel was compiled from.
func (k *Kernel) Program() *ir.Program { return k.prog }

// WorkgroupSize returns the workgroup size the kernel runs with (after any override).
func (k *Kernel) WorkgroupSize() [3]uint32 { return k.wg }

// SubgroupSize returns the subgroup size the kernel emulates.
func (k *Kernel) SubgroupSize() uint32 { return uint32(k.sgSize) }

// Run is Compile followed by Kernel.Run.
func Run(ctx context.Context, p *ir.Program, opts Options, l Launch) ([][]byte, error) {
	k, err := Compile(p, opts)
	if err != nil {
		return nil, err
	}
	return k.Run(ctx, l)
}

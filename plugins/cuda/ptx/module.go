package ptx

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// EntryPoint is the name of the kernel of every emitted module.
const EntryPoint = "kiln_main"

// ISAVersion is the PTX ISA version every module declares.
const ISAVersion = "7.0"

// MinDriverVersion is the oldest CUDA driver API version (as cuDriverGetVersion
// reports it: 1000·major + 10·minor) whose JIT accepts ISAVersion: CUDA 11.0.
const MinDriverVersion = 11000

// Target is the virtual architecture a module is written for, as an sm number
// (70 for sm_70).
type Target struct{ SM int }

// TargetFor returns the target for a device of compute capability major.minor:
// sm_80 from 8.0 on, sm_70 on 7.x. Older devices are refused: kiln's warp
// operations assume the independent thread scheduling of Volta and later.
func TargetFor(major, minor int) (Target, error) {
	switch {
	case major >= 8:
		return Target{SM: 80}, nil
	case major == 7:
		return Target{SM: 70}, nil
	}
	return Target{}, fmt.Errorf("compute capability %d.%d is older than the 7.0 (Volta) that kiln's PTX needs. Fix: use a GPU of compute capability 7.0 or newer", major, minor)
}

// String is the target's PTX name ("sm_80").
func (t Target) String() string { return fmt.Sprintf("sm_%d", t.SM) }

// Options say what to fold into a module.
type Options struct {
	// Target is the architecture of the .target directive; the zero Target is
	// sm_70.
	Target Target
	// Spec sets parameters; the others keep their defaults. A value whose type is
	// not the parameter's is an error.
	Spec ir.SpecMap
	// WorkgroupSize overrides the program's when non-zero.
	WorkgroupSize [3]uint32
}

// ParamKind says what a kernel parameter carries.
type ParamKind uint8

// The kernel parameter kinds.
const (
	// BufferPointer is the device address of a buffer (.u64).
	BufferPointer ParamKind = iota + 1
	// ElementCount is the element count of a buffer (.u32).
	ElementCount
)

// Param is one kernel parameter.
type Param struct {
	Kind ParamKind
	// Binding is the buffer's binding.
	Binding uint32
	// Name is the parameter's name in the module.
	Name string
}

// Bytes is the parameter's size: 8 for a pointer, 4 otherwise.
func (p Param) Bytes() int {
	if p.Kind == BufferPointer {
		return 8
	}
	return 4
}

// Module is an emitted kernel.
type Module struct {
	// Text is the PTX source.
	Text string
	// Entry is the kernel's name, always EntryPoint.
	Entry string
	// Target is the architecture of the .target directive.
	Target Target
	// WorkgroupSize is the block shape the kernel requires (.reqntid).
	WorkgroupSize [3]uint32
	// Params are the kernel parameters in order.
	Params []Param
	// SharedBytes is the static shared memory of the kernel.
	SharedBytes uint32
}

// Emit compiles p to a PTX module with DESIGN.md's IR semantics done in code (see
// the package documentation), folding the specialization values and the workgroup
// size of opts. Emit runs ir.Validate first and returns its error, wrapped, for an
// ill-formed program.
func Emit(p *ir.Program, opts Options) (*Module, error) {
	if p == nil {
		return nil, fmt.Errorf("ptx: no program to emit. Fix: pass a program built with ir.NewBuilder or ir.ParseJSON")
	}
	if err := ir.Validate(p); err != nil {
		return nil, fmt.Errorf("ptx: program %q is not valid IR, so no kernel was emitted: %w", p.Name, err)
	}
	if opts.Target.SM == 0 {
		opts.Target.SM = 70
	}
	wg := p.WorkgroupSize
	if opts.WorkgroupSize != ([3]uint32{}) {
		if err := ir.CheckWorkgroupSize(opts.WorkgroupSize); err != nil {
			return nil, fmt.Errorf("ptx: program %q: bad workgroup size override: %w", p.Name, err)
		}
		wg = opts.WorkgroupSize
	}
	params, err := foldParams(p, opts.Spec)
	if err != nil {
		return nil, fmt.Errorf("ptx: program %q: %w", p.Name, err)
	}
	e := newEmitter(p, wg, params)
	if err := e.emitKernel(); err != nil {
		return nil, fmt.Errorf("ptx: emitting program %q: %w", p.Name, err)
	}
	m := &Module{Entry: EntryPoint, Target: opts.Target, WorkgroupSize: wg, SharedBytes: e.sharedBytes}
	for _, b := range p.Buffers {
		m.Params = append(m.Params, Param{Kind: BufferPointer, Binding: b.Binding, Name: bufParam(b.Binding)})
	}
	for _, b := range p.Buffers {
		m.Params = append(m.Params, Param{Kind: ElementCount, Binding: b.Binding, Name: lenParam(b.Binding)})
	}
	m.Text = e.assemble(m)
	return m, nil
}

// foldParams returns every parameter's value: the specialization value when spec
// sets it, the default otherwise.
func foldParams(p *ir.Program, spec ir.SpecMap) (map[string]ir.Literal, error) {
	vals := make(map[string]ir.Literal, len(p.Params))
	for _, d := range p.Params {
		vals[d.Name] = d.Default
	}
	for _, name := range spec.Names() {
		d, ok := p.Param(name)
		if !ok {
			return nil, fmt.Errorf("no parameter %q to specialize. Fix: specialize only declared parameters", name)
		}
		v, _ := spec.Get(name)
		l, ok := v.Literal()
		if !ok || l.Type != d.Type {
			return nil, fmt.Errorf("parameter %q is %s but the specialization value is %s. Fix: pass a %s value", name, d.Type, v, d.Type)
		}
		vals[name] = l
	}
	return vals, nil
}

func bufParam(binding uint32) string { return fmt.Sprintf("kiln_buf%d", binding) }
func lenParam(binding uint32) string { return fmt.Sprintf("kiln_len%d", binding) }

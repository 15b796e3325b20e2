package ptx

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// EntryPoint is the name of the kernel of every emitted module.
const EntryPoint = "kiln_main"

// ISAVersion is the PTX ISA version every module declares (7.0 has redux.sync,
// which the integer subgroup reductions use on sm_80).
const ISAVersion = "7.0"

// MinDriverVersion is the oldest CUDA driver API version (as cuDriverGetVersion
// reports it: 1000·major + 10·minor) whose JIT accepts ISAVersion: CUDA 11.0.
const MinDriverVersion = 11000

// Target is the virtual architecture a module is written for, as an sm number
// (70 for sm_70). Target{SM: 90} is Hopper (compute capability 9.0) on a driver
// that takes PTX ISA 8.0: the tensor-core matmul runs there on wgmma, in a module
// of .target sm_90a (code for 9.0 devices only); every other module of that
// target is written for sm_80 (see Target.scalar).
type Target struct{ SM int }

// WgmmaDriverVersion is the oldest CUDA driver API version (CUDA 12.0) whose
// JIT accepts PTX ISA 8.0 and .target sm_90a, which wgmma needs.
const WgmmaDriverVersion = 12000

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

// TargetForDriver returns the target for a device of compute capability
// major.minor on a driver of version driverVersion (cuDriverGetVersion):
// sm_90 for a 9.0 device (H100, H200) on a driver of CUDA 12.0 or later, where
// the tensor-core matmul takes wgmma (sm_90a code runs on 9.0 devices only, so
// later architectures keep sm_80 and mma.sync); TargetFor's target otherwise,
// so an older driver gets the mma.sync path.
func TargetForDriver(major, minor, driverVersion int) (Target, error) {
	if major == 9 && minor == 0 && driverVersion >= WgmmaDriverVersion {
		return Target{SM: 90}, nil
	}
	return TargetFor(major, minor)
}

// scalar is the target of the modules that use no wgmma: sm_80 for sm_90 (their
// PTX ISA 7.0 knows no sm_90, and nothing they use is newer than sm_80), t
// itself otherwise.
func (t Target) scalar() Target {
	if t.SM > 80 {
		return Target{SM: 80}
	}
	return t
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
	// NonCoherentReads loads the elements of read buffers through the
	// non-coherent path (ld.global.nc), which streams faster but requires that
	// nothing writes that memory while the kernel runs: no write or read_write
	// binding of the same dispatch may overlap a read binding.
	NonCoherentReads bool
	// MaxDynamicSharedBytes is the most dynamic shared memory the backend can
	// launch a kernel with (the device's CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_
	// PER_BLOCK_OPTIN: 227 KiB on sm_90, 163 KiB on sm_80), 0 when it cannot go
	// over the 48 KiB a kernel may declare statically. The backend raises the
	// function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to the module's
	// DynamicSharedBytes and passes them to cuLaunchKernel. The tensor-core
	// matmul uses it for the pipelines of large tiles.
	MaxDynamicSharedBytes uint32
}

// ParamKind says what a kernel parameter carries.
type ParamKind uint8

// The kernel parameter kinds.
const (
	// BufferPointer is the device address of a buffer (.u64).
	BufferPointer ParamKind = iota + 1
	// ElementCount is the element count of a buffer (.u32).
	ElementCount
	// UniformValue is the 32-bit value of a uniform (.b32), IR v1.1.
	UniformValue
	// TensorMapParam is a tensor map the launch encodes (.align 64 .b8
	// [128], a CUtensorMap): Module.TensorMaps[Binding] says how.
	TensorMapParam
	// TensorMapsReady is 1 when the launch encoded every tensor map of the
	// module, 0 when one's Encoding or the driver refused (.u32): the kernel
	// then takes a path without them.
	TensorMapsReady
)

// Param is one kernel parameter.
type Param struct {
	Kind ParamKind
	// Binding is the buffer's binding, or the uniform's index in the program's
	// uniform list.
	Binding uint32
	// Name is the parameter's name in the module.
	Name string
}

// Bytes is the parameter's size: 8 for a pointer, 128 for a tensor map, 4
// otherwise.
func (p Param) Bytes() int {
	switch p.Kind {
	case BufferPointer:
		return 8
	case TensorMapParam:
		return 128
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
	// DynamicSharedBytes is the dynamic shared memory the kernel needs (0 for
	// none; at most Options.MaxDynamicSharedBytes): the launch raises the function's
	// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to it and passes it as
	// cuLaunchKernel's sharedMemBytes.
	DynamicSharedBytes uint32
	// SubgroupSize is the number of lanes of a subgroup as the kernel runs them
	// (see SubgroupSizeFor); 0 when the program uses no subgroup operation or
	// builtin.
	SubgroupSize uint32
	// TensorMaps are the tensor maps the launch encodes into the module's
	// TensorMapParam parameters (the wgmma path's TMA staging, tma.go).
	TensorMaps []TensorMap
}

// Emit compiles p to a PTX module with the IR semantics of docs/design.md, "The
// program (IR)", done in code (see the package documentation), folding the specialization values and the workgroup
// size of opts. Emit runs ir.Validate first and returns its error, wrapped, for an
// ill-formed program. A program with matrices of the matmul_tc shape (see
// matchTensorCoreMatmul) on a target with tensor cores becomes the tensor-core
// kernel (tc.go); any other takes the scalar path, and its module's first line
// says why the tensor cores were not used.
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
	params, err := p.ParamValues(opts.Spec)
	if err != nil {
		return nil, fmt.Errorf("ptx: program %q: %w", p.Name, err)
	}
	sg, err := SubgroupSizeFor(p, wg)
	if err != nil {
		return nil, fmt.Errorf("ptx: program %q: %w", p.Name, err)
	}
	if !usesSubgroups(p) {
		sg = 0
	}
	var header string
	if p.UsesMatrices() {
		m, ok, why := tensorCoreModule(p, opts)
		if ok {
			return m, nil
		}
		header = "// kiln matrix path: scalar (tensor cores not used: " + asciiComment(why) + ")\n"
	}
	opts.Target = opts.Target.scalar()
	e := newEmitter(p, wg, params, opts.Target, sg)
	e.nonCoherent = opts.NonCoherentReads
	if err := e.emitKernel(); err != nil {
		return nil, fmt.Errorf("ptx: emitting program %q: %w", p.Name, err)
	}
	m := &Module{Entry: EntryPoint, Target: opts.Target, WorkgroupSize: wg, SharedBytes: e.sharedBytes, SubgroupSize: sg,
		Params: kernelParams(p)}
	m.Text = header + e.assemble(m)
	return m, nil
}

// kernelParams is the kernel's parameter list for p: every buffer's pointer,
// then every buffer's element count (both in p.Buffers' order), then the
// uniforms.
func kernelParams(p *ir.Program) []Param {
	var ps []Param
	for _, b := range p.Buffers {
		ps = append(ps, Param{Kind: BufferPointer, Binding: b.Binding, Name: bufParam(b.Binding)})
	}
	for _, b := range p.Buffers {
		ps = append(ps, Param{Kind: ElementCount, Binding: b.Binding, Name: lenParam(b.Binding)})
	}
	for i := range p.Uniforms {
		ps = append(ps, Param{Kind: UniformValue, Binding: uint32(i), Name: uniformParam(uint32(i))})
	}
	return ps
}

// WarpSize is the largest subgroup a kernel runs: a warp.
const WarpSize = 32

// SubgroupSizeFor returns the subgroup size a program runs with at workgroup size
// wg: the program's own when it fixes one, else the largest power of two up to a
// warp (32) that divides the workgroup's invocation count, as the reference
// interpreter picks by default. Subgroups of fewer than 32 lanes are aligned
// segments of a warp; a program that requires more than 32 lanes cannot run.
func SubgroupSizeFor(p *ir.Program, wg [3]uint32) (uint32, error) {
	if p.SubgroupSize > WarpSize {
		return 0, fmt.Errorf("it requires subgroups of %d lanes, but CUDA runs subgroups of at most %d (a warp). Fix: require a subgroup size of %d or less, or none", p.SubgroupSize, WarpSize, WarpSize)
	}
	size := p.SubgroupSize
	if size == 0 {
		n := wg[0] * wg[1] * wg[2]
		for size = WarpSize; n%size != 0; size /= 2 {
		}
	}
	if err := ir.CheckSubgroupSize(wg, size); err != nil {
		return 0, fmt.Errorf("it cannot run with subgroups of %d lanes: %w", size, err)
	}
	return size, nil
}

func bufParam(binding uint32) string { return fmt.Sprintf("kiln_buf%d", binding) }
func uniformParam(i uint32) string   { return fmt.Sprintf("kiln_uni%d", i) }
func lenParam(binding uint32) string { return fmt.Sprintf("kiln_len%d", binding) }

// asciiComment is s for a PTX comment: ptxas rejects a module holding any byte
// beyond ASCII, comments included, so the reasons' × and − become x and -,
// and any other such rune ?.
func asciiComment(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r < 0x80:
			return r
		case r == '×':
			return 'x'
		case r == '−' || r == '–' || r == '—':
			return '-'
		}
		return '?'
	}, s)
}

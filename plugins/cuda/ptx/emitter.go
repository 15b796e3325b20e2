package ptx

import (
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/ranges"
	"github.com/kiln-dev/kiln/plugins/internal/scope"
)

// value is a computed IR value: a predicate (bool) or a .b32 register holding it.
// A constant also carries its literal, for folding (see fold.go); rng is the
// range of an integer or bool value (see docs/design.md, "Value ranges and
// bounds-check elision"), Unknown unless set.
type value struct {
	reg   string
	t     ir.Type
	konst bool
	lit   ir.Literal
	rng   ranges.Range
	// mutable marks the register of a var or loop counter, read in place: what
	// keeps the value beyond the expression (a let, a var's initial value, a
	// bound fact) copies it first (see settle).
	mutable bool
}

// local is a name in scope: an immutable value (let, atomic result) or a mutable
// register (var, for).
type local struct {
	value
	variable bool
}

// array is a buffer, a shared array or a per-invocation local array (the
// scalar matrix path's private slices).
type array struct {
	elem   ir.Type
	shared bool
	// local marks a per-invocation array in the .local state space.
	local bool
	// base is the global address (a .b64 register) of a buffer, the shared
	// address (a .b32 register) of a shared array, or the local address (a .b64
	// register) of a local array.
	base string
	// count is the register holding a buffer's element count.
	count string
	// fixed is a shared or local array's element count.
	fixed uint32
	// nc marks a read buffer loaded through the non-coherent path.
	nc bool
}

// loop is the labels of an enclosing loop: where continue and break go.
type loop struct{ cont, end string }

// hoistKey names a value computed once at the top of the kernel: a special
// register (sreg set) or a global id axis.
type hoistKey struct {
	sreg string
	gid  uint8
}

// emitter writes one kernel. Registers and labels are numbered in emission order,
// so the same program always gives the same text.
type emitter struct {
	prog   *ir.Program
	wg     [3]uint32
	params map[string]ir.Literal
	arch   Target
	// nonCoherent is Options.NonCoherentReads.
	nonCoherent bool
	// sg is the subgroup size (0 without subgroup operations); lane and segMask
	// are the registers of the lane in its subgroup and of the subgroup's lanes
	// in the warp, loaded once when first needed.
	sg            uint32
	lane, segMask string
	uniforms      map[string]value

	// pre holds the instructions that run once at the top of the kernel
	// (parameter loads, builtins, constants); body the program's.
	pre, body   []string
	shared      []string
	sharedBytes uint32
	// locals declares the per-invocation local arrays.
	locals []string

	nr, np, nd, nh, nl int
	consts             map[ir.Literal]string
	hoisted            map[hoistKey]string
	arrays             map[string]array
	scopes             scope.Stack[local]
	loops              []loop
	// facts are the bounds the enclosing ifs' conditions established.
	facts []boundFact
	// cond is the predicate of the predicated if being emitted, or "".
	cond string
	// jumped holds the labels an unconditional branch goes to.
	jumped map[string]bool
	// open is false after a branch, break, continue or return, until the next
	// label: the statements that follow can never run and are not emitted.
	open bool
	// assigned are the vars some assign sets; the others keep the range of
	// their initial value.
	assigned map[string]bool
	// matrixPath is the path the program's matrices take (see matrix.go);
	// stageBytes is the shared memory the scalar path's mma staging may take.
	matrixPath matrixPath
	stageBytes uint32
}

// twoBlocksMaxThreads is the largest workgroup for which a module asks ptxas to
// keep two blocks resident per SM (.minnctapersm 2): a workgroup that waits at
// barriers leaves the SM idle unless another one computes meanwhile. For up to
// 256 threads that caps a thread at 128 of the SM's 64K registers (its kernels
// need fewer unless they keep large register blocks, such as matmul_reg's 8×8,
// which ran 1% faster at 2 blocks than at one with 129 to 172 registers); for
// larger workgroups it would cap them at 64 or fewer and spill, so they get no
// hint.
const twoBlocksMaxThreads = 256

func newEmitter(p *ir.Program, wg [3]uint32, params map[string]ir.Literal, target Target, sg uint32) *emitter {
	return &emitter{
		prog:     p,
		wg:       wg,
		params:   params,
		arch:     target,
		sg:       sg,
		uniforms: map[string]value{},
		consts:   map[ir.Literal]string{},
		hoisted:  map[hoistKey]string{},
		arrays:   map[string]array{},
		jumped:   map[string]bool{},
		open:     true,
		assigned: ranges.Assigned(p.Body),
	}
}

// Fresh registers and labels.
func (e *emitter) r() string     { e.nr++; return fmt.Sprintf("%%r%d", e.nr) }
func (e *emitter) p() string     { e.np++; return fmt.Sprintf("%%p%d", e.np) }
func (e *emitter) rd() string    { e.nd++; return fmt.Sprintf("%%rd%d", e.nd) }
func (e *emitter) label() string { e.nl++; return fmt.Sprintf("$L%d", e.nl) }

// inst appends an instruction to the body.
func (e *emitter) inst(format string, args ...any) {
	e.body = append(e.body, "\t"+fmt.Sprintf(format, args...)+";")
}

// preInst appends an instruction to the preamble.
func (e *emitter) preInst(format string, args ...any) {
	e.pre = append(e.pre, "\t"+fmt.Sprintf(format, args...)+";")
}

// place starts a labelled point of the body; code after it is reachable.
func (e *emitter) place(label string) {
	e.body = append(e.body, label+":")
	e.open = true
}

// jump ends the current straight-line code with an unconditional branch.
func (e *emitter) jump(label string) {
	e.inst("bra %s", label)
	e.jumped[label] = true
	e.open = false
}

// hex is a 32-bit immediate as PTX hex.
func hex(bits uint32) string { return fmt.Sprintf("0x%08X", bits) }

// fimm is an f32 immediate by its bits.
func fimm(bits uint32) string { return fmt.Sprintf("0f%08X", bits) }

// constant returns the register holding literal l, loaded once in the preamble.
func (e *emitter) constant(l ir.Literal) value {
	if reg, ok := e.consts[l]; ok {
		return value{reg: reg, t: l.Type, konst: true, lit: l, rng: ranges.Exact(l.Bits)}
	}
	var reg string
	if l.Type == ir.Bool {
		reg = e.p()
		e.preInst("mov.pred %s, %d", reg, l.Bits&1)
	} else {
		reg = e.r()
		e.preInst("mov.b32 %s, %s", reg, hex(l.Bits))
	}
	e.consts[l] = reg
	return value{reg: reg, t: l.Type, konst: true, lit: l, rng: ranges.Exact(l.Bits)}
}

// ranged gives v the range r, and makes it the constant when r holds one value
// (an integer or bool v only).
func (e *emitter) ranged(v value, r ranges.Range) value {
	if v.t.IsFloat() {
		return v
	}
	if c, ok := r.Const(); ok {
		return e.constant(ir.Literal{Type: v.t, Bits: c})
	}
	v.rng = r
	return v
}

// emitKernel declares the buffers and shared arrays, then emits the body.
func (e *emitter) emitKernel() error {
	for _, b := range e.prog.Buffers {
		if !b.Type.IsNumeric() && !b.Type.Is16Bit() {
			return fmt.Errorf("buffer %q has element type %s. Fix: use i32, u32, f32, f16 or bf16", b.Name, b.Type)
		}
		raw, base, count := e.rd(), e.rd(), e.r()
		e.preInst("ld.param.u64 %s, [%s]", raw, bufParam(b.Binding))
		e.preInst("cvta.to.global.u64 %s, %s", base, raw)
		e.preInst("ld.param.u32 %s, [%s]", count, lenParam(b.Binding))
		e.arrays[b.Name] = array{elem: b.Type, base: base, count: count, nc: e.nonCoherent && b.Access == ir.Read}
	}
	for i, u := range e.prog.Uniforms {
		if !u.Type.IsNumeric() {
			return fmt.Errorf("uniform %q has type %s. Fix: use i32, u32 or f32", u.Name, u.Type)
		}
		reg := e.r()
		e.preInst("ld.param.b32 %s, [%s]", reg, uniformParam(uint32(i)))
		e.uniforms[u.Name] = value{reg: reg, t: u.Type}
	}
	for i, s := range e.prog.Shared {
		if !s.Type.Valid() {
			return fmt.Errorf("shared array %q has an invalid element type. Fix: use bool, i32, u32, f32, f16 or bf16", s.Name)
		}
		e.declareShared(s.Name, fmt.Sprintf("kiln_shared%d", i), s.Type, s.Count, fmt.Sprintf("%s: %d x %s", s.Name, s.Count, s.Type))
	}
	if err := e.declareMatrices(); err != nil {
		return err
	}
	if err := e.block(e.prog.Body); err != nil {
		return err
	}
	// The kernel always ends with ret, also where no path reaches its end, so no
	// label is ever the last line.
	e.inst("ret")
	return nil
}

// declareShared declares a .shared variable sym for an array of count elements
// of type t (4 bytes each, 2 for f16 and bf16, rounded up to whole words) and
// makes it the array name.
func (e *emitter) declareShared(name, sym string, t ir.Type, count uint32, comment string) {
	bytes := arrayBytes(t, count)
	e.shared = append(e.shared, fmt.Sprintf("\t.shared .align 4 .b8 %s[%d]; // %s", sym, bytes, comment))
	e.sharedBytes += bytes
	base := e.r()
	e.preInst("mov.u32 %s, %s", base, sym)
	e.arrays[name] = array{elem: t, shared: true, base: base, fixed: count}
}

// declareLocal declares a .local variable sym, an array of count elements of
// type t in every invocation, and makes it the array name.
func (e *emitter) declareLocal(name, sym string, t ir.Type, count uint32, comment string) {
	bytes := arrayBytes(t, count)
	e.locals = append(e.locals, fmt.Sprintf("\t.local .align 4 .b8 %s[%d]; // %s", sym, bytes, comment))
	base := e.rd()
	e.preInst("mov.u64 %s, %s", base, sym)
	e.arrays[name] = array{elem: t, local: true, base: base, fixed: count}
}

// arrayBytes is the size of a .shared or .local variable of count elements of t.
func arrayBytes(t ir.Type, count uint32) uint32 { return (t.Size()*count + 3) &^ 3 }

// assemble lays the module out: header, the kernel's signature, register and
// shared declarations, preamble, body.
func (e *emitter) assemble(m *Module) string {
	var s strings.Builder
	fmt.Fprintf(&s, "// kiln PTX for program %s (plugins/cuda/ptx)\n", e.prog.Name)
	fmt.Fprintf(&s, "// workgroup size %dx%dx%d; specialization folded.\n", e.wg[0], e.wg[1], e.wg[2])
	fmt.Fprintf(&s, ".version %s\n.target %s\n.address_size 64\n\n", ISAVersion, m.Target)
	fmt.Fprintf(&s, ".visible .entry %s(", EntryPoint)
	for i, p := range m.Params {
		if i > 0 {
			s.WriteString(",")
		}
		kind := map[ParamKind]string{BufferPointer: ".u64", ElementCount: ".u32", UniformValue: ".b32"}[p.Kind]
		fmt.Fprintf(&s, "\n\t.param %s %s", kind, p.Name)
	}
	fmt.Fprintf(&s, "\n)\n.reqntid %d, %d, %d\n", e.wg[0], e.wg[1], e.wg[2])
	if e.wg[0]*e.wg[1]*e.wg[2] <= twoBlocksMaxThreads {
		s.WriteString(".minnctapersm 2\n")
	}
	s.WriteString("{\n")
	fmt.Fprintf(&s, "\t.reg .pred %%p<%d>;\n\t.reg .b32 %%r<%d>;\n\t.reg .b64 %%rd<%d>;\n", e.np+1, e.nr+1, e.nd+1)
	if e.nh > 0 {
		fmt.Fprintf(&s, "\t.reg .b16 %%h<%d>;\n", e.nh+1)
	}
	for _, line := range e.shared {
		s.WriteString(line + "\n")
	}
	for _, line := range e.locals {
		s.WriteString(line + "\n")
	}
	for _, line := range e.pre {
		s.WriteString(line + "\n")
	}
	for _, line := range e.body {
		s.WriteString(line + "\n")
	}
	s.WriteString("}\n")
	return s.String()
}

// builtinValue returns a builtin on axis with its range: workgroup_size and
// subgroup_size are constants, local_id on axis a is below the workgroup size's
// a, subgroup_invocation_id below the subgroup size, num_workgroups at least 1.
func (e *emitter) builtinValue(kind ir.BuiltinKind, axis uint8) (value, error) {
	switch {
	case kind == ir.WorkgroupSizeBuiltin && axis <= 2:
		return e.constant(ir.LitU32(e.wg[axis])), nil
	case kind == ir.SubgroupSizeBuiltin:
		return e.constant(ir.LitU32(e.sg)), nil
	}
	reg, err := e.builtin(kind, axis)
	if err != nil {
		return value{}, err
	}
	v := value{reg: reg, t: ir.U32}
	switch kind {
	case ir.LocalIDBuiltin:
		v.rng = ranges.Between(0, e.wg[axis]-1)
	case ir.SubgroupInvocationIDBuiltin:
		v.rng = ranges.Between(0, e.sg-1)
	case ir.NumWorkgroupsBuiltin:
		v.rng = ranges.Between(1, ^uint32(0))
	}
	return v, nil
}

// builtin returns a builtin on axis, computed once in the preamble.
func (e *emitter) builtin(kind ir.BuiltinKind, axis uint8) (string, error) {
	switch kind {
	case ir.SubgroupSizeBuiltin:
		return e.constant(ir.LitU32(e.sg)).reg, nil
	case ir.SubgroupInvocationIDBuiltin:
		lane, _ := e.subgroupRegs()
		return lane, nil
	}
	if axis > 2 {
		return "", fmt.Errorf("builtin %s has axis %d. Fix: use axis 0, 1 or 2", kind, axis)
	}
	dim := "xyz"[axis : axis+1]
	switch kind {
	case ir.LocalIDBuiltin:
		return e.sreg("%tid." + dim), nil
	case ir.WorkgroupIDBuiltin:
		return e.sreg("%ctaid." + dim), nil
	case ir.NumWorkgroupsBuiltin:
		return e.sreg("%nctaid." + dim), nil
	case ir.WorkgroupSizeBuiltin:
		return e.constant(ir.LitU32(e.wg[axis])).reg, nil
	case ir.GlobalIDBuiltin:
		k := hoistKey{gid: axis + 1}
		if reg, ok := e.hoisted[k]; ok {
			return reg, nil
		}
		ctaid, tid := e.sreg("%ctaid."+dim), e.sreg("%tid."+dim)
		reg := e.r()
		e.preInst("mad.lo.u32 %s, %s, %d, %s", reg, ctaid, e.wg[axis], tid)
		e.hoisted[k] = reg
		return reg, nil
	}
	return "", fmt.Errorf("builtin %d is not defined. Fix: use global_id, local_id, workgroup_id, num_workgroups or workgroup_size", kind)
}

// sreg returns a special register's value, read once in the preamble.
func (e *emitter) sreg(name string) string {
	k := hoistKey{sreg: name}
	if reg, ok := e.hoisted[k]; ok {
		return reg
	}
	reg := e.r()
	e.preInst("mov.u32 %s, %s", reg, name)
	e.hoisted[k] = reg
	return reg
}

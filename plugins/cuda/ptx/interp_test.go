package ptx

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// A PTX interpreter for exactly the subset Emit writes, so the tests can run an
// emitted module and pin the semantics of docs/design.md, "The program (IR)", on the text itself, without a GPU.
// It follows the PTX ISA where a driver relies on it: f32 arithmetic with an .rn
// suffix is IEEE single precision rounded to nearest even, fma is fused, integer
// ops wrap, shift amounts above 32 clamp to 32, float-to-integer conversions
// saturate, predicated instructions whose guard is false do nothing, and the
// threads of a block run in turns between bar.sync, and a warp-synchronous
// instruction (shfl.sync, redux.sync) runs once every thread of its membermask has
// reached it, for all of them together. Behaviour PTX leaves
// unspecified is an error here, so the tests fail if the emitted code relies on
// it: integer division by zero or of MIN by -1, a NaN converted to an integer,
// reading a register no instruction wrote, any access outside the memory actually
// allocated (one 4-byte element for an empty buffer) or outside a shared
// variable, a membermask that leaves out the thread itself or names a thread that
// exited or waits elsewhere, a shuffle from a lane outside the membermask. The
// f16 instructions (IR v1.2) are exact binary16 arithmetic through ir/half, and
// the 16-bit loads and stores move 2 bytes, zero-extending into a .b32 register
// and storing its low half. The
// approximate MUFU instructions (ex2, lg2, sin, cos) are computed
// exactly; the backend tests bound the hardware's error.

// opnd is one decoded operand.
type opnd struct {
	kind opndKind
	cls  byte   // register class: 'p', 'r', 'd' or 'h'
	idx  int    // register number
	imm  uint64 // immediate bits (an f32 immediate holds its bits)
	name string // special register, parameter or shared symbol
	mem  bool   // written as [x]
}

type opndKind uint8

const (
	opndReg opndKind = iota + 1
	opndImm
	opndSreg
	opndSym
)

// pinst is one decoded instruction.
type pinst struct {
	line    int
	text    string
	guard   *opnd
	negated bool
	op      string
	args    []opnd
	// exec runs the instruction on a thread (its guard already checked).
	exec func(t *thread) error
	// collective runs a warp-synchronous instruction for the threads of a warp
	// that reached it, indexed by lane (nil for the others); mask reads a
	// thread's membermask operand.
	collective func(ts []*thread) error
	mask       func(t *thread) (uint32, error)
	// target is a branch's destination index.
	target int
}

// pmodule is a parsed module.
type pmodule struct {
	target     string
	params     map[string]int // name -> position
	paramKinds []string       // ".u64" or ".u32" by position
	reqntid    [3]uint32
	minBlocks  int          // .minnctapersm, 0 when absent
	nregs      map[byte]int // declared registers by class
	shared     map[string][2]uint32
	sharedSize uint32
	// local and localSize are the per-thread .local variables.
	local     map[string][2]uint32
	localSize uint32
	code      []pinst
}

// maxSteps bounds one dispatch, so a miscompiled loop fails instead of hanging.
const maxSteps = 400_000_000

// thread is one running thread.
type thread struct {
	m *machine
	p []bool
	r []uint32
	d []uint64
	h []uint16
	// pdef, rdef, ddef and hdef say which registers an instruction wrote.
	pdef, rdef, ddef, hdef []bool
	pc                     int
	done                   bool
	tid                    [3]uint32
	ctaid                  [3]uint32
	shared                 []byte
	local                  []byte
	barrier                bool
	// linear is the thread's index in its block (x fastest), from which CUDA
	// builds warps: lane linear % 32 of warp linear / 32.
	linear int
	// warpOp is the instruction index of the warp-synchronous instruction the
	// thread waits at, or -1.
	warpOp int
}

// machine runs one dispatch.
type machine struct {
	mod     *pmodule
	grid    [3]uint32
	params  []uint64
	buffers []memory // by binding
	steps   int
	// ncRead and written are the global addresses the launch read through the
	// non-coherent path and wrote (stores, atomics): PTX leaves an ld.global.nc
	// of memory the kernel writes undefined, so the launch fails when they meet.
	ncRead, written map[uint64]bool
}

// memory is one buffer's device allocation.
type memory struct {
	base  uint64
	bytes []byte
}

// bufferBase is where buffer b's allocation starts; allocations are far apart, so
// any address between them is outside every allocation.
func bufferBase(b int) uint64 { return uint64(b+1) << 36 }

func (t *thread) fail(in *pinst, format string, args ...any) error {
	return fmt.Errorf("line %d %q: %s", in.line, in.text, fmt.Sprintf(format, args...))
}

// parseModule decodes the text Emit writes.
func parseModule(text string) (*pmodule, error) {
	m := &pmodule{params: map[string]int{}, nregs: map[byte]int{}, shared: map[string][2]uint32{}, local: map[string][2]uint32{}}
	labels := map[string]int{}
	var pending []int // instructions whose branch target is resolved at the end
	lines := strings.Split(text, "\n")
	inParams, inBody := false, false
	for n, raw := range lines {
		line := raw
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		lineNo := n + 1
		switch {
		case strings.HasPrefix(line, ".version "):
			if line != ".version "+ISAVersion {
				return nil, fmt.Errorf("line %d: %q, want .version %s", lineNo, line, ISAVersion)
			}
		case strings.HasPrefix(line, ".target "):
			m.target = strings.TrimPrefix(line, ".target ")
		case line == ".address_size 64":
		case line == ".visible .entry "+EntryPoint+"(":
			inParams = true
		case inParams && line == ")":
			inParams = false
		case inParams:
			f := strings.Fields(strings.TrimSuffix(line, ","))
			if len(f) != 3 || f[0] != ".param" || (f[1] != ".u64" && f[1] != ".u32" && f[1] != ".b32") {
				return nil, fmt.Errorf("line %d: bad parameter %q", lineNo, line)
			}
			m.params[f[2]] = len(m.paramKinds)
			m.paramKinds = append(m.paramKinds, f[1])
		case strings.HasPrefix(line, ".reqntid "):
			f := strings.Split(strings.TrimPrefix(line, ".reqntid "), ",")
			if len(f) != 3 {
				return nil, fmt.Errorf("line %d: bad .reqntid", lineNo)
			}
			for i, s := range f {
				v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
				if err != nil || v == 0 {
					return nil, fmt.Errorf("line %d: bad .reqntid %q", lineNo, s)
				}
				m.reqntid[i] = uint32(v)
			}
		case line == ".minnctapersm 2":
			m.minBlocks = 2
		case line == "{":
			inBody = true
		case line == "}":
			inBody = false
		case !inBody:
			return nil, fmt.Errorf("line %d: unexpected %q outside the kernel", lineNo, line)
		case strings.HasPrefix(line, ".reg "):
			var cls, ty string
			var count int
			f := strings.Fields(strings.TrimSuffix(line, ";"))
			if len(f) != 3 {
				return nil, fmt.Errorf("line %d: bad .reg", lineNo)
			}
			ty = f[1]
			name, num, ok := strings.Cut(f[2], "<")
			if !ok {
				return nil, fmt.Errorf("line %d: bad .reg", lineNo)
			}
			count, _ = strconv.Atoi(strings.TrimSuffix(num, ">"))
			cls = map[string]string{".pred %p": "p", ".b32 %r": "r", ".b64 %rd": "d", ".b16 %h": "h"}[ty+" "+name]
			if cls == "" {
				return nil, fmt.Errorf("line %d: unexpected register declaration %q", lineNo, line)
			}
			m.nregs[cls[0]] = count
		case strings.HasPrefix(line, ".shared "), strings.HasPrefix(line, ".local "):
			f := strings.Fields(strings.TrimSuffix(line, ";"))
			if len(f) != 5 || f[1] != ".align" || f[2] != "4" || f[3] != ".b8" {
				return nil, fmt.Errorf("line %d: bad %s %q", lineNo, f[0], line)
			}
			name, size, _ := strings.Cut(f[4], "[")
			bytes, err := strconv.ParseUint(strings.TrimSuffix(size, "]"), 10, 32)
			if err != nil || bytes == 0 || bytes%4 != 0 {
				return nil, fmt.Errorf("line %d: bad %s size %q", lineNo, f[0], size)
			}
			vars, total := m.shared, &m.sharedSize
			if f[0] == ".local" {
				vars, total = m.local, &m.localSize
			}
			vars[name] = [2]uint32{*total, *total + uint32(bytes)}
			*total += uint32(bytes)
		case strings.HasSuffix(line, ":"):
			labels[strings.TrimSuffix(line, ":")] = len(m.code)
		default:
			if !strings.HasSuffix(line, ";") {
				return nil, fmt.Errorf("line %d: %q does not end with ;", lineNo, line)
			}
			in, err := parseInst(lineNo, strings.TrimSuffix(line, ";"))
			if err != nil {
				return nil, err
			}
			if in.op == "bra" {
				pending = append(pending, len(m.code))
			}
			m.code = append(m.code, in)
		}
	}
	if m.target == "" || m.reqntid[0] == 0 {
		return nil, fmt.Errorf("module lacks .target or .reqntid")
	}
	for _, i := range pending {
		in := &m.code[i]
		target, ok := labels[in.args[0].name]
		if !ok {
			return nil, fmt.Errorf("line %d: branch to undefined label %q", in.line, in.args[0].name)
		}
		in.target = target
	}
	for i := range m.code {
		if err := m.decode(&m.code[i]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// parseInst splits "[@[!]%p] op a, b, ..." into its parts.
func parseInst(lineNo int, text string) (pinst, error) {
	in := pinst{line: lineNo, text: text}
	rest := text
	if strings.HasPrefix(rest, "@") {
		g, tail, _ := strings.Cut(rest[1:], " ")
		if strings.HasPrefix(g, "!") {
			in.negated, g = true, g[1:]
		}
		o, err := parseOperand(g)
		if err != nil || o.kind != opndReg || o.cls != 'p' {
			return in, fmt.Errorf("line %d: bad guard %q", lineNo, g)
		}
		in.guard = &o
		rest = tail
	}
	op, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
	in.op = op
	if args = strings.TrimSpace(args); args != "" {
		// A vector operand {a, b, …} (wide accesses) is its registers in order.
		args = strings.NewReplacer("{", "", "}", "").Replace(args)
		for _, a := range strings.Split(args, ",") {
			o, err := parseOperand(strings.TrimSpace(a))
			if err != nil {
				return in, fmt.Errorf("line %d %q: %v", lineNo, text, err)
			}
			in.args = append(in.args, o)
		}
	}
	return in, nil
}

func parseOperand(s string) (opnd, error) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		o, err := parseOperand(s[1 : len(s)-1])
		o.mem = true
		return o, err
	}
	switch {
	case strings.HasPrefix(s, "%rd"), strings.HasPrefix(s, "%r"), strings.HasPrefix(s, "%p"), strings.HasPrefix(s, "%h"):
		cls, num := byte('r'), s[2:]
		switch {
		case strings.HasPrefix(s, "%rd"):
			cls, num = 'd', s[3:]
		case strings.HasPrefix(s, "%p"):
			cls = 'p'
		case strings.HasPrefix(s, "%h"):
			cls = 'h'
		}
		n, err := strconv.Atoi(num)
		if err != nil {
			return opnd{}, fmt.Errorf("bad register %q", s)
		}
		return opnd{kind: opndReg, cls: cls, idx: n}, nil
	case strings.HasPrefix(s, "%"):
		return opnd{kind: opndSreg, name: s}, nil
	case strings.HasPrefix(s, "0f"):
		v, err := strconv.ParseUint(s[2:], 16, 32)
		if err != nil || len(s) != 10 {
			return opnd{}, fmt.Errorf("bad f32 immediate %q", s)
		}
		return opnd{kind: opndImm, imm: v}, nil
	case strings.HasPrefix(s, "0x"):
		v, err := strconv.ParseUint(s[2:], 16, 32)
		if err != nil {
			return opnd{}, fmt.Errorf("bad hex immediate %q", s)
		}
		return opnd{kind: opndImm, imm: v}, nil
	case s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9'):
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < math.MinInt32 || v > math.MaxUint32 {
			return opnd{}, fmt.Errorf("bad immediate %q", s)
		}
		return opnd{kind: opndImm, imm: uint64(uint32(v))}, nil
	case s != "":
		return opnd{kind: opndSym, name: s}, nil
	}
	return opnd{}, fmt.Errorf("empty operand")
}

// Readers and writers of decoded operands, checking classes.

func (m *pmodule) checkReg(in *pinst, o opnd, cls byte) error {
	if o.kind != opndReg || o.cls != cls || o.mem {
		return fmt.Errorf("line %d %q: operand is not a %%%c register", in.line, in.text, cls)
	}
	if o.idx <= 0 || o.idx >= m.nregs[cls] {
		return fmt.Errorf("line %d %q: register %d of class %c is not declared (%d are)", in.line, in.text, o.idx, cls, m.nregs[cls])
	}
	return nil
}

// reader reads an operand for a thread; writer sets a destination register.
type (
	reader[T any] func(t *thread) (T, error)
	writer[T any] func(t *thread, v T)
)

// regFile gives a thread's registers of one class and which of them were written.
type regFile[T any] func(t *thread) ([]T, []bool)

func rFile(t *thread) ([]uint32, []bool) { return t.r, t.rdef }
func dFile(t *thread) ([]uint64, []bool) { return t.d, t.ddef }
func hFile(t *thread) ([]uint16, []bool) { return t.h, t.hdef }
func pFile(t *thread) ([]bool, []bool)   { return t.p, t.pdef }

// decoder resolves one instruction's operands, keeping the first error: a case
// resolves them all and checks err once.
type decoder struct {
	m   *pmodule
	in  *pinst
	err error
}

func (m *pmodule) decoder(in *pinst) *decoder { return &decoder{m: m, in: in} }

// operand returns operand k, or false after an error.
func (d *decoder) operand(k int) (opnd, bool) {
	if d.err == nil && k >= len(d.in.args) {
		d.err = fmt.Errorf("line %d %q: missing operand %d", d.in.line, d.in.text, k)
	}
	if d.err != nil {
		return opnd{}, false
	}
	return d.in.args[k], true
}

// register returns register operand k of class cls, or false after an error.
func (d *decoder) register(k int, cls byte) (opnd, bool) {
	o, ok := d.operand(k)
	if ok {
		d.err = d.m.checkReg(d.in, o, cls)
	}
	return o, d.err == nil
}

// src reads register operand k of class cls; reading one no instruction wrote fails.
func src[T any](d *decoder, k int, cls byte, file regFile[T]) reader[T] {
	o, ok := d.register(k, cls)
	if !ok {
		return nil
	}
	in, name := d.in, string(cls)
	if cls == 'd' {
		name = "rd"
	}
	return func(t *thread) (T, error) {
		regs, def := file(t)
		if !def[o.idx] {
			var zero T
			return zero, t.fail(in, "reads %%%s%d before any instruction wrote it", name, o.idx)
		}
		return regs[o.idx], nil
	}
}

// dst writes the destination register (operand 0) of class cls.
func dst[T any](d *decoder, cls byte, file regFile[T]) writer[T] {
	if d.err == nil && len(d.in.args) == 0 {
		d.err = fmt.Errorf("line %d %q: no destination", d.in.line, d.in.text)
	}
	o, ok := d.register(0, cls)
	if !ok {
		return nil
	}
	return func(t *thread, v T) {
		regs, def := file(t)
		regs[o.idx], def[o.idx] = v, true
	}
}

// immediate returns operand k's value when it is an immediate that ok accepts.
func (d *decoder) immediate(k int, ok func(o opnd) bool) (uint64, bool) {
	o, found := d.operand(k)
	return o.imm, found && o.kind == opndImm && ok(o)
}

// r32 reads a .b32 register or immediate.
func (d *decoder) r32(k int) reader[uint32] {
	if v, ok := d.immediate(k, func(o opnd) bool { return !o.mem }); ok {
		return func(*thread) (uint32, error) { return uint32(v), nil }
	}
	return src(d, k, 'r', rFile)
}

// pred reads a predicate register or the immediate 0 or 1.
func (d *decoder) pred(k int) reader[bool] {
	if v, ok := d.immediate(k, func(o opnd) bool { return o.imm <= 1 }); ok {
		return func(*thread) (bool, error) { return v == 1, nil }
	}
	return src(d, k, 'p', pFile)
}

func (d *decoder) r16(k int) reader[uint16] { return src(d, k, 'h', hFile) }
func (d *decoder) r64(k int) reader[uint64] { return src(d, k, 'd', dFile) }
func (d *decoder) d32() writer[uint32]      { return dst(d, 'r', rFile) }
func (d *decoder) d16() writer[uint16]      { return dst(d, 'h', hFile) }
func (d *decoder) d64() writer[uint64]      { return dst(d, 'd', dFile) }
func (d *decoder) dPred() writer[bool]      { return dst(d, 'p', pFile) }

// read reads r for t unless an earlier read failed.
func read[T any](t *thread, r reader[T], err *error) T {
	if *err != nil {
		var zero T
		return zero
	}
	v, e := r(t)
	*err = e
	return v
}

// exec3 builds the exec of "op d, a, b, c": it reads the operands in order and
// writes f's result to dst.
func exec3[A, B, C, D any](dst writer[D], a reader[A], b reader[B], c reader[C], f func(t *thread, x A, y B, z C) (D, error)) func(*thread) error {
	return func(t *thread) error {
		var err error
		x, y, z := read(t, a, &err), read(t, b, &err), read(t, c, &err)
		if err != nil {
			return err
		}
		v, err := f(t, x, y, z)
		if err == nil {
			dst(t, v)
		}
		return err
	}
}

// none is the operand of an instruction with fewer than three, and the
// destination of one without any.
func none(*thread) (struct{}, error) { return struct{}{}, nil }
func discard(*thread, struct{})      {}

// exec2 builds the exec of "op d, a, b".
func exec2[A, B, D any](dst writer[D], a reader[A], b reader[B], f func(t *thread, x A, y B) (D, error)) func(*thread) error {
	return exec3(dst, a, b, none, func(t *thread, x A, y B, _ struct{}) (D, error) { return f(t, x, y) })
}

// exec1 builds the exec of "op d, a".
func exec1[A, D any](dst writer[D], a reader[A], f func(t *thread, x A) (D, error)) func(*thread) error {
	return exec3(dst, a, none, none, func(t *thread, x A, _, _ struct{}) (D, error) { return f(t, x) })
}

// same is f for an operation that cannot fail.
func same[A, D any](f func(x A) D) func(*thread, A) (D, error) {
	return func(_ *thread, x A) (D, error) { return f(x), nil }
}

func f32(bits uint32) float32 { return math.Float32frombits(bits) }
func fb(v float32) uint32     { return math.Float32bits(v) }

func isNaN(bits uint32) bool { return bits&0x7FFFFFFF > 0x7F800000 }

// fma32 is a·b + c rounded once to f32.
func fma32(a, b, c uint32) uint32 {
	x, y, z := float64(f32(a)), float64(f32(b)), float64(f32(c))
	if isNaN(a) || isNaN(b) || isNaN(c) || math.IsInf(x, 0) || math.IsInf(y, 0) || math.IsInf(z, 0) {
		return fb(float32(x*y + z))
	}
	prod := new(big.Float).SetPrec(300).Mul(big.NewFloat(x).SetPrec(300), big.NewFloat(y).SetPrec(300))
	sum := new(big.Float).SetPrec(300).Add(prod, big.NewFloat(z).SetPrec(300))
	r, _ := sum.Float32()
	if r == 0 {
		// The exact sum is zero: IEEE gives +0, or -0 when both addends are -0.
		if math.Signbit(x*y) && math.Signbit(z) {
			return 0x80000000
		}
		return 0
	}
	return fb(r)
}

func ok32(f func(a, b uint32) uint32) func(*thread, uint32, uint32) (uint32, error) {
	return func(_ *thread, a, b uint32) (uint32, error) { return f(a, b), nil }
}

func okF(f func(a float32) float32) func(*thread, uint32) (uint32, error) {
	return func(_ *thread, a uint32) (uint32, error) { return fb(f(f32(a))), nil }
}

// shift applies a PTX shift: amounts above 32 clamp to 32.
func shift(op string, a, n uint32) uint32 {
	n = min(n, 32)
	switch op {
	case "shl.b32":
		if n == 32 {
			return 0
		}
		return a << n
	case "shr.u32":
		if n == 32 {
			return 0
		}
		return a >> n
	}
	if n == 32 {
		n = 31
	}
	return uint32(int32(a) >> n)
}

// compare evaluates setp's comparison cmp on type ty.
func compare(op, ty string, a, b uint32) (bool, error) {
	switch ty {
	case "u32":
		return intCompare(op, int64(a), int64(b))
	case "s32":
		return intCompare(op, int64(int32(a)), int64(int32(b)))
	case "f32":
		return floatCompare(op, ty, float64(f32(a)), float64(f32(b)))
	}
	return false, fmt.Errorf("setp.%s.%s is not interpreted", op, ty)
}

// ordered evaluates eq, ne, lt, le, gt or ge; ok is false for any other op.
func ordered[T cmp.Ordered](op string, x, y T) (v, ok bool) {
	switch op {
	case "eq":
		return x == y, true
	case "ne":
		return x != y, true
	case "lt":
		return x < y, true
	case "le":
		return x <= y, true
	case "gt":
		return x > y, true
	case "ge":
		return x >= y, true
	}
	return false, false
}

// intCompare evaluates an integer comparison.
func intCompare(op string, x, y int64) (bool, error) {
	if v, ok := ordered(op, x, y); ok {
		return v, nil
	}
	return false, fmt.Errorf("setp.%s is not interpreted", op)
}

// floatCompare evaluates a float comparison of type ty: ordered (false when
// either is NaN) but for neu and nan; the unordered ne is not one Emit writes.
func floatCompare(op, ty string, x, y float64) (bool, error) {
	nan := math.IsNaN(x) || math.IsNaN(y)
	switch op {
	case "neu":
		return nan || x != y, nil
	case "nan":
		return nan, nil
	}
	if v, ok := ordered(op, x, y); ok && op != "ne" {
		return v, nil
	}
	return false, fmt.Errorf("setp.%s.%s is not interpreted", op, ty)
}

// atomicApply computes an atomic's new value from the old one.
func atomicApply(op string, old, v uint32) (uint32, error) {
	switch op {
	case "add.u32":
		return old + v, nil
	case "min.u32":
		return min(old, v), nil
	case "max.u32":
		return max(old, v), nil
	case "min.s32":
		return uint32(min(int32(old), int32(v))), nil
	case "max.s32":
		return uint32(max(int32(old), int32(v))), nil
	case "and.b32":
		return old & v, nil
	case "or.b32":
		return old | v, nil
	case "xor.b32":
		return old ^ v, nil
	case "exch.b32":
		return v, nil
	}
	return 0, fmt.Errorf("atom.%s is not interpreted", op)
}

// cell returns the size bytes an address names: in a global allocation or in a
// shared variable. Anything else, or an address not a multiple of size, is an
// error.
func (t *thread) cell(in *pinst, space string, addr uint64, size uint64) ([]byte, error) {
	if addr%size != 0 {
		return nil, t.fail(in, "misaligned %s address %#x", space, addr)
	}
	if space == "shared" || space == "local" {
		vars, mem := t.m.mod.shared, t.shared
		if space == "local" {
			vars, mem = t.m.mod.local, t.local
		}
		for _, r := range vars {
			if addr >= uint64(r[0]) && addr+size <= uint64(r[1]) {
				return mem[addr : addr+size], nil
			}
		}
		return nil, t.fail(in, "%s address %#x is outside every %s variable", space, addr, space)
	}
	for b := range t.m.buffers {
		mem := &t.m.buffers[b]
		if addr >= mem.base && addr+size <= mem.base+uint64(len(mem.bytes)) {
			off := addr - mem.base
			return mem.bytes[off : off+size], nil
		}
	}
	return nil, t.fail(in, "global address %#x is outside every allocation", addr)
}

// load reads a 4-byte word or, with size 2, a 16-bit value zero-extended.
func (t *thread) load(in *pinst, space string, addr, size uint64) (uint32, error) {
	c, err := t.cell(in, space, addr, size)
	if err != nil {
		return 0, err
	}
	if size == 2 {
		return uint32(binary.LittleEndian.Uint16(c)), nil
	}
	return binary.LittleEndian.Uint32(c), nil
}

// store writes a 4-byte word or, with size 2, v's low half.
func (t *thread) store(in *pinst, space string, addr, size uint64, v uint32) error {
	c, err := t.cell(in, space, addr, size)
	if err != nil {
		return err
	}
	if space == "global" {
		if t.m.ncRead[addr] {
			return t.fail(in, "writes global address %#x, which the kernel read through ld.global.nc", addr)
		}
		t.m.written[addr] = true
	}
	if size == 2 {
		binary.LittleEndian.PutUint16(c, uint16(v))
		return nil
	}
	binary.LittleEndian.PutUint32(c, v)
	return nil
}

// address reads a memory operand: a .b64 register for global, .b32 for shared.
func (d *decoder) address(k int, space string) reader[uint64] {
	o, ok := d.operand(k)
	if ok && !o.mem {
		d.err = fmt.Errorf("line %d %q: operand %d is not a memory operand", d.in.line, d.in.text, k)
	}
	if d.err != nil {
		return nil
	}
	tmp := *d.in
	tmp.args = append([]opnd(nil), d.in.args...)
	tmp.args[k].mem = false
	inner := d.m.decoder(&tmp)
	defer func() { d.err = inner.err }()
	if space == "global" || space == "local" {
		return inner.r64(k)
	}
	r := inner.r32(k)
	return func(t *thread) (uint64, error) {
		v, err := r(t)
		return uint64(v), err
	}
}

// decode turns an instruction into its exec function, or fails for anything Emit
// is not supposed to write.
func (m *pmodule) decode(in *pinst) error {
	parts := strings.Split(in.op, ".")
	d := m.decoder(in)
	switch {
	case in.op == "bra":
		in.exec = func(t *thread) error { t.pc = in.target; return nil }
		return nil
	case in.op == "ret":
		in.exec = func(t *thread) error { t.done = true; return nil }
		return nil
	case in.op == "bar.sync":
		if len(in.args) != 1 || in.args[0].kind != opndImm || in.args[0].imm != 0 {
			return fmt.Errorf("line %d: bar.sync must name barrier 0", in.line)
		}
		in.exec = func(t *thread) error { t.barrier = true; return nil }
		return nil
	case in.op == "ld.param.u64" || in.op == "ld.param.u32" || in.op == "ld.param.b32":
		o := in.args[1]
		pos, ok := m.params[o.name]
		if !o.mem || o.kind != opndSym || !ok {
			return fmt.Errorf("line %d: %s of unknown parameter %q", in.line, in.op, o.name)
		}
		if "."+parts[2] != m.paramKinds[pos] {
			return fmt.Errorf("line %d: %s of %s parameter %q", in.line, in.op, m.paramKinds[pos], o.name)
		}
		param := func(t *thread) (uint64, error) { return t.m.params[pos], nil }
		if parts[2] == "u64" {
			in.exec = exec1(d.d64(), param, same(func(v uint64) uint64 { return v }))
		} else {
			in.exec = exec1(d.d32(), param, same(func(v uint64) uint32 { return uint32(v) }))
		}
		return d.err
	case in.op == "cvta.to.global.u64":
		in.exec = exec1(d.d64(), d.r64(1), same(func(v uint64) uint64 { return v }))
		return d.err
	case in.op == "mov.u32" && len(in.args) == 2 && in.args[1].kind == opndSreg:
		return m.decodeSreg(d)
	case in.op == "mov.u64" && len(in.args) == 2 && in.args[1].kind == opndSym:
		r, ok := m.local[in.args[1].name]
		if !ok {
			return fmt.Errorf("line %d: %q is not a local variable", in.line, in.args[1].name)
		}
		in.exec = exec1(d.d64(), none, same(func(struct{}) uint64 { return uint64(r[0]) }))
		return d.err
	case in.op == "mov.u32" && len(in.args) == 2 && in.args[1].kind == opndSym:
		r, ok := m.shared[in.args[1].name]
		if !ok {
			return fmt.Errorf("line %d: %q is not a shared variable", in.line, in.args[1].name)
		}
		in.exec = exec1(d.d32(), none, same(func(struct{}) uint32 { return r[0] }))
		return d.err
	case in.op == "mov.b32":
		in.exec = exec1(d.d32(), d.r32(1), same(func(a uint32) uint32 { return a }))
		return d.err
	case in.op == "mov.pred":
		in.exec = exec1(d.dPred(), d.pred(1), same(func(a bool) bool { return a }))
		return d.err
	case in.op == "mad.lo.u32":
		in.exec = exec3(d.d32(), d.r32(1), d.r32(2), d.r32(3), func(_ *thread, a, b, c uint32) (uint32, error) { return a*b + c, nil })
		return d.err
	case in.op == "mul.wide.u32":
		in.exec = exec2(d.d64(), d.r32(1), d.r32(2), func(_ *thread, a, b uint32) (uint64, error) { return uint64(a) * uint64(b), nil })
		return d.err
	case in.op == "add.s64":
		in.exec = exec2(d.d64(), d.r64(1), d.r64(2), func(_ *thread, a, b uint64) (uint64, error) { return a + b, nil })
		return d.err
	case parts[0] == "setp" && len(parts) == 3 && parts[2] == "f16":
		return m.decodeSetpF16(in, parts[1])
	case parts[0] == "setp":
		if len(parts) != 3 {
			return fmt.Errorf("line %d: bad setp %q", in.line, in.op)
		}
		if _, err := compare(parts[1], parts[2], 0, 0); err != nil {
			return fmt.Errorf("line %d: %v", in.line, err)
		}
		in.exec = exec2(d.dPred(), d.r32(1), d.r32(2), func(_ *thread, a, b uint32) (bool, error) { return compare(parts[1], parts[2], a, b) })
		return d.err
	case in.op == "selp.b32":
		dst, a, b, c := d.d32(), d.r32(1), d.r32(2), d.pred(3)
		in.exec = func(t *thread) error {
			p, err := c(t)
			if err != nil {
				return err
			}
			v, err := b(t)
			if p {
				v, err = a(t)
			}
			dst(t, v)
			return err
		}
		return d.err
	case in.op == "and.pred", in.op == "or.pred", in.op == "xor.pred", in.op == "not.pred":
		a := d.pred(1)
		b := a
		if in.op != "not.pred" {
			b = d.pred(2)
		}
		logic := map[string]func(x, y bool) bool{
			"and.pred": func(x, y bool) bool { return x && y },
			"or.pred":  func(x, y bool) bool { return x || y },
			"xor.pred": func(x, y bool) bool { return x != y },
			"not.pred": func(x, _ bool) bool { return !x },
		}[in.op]
		in.exec = exec2(d.dPred(), a, b, func(_ *thread, x, y bool) (bool, error) { return logic(x, y), nil })
		return d.err
	case in.op == "ld.global.nc.b32" || in.op == "ld.global.nc.u16":
		size := uint64(4)
		if in.op == "ld.global.nc.u16" {
			size = 2
		}
		in.exec = exec1(d.d32(), d.address(1, "global"), func(t *thread, a uint64) (uint32, error) {
			if t.m.written[a] {
				return 0, t.fail(in, "reads global address %#x through ld.global.nc, which the kernel wrote", a)
			}
			t.m.ncRead[a] = true
			return t.load(in, "global", a, size)
		})
		return d.err
	case parts[0] == "ld" && len(parts) == 3 && (parts[2] == "b32" || parts[2] == "u16") && (parts[1] == "global" || parts[1] == "shared" || parts[1] == "local"):
		size := uint64(4)
		if parts[2] == "u16" {
			size = 2
		}
		in.exec = exec1(d.d32(), d.address(1, parts[1]), func(t *thread, a uint64) (uint32, error) { return t.load(in, parts[1], a, size) })
		return d.err
	case parts[0] == "st" && len(parts) == 3 && (parts[2] == "b32" || parts[2] == "b16") && (parts[1] == "global" || parts[1] == "shared" || parts[1] == "local"):
		size := uint64(4)
		if parts[2] == "b16" {
			size = 2
		}
		in.exec = exec2(discard, d.address(0, parts[1]), d.r32(1), func(t *thread, a uint64, v uint32) (struct{}, error) {
			return struct{}{}, t.store(in, parts[1], a, size, v)
		})
		return d.err
	case parts[0] == "atom" && len(parts) == 4 && (parts[1] == "global" || parts[1] == "shared"):
		return m.decodeAtom(d, parts[1], parts[2]+"."+parts[3])
	case in.op == "shfl.sync.idx.b32" || in.op == "shfl.sync.bfly.b32":
		return m.decodeShfl(in, parts[2])
	case parts[0] == "redux" && len(parts) == 4 && parts[1] == "sync":
		return m.decodeRedux(in, parts[2]+"."+parts[3])
	}
	if done, err := m.decodeWide(in); done {
		return err
	}
	if done, err := m.decodeHalf(in); done {
		return err
	}
	return m.decodeArith(in)
}

// decodeSreg decodes "mov.u32 d, %sreg": the lane and the thread, block and
// grid coordinates.
func (m *pmodule) decodeSreg(d *decoder) error {
	in := d.in
	name := in.args[1].name
	sreg, dim, _ := strings.Cut(name, ".")
	axis := strings.Index("xyz", dim)
	read := map[string]func(t *thread) uint32{
		"%tid":    func(t *thread) uint32 { return t.tid[axis] },
		"%ctaid":  func(t *thread) uint32 { return t.ctaid[axis] },
		"%nctaid": func(t *thread) uint32 { return t.m.grid[axis] },
	}[sreg]
	switch {
	case name == "%laneid":
		read = func(t *thread) uint32 { return uint32(t.linear % 32) }
	case axis < 0 || len(dim) != 1 || read == nil:
		return fmt.Errorf("line %d: unknown special register %q", in.line, name)
	}
	in.exec = exec1(d.d32(), none, func(t *thread, _ struct{}) (uint32, error) { return read(t), nil })
	return d.err
}

// decodeAtom decodes "atom.space.op.type d, [a], b" and the compare-and-swap
// "atom.space.cas.b32 d, [a], b, c".
func (m *pmodule) decodeAtom(d *decoder, space, op string) error {
	in := d.in
	cas := op == "cas.b32"
	if _, err := atomicApply(op, 0, 0); err != nil && !cas {
		return fmt.Errorf("line %d: %v", in.line, err)
	}
	dst, addr, val := d.d32(), d.address(1, space), d.r32(2)
	cmp := val
	if cas {
		val = d.r32(3)
	} else if d.err == nil && len(in.args) != 3 {
		return fmt.Errorf("line %d: %s takes 3 operands", in.line, in.op)
	}
	in.exec = exec3(dst, addr, val, cmp, func(t *thread, a uint64, v, c uint32) (uint32, error) {
		old, err := t.load(in, space, a, 4)
		if err != nil {
			return 0, err
		}
		nv := old
		switch {
		case !cas:
			nv, _ = atomicApply(op, old, v)
		case old == c:
			nv = v
		}
		return old, t.store(in, space, a, 4, nv)
	})
	return d.err
}

// decodeArith decodes the arithmetic instructions on .b32 registers.
func (m *pmodule) decodeArith(in *pinst) error {
	divide := func(signed, rem bool) func(t *thread, a, b uint32) (uint32, error) {
		return func(t *thread, a, b uint32) (uint32, error) {
			if b == 0 {
				return 0, t.fail(in, "divides %#x by zero: unspecified in PTX", a)
			}
			if !signed {
				if rem {
					return a % b, nil
				}
				return a / b, nil
			}
			if a == 0x80000000 && b == 0xFFFFFFFF {
				return 0, t.fail(in, "divides MIN by -1: unspecified in PTX")
			}
			if rem {
				return uint32(int32(a) % int32(b)), nil
			}
			return uint32(int32(a) / int32(b)), nil
		}
	}
	toInt := func(signed bool) func(t *thread, a uint32) (uint32, error) {
		return func(t *thread, a uint32) (uint32, error) {
			if isNaN(a) {
				return 0, t.fail(in, "converts a NaN to an integer: the emitter must replace it first")
			}
			x := math.Trunc(float64(f32(a)))
			if signed {
				return uint32(int32(max(math.MinInt32, min(math.MaxInt32, x)))), nil
			}
			return uint32(max(0, min(math.MaxUint32, x))), nil
		}
	}
	binaries := map[string]func(*thread, uint32, uint32) (uint32, error){
		"add.u32":    ok32(func(a, b uint32) uint32 { return a + b }),
		"sub.u32":    ok32(func(a, b uint32) uint32 { return a - b }),
		"mul.lo.u32": ok32(func(a, b uint32) uint32 { return a * b }),
		"and.b32":    ok32(func(a, b uint32) uint32 { return a & b }),
		"or.b32":     ok32(func(a, b uint32) uint32 { return a | b }),
		"xor.b32":    ok32(func(a, b uint32) uint32 { return a ^ b }),
		"min.u32":    ok32(func(a, b uint32) uint32 { return min(a, b) }),
		"max.u32":    ok32(func(a, b uint32) uint32 { return max(a, b) }),
		"min.s32":    ok32(func(a, b uint32) uint32 { return uint32(min(int32(a), int32(b))) }),
		"max.s32":    ok32(func(a, b uint32) uint32 { return uint32(max(int32(a), int32(b))) }),
		"shl.b32":    ok32(func(a, b uint32) uint32 { return shift("shl.b32", a, b) }),
		"shr.u32":    ok32(func(a, b uint32) uint32 { return shift("shr.u32", a, b) }),
		"shr.s32":    ok32(func(a, b uint32) uint32 { return shift("shr.s32", a, b) }),
		"div.u32":    divide(false, false),
		"rem.u32":    divide(false, true),
		"div.s32":    divide(true, false),
		"rem.s32":    divide(true, true),
		"add.rn.f32": ok32(func(a, b uint32) uint32 { return fb(float32(f32(a) + f32(b))) }),
		"sub.rn.f32": ok32(func(a, b uint32) uint32 { return fb(float32(f32(a) - f32(b))) }),
		"mul.rn.f32": ok32(func(a, b uint32) uint32 { return fb(float32(f32(a) * f32(b))) }),
		"div.rn.f32": ok32(func(a, b uint32) uint32 { return fb(float32(f32(a) / f32(b))) }),
	}
	unaries := map[string]func(*thread, uint32) (uint32, error){
		"not.b32":         func(_ *thread, a uint32) (uint32, error) { return ^a, nil },
		"clz.b32":         func(_ *thread, a uint32) (uint32, error) { return uint32(bits.LeadingZeros32(a)), nil },
		"popc.b32":        func(_ *thread, a uint32) (uint32, error) { return uint32(bits.OnesCount32(a)), nil },
		"neg.s32":         func(_ *thread, a uint32) (uint32, error) { return -a, nil },
		"sqrt.rn.f32":     okF(func(a float32) float32 { return float32(math.Sqrt(float64(a))) }),
		"ex2.approx.f32":  okF(func(a float32) float32 { return float32(math.Exp2(float64(a))) }),
		"lg2.approx.f32":  okF(func(a float32) float32 { return float32(math.Log2(float64(a))) }),
		"sin.approx.f32":  okF(func(a float32) float32 { return float32(math.Sin(float64(a))) }),
		"cos.approx.f32":  okF(func(a float32) float32 { return float32(math.Cos(float64(a))) }),
		"cvt.rmi.f32.f32": okF(func(a float32) float32 { return float32(math.Floor(float64(a))) }),
		"cvt.rpi.f32.f32": okF(func(a float32) float32 { return float32(math.Ceil(float64(a))) }),
		"cvt.rni.f32.f32": okF(func(a float32) float32 { return float32(math.RoundToEven(float64(a))) }),
		"cvt.rzi.f32.f32": okF(func(a float32) float32 { return float32(math.Trunc(float64(a))) }),
		"cvt.rn.f32.s32":  func(_ *thread, a uint32) (uint32, error) { return fb(float32(int32(a))), nil },
		"cvt.rn.f32.u32":  func(_ *thread, a uint32) (uint32, error) { return fb(float32(a)), nil },
		"cvt.rzi.s32.f32": toInt(true),
		"cvt.rzi.u32.f32": toInt(false),
	}
	d := m.decoder(in)
	if f, ok := binaries[in.op]; ok && len(in.args) == 3 {
		in.exec = exec2(d.d32(), d.r32(1), d.r32(2), f)
		return d.err
	}
	if f, ok := unaries[in.op]; ok && len(in.args) == 2 {
		in.exec = exec1(d.d32(), d.r32(1), f)
		return d.err
	}
	if in.op == "fma.rn.f32" && len(in.args) == 4 {
		in.exec = exec3(d.d32(), d.r32(1), d.r32(2), d.r32(3), func(_ *thread, a, b, c uint32) (uint32, error) { return fma32(a, b, c), nil })
		return d.err
	}
	return fmt.Errorf("line %d: %q is not interpreted (not an instruction Emit writes)", in.line, in.text)
}

// run executes t until it returns or reaches a barrier.
func (mc *machine) run(t *thread) error {
	code := mc.mod.code
	for {
		mc.steps++
		if mc.steps > maxSteps {
			return fmt.Errorf("more than %d steps: a loop does not end", maxSteps)
		}
		if t.pc >= len(code) {
			return fmt.Errorf("ran past the end of the kernel")
		}
		in := &code[t.pc]
		if in.collective != nil {
			if in.guard != nil {
				return t.fail(in, "a warp-synchronous instruction under a guard")
			}
			t.warpOp = t.pc
			return nil
		}
		t.pc++
		if in.guard != nil {
			if !t.pdef[in.guard.idx] {
				return t.fail(in, "guard %%p%d read before any instruction wrote it", in.guard.idx)
			}
			if t.p[in.guard.idx] == in.negated {
				continue
			}
		}
		if err := in.exec(t); err != nil {
			return err
		}
		if t.done {
			return nil
		}
		if t.barrier {
			return nil
		}
	}
}

// block runs one block: every thread until it returns or reaches a barrier, in
// turns, until all have returned.
func (mc *machine) block(ctaid [3]uint32) error {
	mod := mc.mod
	shared := make([]byte, mod.sharedSize)
	for i := 0; i+4 <= len(shared); i += 4 {
		binary.LittleEndian.PutUint32(shared[i:], 0xDEADBEEF) // shared memory starts undefined
	}
	poisoned := func(n uint32) []byte {
		mem := make([]byte, n)
		for i := 0; i+4 <= len(mem); i += 4 {
			binary.LittleEndian.PutUint32(mem[i:], 0xDEADBEEF) // so does local memory
		}
		return mem
	}
	var threads []*thread
	wg := mod.reqntid
	for z := uint32(0); z < wg[2]; z++ {
		for y := uint32(0); y < wg[1]; y++ {
			for x := uint32(0); x < wg[0]; x++ {
				threads = append(threads, &thread{
					m: mc, tid: [3]uint32{x, y, z}, ctaid: ctaid, shared: shared, local: poisoned(mod.localSize), linear: len(threads), warpOp: -1,
					p: make([]bool, mod.nregs['p']), r: make([]uint32, mod.nregs['r']), d: make([]uint64, mod.nregs['d']), h: make([]uint16, mod.nregs['h']),
					pdef: make([]bool, mod.nregs['p']), rdef: make([]bool, mod.nregs['r']), ddef: make([]bool, mod.nregs['d']), hdef: make([]bool, mod.nregs['h']),
				})
			}
		}
	}
	for {
		for _, t := range threads {
			if t.done || t.barrier || t.warpOp >= 0 {
				continue
			}
			if err := mc.run(t); err != nil {
				return fmt.Errorf("thread %v: %w", t.tid, err)
			}
		}
		progress, err := mc.warpOps(threads)
		if err != nil {
			return err
		}
		if progress {
			continue
		}
		waiting, done, warp := 0, 0, 0
		for _, t := range threads {
			switch {
			case t.done:
				done++
			case t.barrier:
				waiting++
			case t.warpOp >= 0:
				warp++
			}
		}
		switch {
		case warp > 0:
			return fmt.Errorf("%d threads wait at warp-synchronous instructions that the rest of their membermask never reaches", warp)
		case waiting == 0:
			return nil
		case done > 0:
			return fmt.Errorf("%d threads wait at a barrier that %d others never reach", waiting, done)
		}
		for _, t := range threads {
			t.barrier = false
		}
	}
}

// warpOps runs every warp-synchronous instruction whose whole membermask has
// reached it and reports whether any ran. A membermask must hold the thread
// itself, and every thread it names must wait at the same instruction with the
// same membermask; one that exited makes it an error.
func (mc *machine) warpOps(threads []*thread) (bool, error) {
	progress := false
	for w := 0; w*32 < len(threads); w++ {
		warp := threads[w*32 : min(len(threads), w*32+32)]
		for _, t := range warp {
			if t.warpOp < 0 {
				continue
			}
			in := &mc.mod.code[t.warpOp]
			mask, err := in.mask(t)
			if err != nil {
				return false, err
			}
			lane := t.linear % 32
			if mask&(1<<lane) == 0 {
				return false, t.fail(in, "membermask %#08x leaves out the thread's own lane %d", mask, lane)
			}
			members := make([]*thread, 32)
			ready := true
			for l := range 32 {
				if mask&(1<<l) == 0 {
					continue
				}
				if l >= len(warp) || warp[l].done {
					return false, t.fail(in, "membermask %#08x names lane %d, which exited or does not exist", mask, l)
				}
				o := warp[l]
				if o.warpOp != t.warpOp {
					ready = false
					break
				}
				if om, err := in.mask(o); err != nil || om != mask {
					return false, t.fail(in, "lanes %d and %d give membermasks %#08x and %#08x", lane, l, mask, om)
				}
				members[l] = o
			}
			if !ready {
				continue
			}
			if err := in.collective(members); err != nil {
				return false, err
			}
			for _, o := range members {
				if o != nil {
					o.warpOp = -1
					o.pc++
				}
			}
			progress = true
		}
	}
	return progress, nil
}

// decodeShfl decodes "shfl.sync.mode.b32 d, a, b, c, membermask" with PTX's
// lane arithmetic: c holds the segment mask in bits 8..12 and the clamp in 0..4,
// and a source lane past the segment's end reads the thread's own value.
func (m *pmodule) decodeShfl(in *pinst, mode string) error {
	if len(in.args) != 5 {
		return fmt.Errorf("line %d: %s takes 5 operands", in.line, in.op)
	}
	d := m.decoder(in)
	dst := d.d32()
	src := [4]reader[uint32]{d.r32(1), d.r32(2), d.r32(3), d.r32(4)}
	if d.err != nil {
		return d.err
	}
	in.mask = src[3]
	in.collective = func(ts []*thread) error {
		vals := make([]uint32, 32)
		for l, t := range ts {
			if t != nil {
				var err error
				if vals[l], err = src[0](t); err != nil {
					return err
				}
			}
		}
		out := make([]uint32, 32)
		for l, t := range ts {
			if t == nil {
				continue
			}
			b, err := src[1](t)
			if err != nil {
				return err
			}
			c, err := src[2](t)
			if err != nil {
				return err
			}
			lane := uint32(l)
			bval, cval, seg := b&31, c&31, c>>8&31
			maxLane := lane&seg | cval&^seg
			minLane := lane & seg
			var j uint32
			switch mode {
			case "idx":
				j = minLane | bval&^seg
			default:
				j = lane ^ bval
			}
			if j > maxLane {
				j = lane
			}
			if ts[j] == nil {
				return t.fail(in, "lane %d reads lane %d, which is not in the membermask", lane, j)
			}
			out[l] = vals[j]
		}
		for l, t := range ts {
			if t != nil {
				dst(t, out[l])
			}
		}
		return nil
	}
	in.exec = func(t *thread) error { return t.fail(in, "ran a warp-synchronous instruction alone") }
	return nil
}

// decodeRedux decodes "redux.sync.op.type d, a, membermask": every thread of the
// membermask gets the reduction of all their values.
func (m *pmodule) decodeRedux(in *pinst, op string) error {
	if len(in.args) != 3 {
		return fmt.Errorf("line %d: %s takes 3 operands", in.line, in.op)
	}
	if op != "add.u32" && op != "add.s32" {
		if _, err := atomicApply(op, 0, 0); err != nil || op == "exch.b32" {
			return fmt.Errorf("line %d: %s is not interpreted", in.line, in.op)
		}
	}
	d := m.decoder(in)
	dst, val := d.d32(), d.r32(1)
	if in.mask = d.r32(2); d.err != nil {
		return d.err
	}
	if op == "add.s32" {
		op = "add.u32"
	}
	in.collective = func(ts []*thread) error {
		var acc uint32
		first := true
		for _, t := range ts {
			if t == nil {
				continue
			}
			v, err := val(t)
			if err != nil {
				return err
			}
			if first {
				acc, first = v, false
				continue
			}
			acc, _ = atomicApply(op, acc, v)
		}
		for _, t := range ts {
			if t != nil {
				dst(t, acc)
			}
		}
		return nil
	}
	in.exec = func(t *thread) error { return t.fail(in, "ran a warp-synchronous instruction alone") }
	return nil
}

// launch runs the module over grid with the given buffers' bytes (by binding; an
// empty buffer is allocated one dummy 4-byte element), element counts and
// uniform values.
func launch(mod *pmodule, grid [3]uint32, buffers [][]byte, counts []uint32, uniforms ...uint32) error {
	mc := &machine{mod: mod, grid: grid, ncRead: map[uint64]bool{}, written: map[uint64]bool{}}
	for b, bytes := range buffers {
		mc.buffers = append(mc.buffers, memory{base: bufferBase(b), bytes: bytes})
	}
	mc.params = make([]uint64, len(mod.paramKinds))
	for b := range buffers {
		pb, okb := mod.params[bufParam(uint32(b))]
		pl, okl := mod.params[lenParam(uint32(b))]
		if !okb || !okl {
			return fmt.Errorf("the kernel has no parameters for binding %d", b)
		}
		mc.params[pb], mc.params[pl] = bufferBase(b), uint64(counts[b])
	}
	for i, v := range uniforms {
		pu, ok := mod.params[uniformParam(uint32(i))]
		if !ok {
			return fmt.Errorf("the kernel has no parameter for uniform %d", i)
		}
		mc.params[pu] = uint64(v)
	}
	for z := uint32(0); z < grid[2]; z++ {
		for y := uint32(0); y < grid[1]; y++ {
			for x := uint32(0); x < grid[0]; x++ {
				if err := mc.block([3]uint32{x, y, z}); err != nil {
					return fmt.Errorf("block %v: %w", [3]uint32{x, y, z}, err)
				}
			}
		}
	}
	return nil
}

// dispatchCase emits p for the case, runs it on the interpreter as the backend
// would (write buffers zero-filled, read_write buffers from their inputs, the
// uniform block's values as parameters) and returns the output buffers in binding
// order.
func dispatchCase(p *ir.Program, c kernels.Case, uniformBlock []byte) ([][]byte, error) {
	// The backend's primary module: read buffers through the non-coherent path
	// (its dispatches here never alias a read binding with a written one).
	m, err := Emit(p, Options{Spec: c.Spec, WorkgroupSize: c.WorkgroupSize, NonCoherentReads: true})
	if err != nil {
		return nil, err
	}
	return runModule(m, p, c, uniformBlock)
}

// runModule runs an emitted module of p for the case (see dispatchCase).
func runModule(m *Module, p *ir.Program, c kernels.Case, uniformBlock []byte) ([][]byte, error) {
	mod, err := parseModule(m.Text)
	if err != nil {
		return nil, err
	}
	buffers := make([][]byte, len(p.Buffers))
	counts := make([]uint32, len(p.Buffers))
	for _, b := range p.Buffers {
		size := b.Type.Size()
		var mem []byte
		switch {
		case b.Access.Readable() && int(b.Binding) < len(c.Inputs) && c.Inputs[b.Binding] != nil:
			mem = append([]byte(nil), c.Inputs[b.Binding]...)
		case b.Count > 0:
			mem = make([]byte, size*b.Count)
		case int(b.Binding) < len(c.OutputCounts):
			mem = make([]byte, size*c.OutputCounts[b.Binding])
		}
		counts[b.Binding] = uint32(len(mem)) / size
		if len(mem) == 0 {
			mem = []byte{0xEF, 0xBE, 0xAD, 0xDE} // the 4 bytes the backend allocates for an empty buffer
		}
		buffers[b.Binding] = mem
	}
	vals, err := ir.DecodeUniforms(p, uniformBlock)
	if err != nil {
		return nil, err
	}
	var uniforms []uint32
	for _, v := range vals {
		uniforms = append(uniforms, v.Bits)
	}
	if err := launch(mod, c.Grid, buffers, counts, uniforms...); err != nil {
		return nil, err
	}
	var outs [][]byte
	for _, binding := range p.Outputs() {
		outs = append(outs, buffers[binding][:counts[binding]*p.Buffers[binding].Type.Size()])
	}
	return outs, nil
}

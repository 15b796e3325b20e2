package ptx

import (
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir/half"
)

// tcEmu runs a tensor-core kernel of emitTensorCoreMatmul on the CPU, for the
// instructions that generator writes (and no others: anything else is an error).
// Each warp runs on its own as far as it can (its threads one at a time up to a
// warp collective, ldmatrix, mma.sync or wgmma, which then runs for the warp)
// until bar.sync, which waits for the whole workgroup; so a warp runs ahead of
// the others wherever no barrier holds it.
//
// What is emulated: integer and predicate arithmetic, branches, parameter, global
// and shared loads and stores (every access bounds-checked against its buffer or
// the kernel's shared array: an access outside is an error), ldmatrix (.x4,
// .trans) and mma.sync (m16n8k16 bf16/f16, m16n8k8 tf32 truncating its inputs to
// tf32) with the PTX ISA's fragment layouts; wgmma.mma_async with its operands
// read through the shared-memory matrix descriptors (swizzle modes, leading and
// stride byte offsets, K-major or N-major B: the layout the H200 runs confirmed
// bit-exact), each warp computing its 16 rows of the warpgroup's 64, when
// wgmma.wait_group retires its group (so a stage refilled before its wgmma
// retired gives a wrong result); the products summed in float64 and rounded once
// to f32 (exact for inputs whose partial sums are exact in f32); cp.async as a
// per-thread queue of commit groups that reaches shared memory at
// cp.async.wait_group (lazy) or at issue (eager), so a missing wait (lazy) or a
// copy into a stage still being read (eager) changes the result.
//
// The TMA path: a tensor-map parameter's address (mov.b64 of its name,
// cvta.param) names the encoding in tmaps (what the launch passed
// cuTensorMapEncodeTiled); cp.async.bulk.tensor.2d copies the map's box at the
// coordinates, zero outside the map's dimensions, into shared memory in the
// map's swizzle (16-byte chunk bits 4.. XOR address bits 7..), reading global
// memory at issue; mbarriers (init, arrive, arrive.expect_tx, try_wait.parity)
// keep their phase, pending arrivals and signed tx-count, a phase completing
// when both reach 0; a copy's bytes land, completing its transaction bytes on
// its mbarrier, at issue (eager) or when an invocation waits on that mbarrier
// (lazy), so a wait on the wrong parity, a missing expect_tx or a read before
// the wait sees the poisoned stage (lazy), and a refill of a stage still
// being read changes the result (eager); a thread whose wait finds its phase
// incomplete stops its warp, the others running meanwhile, and a wait that
// nothing can complete is an error.
//
// Not emulated: fence.proxy.async, fence.mbarrier_init and wgmma.fence
// (no-ops here: a missing one goes unnoticed), timing, and the hardware's own
// rounding of the k-sums.
type tcEmu struct {
	insts  []tcInst
	labels map[string]int
	regs   map[string]int
	// global buffers by binding: base address, bytes.
	bases  []uint64
	bufs   [][]byte
	params map[string]uint64
	shared []byte
	eager  bool
	steps  int
	// wgmma holds each warp's committed wgmma groups (oldest first) and open
	// holds the ones not yet committed: they read shared memory and write the
	// accumulators when wgmma.wait_group retires them.
	wgmma map[uint32][][]tcWgmma
	open  map[uint32][]tcWgmma
	// tmaps are the tensor-map parameters: name to its param-space address,
	// and address to its encoding.
	tmapAddr map[string]uint64
	tmaps    map[uint64]TensorMapEncoding
	// bars are the workgroup's mbarriers by shared address, bulk the bulk
	// copies not landed yet by the mbarrier they complete on, bulkCopies
	// the count of cp.async.bulk.tensor run.
	bars       map[uint64]*tcBarrier
	bulk       map[uint64][]tcCopy
	bulkCopies int
}

// tcBarrier is an mbarrier: its completed phases, arrivals still pending in
// the current phase (of count), and the tx-count.
type tcBarrier struct {
	phase, pending, count int
	tx                    int64
}

// complete starts the next phase when the current one has no pending
// arrival and no transaction bytes.
func (b *tcBarrier) complete() {
	if b.pending == 0 && b.tx == 0 {
		b.phase++
		b.pending = b.count
	}
}

// tcWgmma is one issued wgmma.mma_async of a warp.
type tcWgmma struct {
	in           *tcInst
	descA, descB uint64
	scaleD       bool
}

type tcInst struct {
	pred string // "" or a predicate register; neg negates it
	neg  bool
	op   string
	args []string
	line int
}

var tcRegRE = regexp.MustCompile(`%[a-z]+[0-9]+|%n?ctaid\.[xy]`)

const tcSharedBase = 0x400

type tcThread struct {
	regs []uint64
	pc   int
	tid  uint32
	done bool
	// blocked: the thread's try_wait found its phase incomplete; it tries
	// again when its warp runs next.
	blocked bool
	groups  [][]tcCopy // committed groups, oldest first
	open    []tcCopy
}

type tcCopy struct {
	dst  uint32
	data []byte
}

func newTCEmu(text string) (*tcEmu, error) {
	e := &tcEmu{labels: map[string]int{}, regs: map[string]int{}}
	lines := strings.Split(text, "\n")
	inBody := false
	for n, raw := range lines {
		l := strings.TrimSpace(raw)
		if i := strings.Index(l, "//"); i >= 0 {
			l = strings.TrimSpace(l[:i])
		}
		if l == "{" {
			inBody = true
			continue
		}
		if !inBody || l == "" || l == "}" || strings.HasPrefix(l, ".") {
			continue
		}
		if strings.HasSuffix(l, ":") {
			e.labels[strings.TrimSuffix(l, ":")] = len(e.insts)
			continue
		}
		l = strings.TrimSuffix(l, ";")
		in := tcInst{line: n + 1}
		if strings.HasPrefix(l, "@") {
			sp := strings.IndexByte(l, ' ')
			in.pred, l = l[1:sp], strings.TrimSpace(l[sp+1:])
			if strings.HasPrefix(in.pred, "!") {
				in.neg, in.pred = true, in.pred[1:]
			}
		}
		op, rest, _ := strings.Cut(l, " ")
		in.op = op
		in.args = splitArgs(rest)
		for _, m := range tcRegRE.FindAllString(rest, -1) {
			e.reg(m)
		}
		if in.pred != "" {
			e.reg(in.pred)
		}
		e.insts = append(e.insts, in)
	}
	return e, nil
}

// splitArgs splits operands at commas outside braces and brackets.
func splitArgs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if t := strings.TrimSpace(s[start:]); t != "" {
		out = append(out, t)
	}
	return out
}

func (e *tcEmu) reg(name string) int {
	if i, ok := e.regs[name]; ok {
		return i
	}
	e.regs[name] = len(e.regs)
	return e.regs[name]
}

func (e *tcEmu) val(t *tcThread, in *tcInst, s string) (uint64, error) {
	switch {
	case strings.HasPrefix(s, "%tid.x"):
		return uint64(t.tid), nil
	case strings.HasPrefix(s, "%"):
		return t.regs[e.reg(s)], nil
	case strings.HasPrefix(s, "0f"):
		v, err := strconv.ParseUint(s[2:], 16, 32)
		return v, err
	case s == "kiln_tc_smem":
		return tcSharedBase, nil
	}
	if a, ok := e.tmapAddr[s]; ok {
		return a, nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("line %d: operand %q: %w", in.line, s, err)
	}
	return uint64(v), nil
}

func (e *tcEmu) set(t *tcThread, s string, v uint64) { t.regs[e.reg(s)] = v }

// addr evaluates "[reg+imm]" or "[reg]".
func (e *tcEmu) addr(t *tcThread, in *tcInst, s string) (uint64, error) {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	base, off, _ := strings.Cut(s, "+")
	v, err := e.val(t, in, base)
	if err != nil {
		return 0, err
	}
	if off != "" {
		o, err := strconv.ParseUint(off, 10, 32)
		if err != nil {
			return 0, err
		}
		v += o
	}
	return v, nil
}

func vector(s string) []string {
	return splitArgs(strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}"))
}

// global returns the bytes at a global address, bounds-checked.
func (e *tcEmu) global(in *tcInst, a uint64, n int) ([]byte, error) {
	for b, base := range e.bases {
		if a >= base && a+uint64(n) <= base+uint64(len(e.bufs[b])) {
			return e.bufs[b][a-base : a-base+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("line %d (%s): global access of %d bytes at %#x is outside every buffer", in.line, in.op, n, a)
}

func (e *tcEmu) sharedAt(in *tcInst, a uint64, n int) ([]byte, error) {
	if a < tcSharedBase || a-tcSharedBase+uint64(n) > uint64(len(e.shared)) || a%uint64(min(n, 16)) != 0 {
		return nil, fmt.Errorf("line %d (%s): shared access of %d bytes at %#x is outside the array or misaligned", in.line, in.op, n, a)
	}
	return e.shared[a-tcSharedBase : a-tcSharedBase+uint64(n)], nil
}

// sharedOperand is the n bytes of shared memory at the address operand s.
func (e *tcEmu) sharedOperand(t *tcThread, in *tcInst, s string, n int) ([]byte, error) {
	a, err := e.addr(t, in, s)
	if err != nil {
		return nil, err
	}
	return e.sharedAt(in, a, n)
}

func (e *tcEmu) flush(t *tcThread, keep int) {
	for len(t.groups) > keep {
		for _, c := range t.groups[0] {
			copy(e.shared[c.dst-tcSharedBase:], c.data)
		}
		t.groups = t.groups[1:]
	}
}

// step runs thread t's instruction at pc, unless it is collective: then it
// reports the op and leaves pc there.
func (e *tcEmu) step(t *tcThread) (collective bool, err error) {
	e.steps++
	if e.steps > 200_000_000 {
		return false, fmt.Errorf("too many steps")
	}
	in := &e.insts[t.pc]
	if in.pred != "" {
		p := t.regs[e.reg(in.pred)] != 0
		if p == in.neg {
			t.pc++
			return false, nil
		}
	}
	if in.op == "bar.sync" || strings.HasPrefix(in.op, "ldmatrix") || strings.HasPrefix(in.op, "mma.") ||
		(strings.HasPrefix(in.op, "wgmma.") && in.op != "wgmma.fence.sync.aligned") {
		return true, nil
	}
	a := in.args
	v := func(i int) uint64 {
		x, verr := e.val(t, in, a[i])
		if verr != nil && err == nil {
			err = verr
		}
		return x
	}
	u := func(i int) uint32 { return uint32(v(i)) }
	b2u := func(b bool) uint64 {
		if b {
			return 1
		}
		return 0
	}
	next := t.pc + 1
	switch in.op {
	case "ld.param.u64", "ld.param.u32", "ld.param.b32":
		name := strings.Trim(a[1], "[]")
		p, ok := e.params[name]
		if !ok {
			return false, fmt.Errorf("line %d: no parameter %s", in.line, name)
		}
		e.set(t, a[0], p)
	case "cvta.to.global.u64", "mov.u32", "mov.b32", "mov.f32", "mov.b64", "cvta.param.u64":
		e.set(t, a[0], v(1))
	case "add.u32":
		e.set(t, a[0], uint64(u(1)+u(2)))
	case "sub.u32":
		e.set(t, a[0], uint64(u(1)-u(2)))
	case "mul.lo.u32":
		e.set(t, a[0], uint64(u(1)*u(2)))
	case "mad.lo.u32":
		e.set(t, a[0], uint64(u(1)*u(2)+u(3)))
	case "div.u32":
		e.set(t, a[0], uint64(u(1)/u(2)))
	case "rem.u32":
		e.set(t, a[0], uint64(u(1)%u(2)))
	case "and.b32":
		e.set(t, a[0], uint64(u(1)&u(2)))
	case "or.b32":
		e.set(t, a[0], uint64(u(1)|u(2)))
	case "xor.b32":
		e.set(t, a[0], uint64(u(1)^u(2)))
	case "shl.b32":
		e.set(t, a[0], uint64(u(1)<<u(2)))
	case "shr.u32":
		e.set(t, a[0], uint64(u(1)>>u(2)))
	case "or.b64":
		e.set(t, a[0], v(1)|v(2))
	case "and.b64":
		e.set(t, a[0], v(1)&v(2))
	case "shr.u64":
		e.set(t, a[0], v(1)>>v(2))
	case "add.s64":
		e.set(t, a[0], v(1)+v(2))
	case "cvt.u64.u32":
		e.set(t, a[0], uint64(uint32(v(1))))
	case "wgmma.fence.sync.aligned", "fence.proxy.async.shared::cta", "fence.mbarrier_init.release.cluster":
	case "mbarrier.init.shared::cta.b64":
		ad, aerr := e.barrier(t, in, a[0])
		if aerr != nil {
			return false, aerr
		}
		e.bars[ad] = &tcBarrier{pending: int(v(1)), count: int(v(1))}
	case "mbarrier.arrive.expect_tx.shared::cta.b64", "mbarrier.arrive.shared::cta.b64":
		ad, aerr := e.barrier(t, in, a[1])
		if aerr != nil {
			return false, aerr
		}
		b := e.bars[ad]
		if b == nil {
			return false, fmt.Errorf("line %d: arrive on an mbarrier never initialised", in.line)
		}
		if in.op == "mbarrier.arrive.expect_tx.shared::cta.b64" {
			b.tx += int64(v(2))
		}
		b.pending--
		e.set(t, a[0], uint64(b.phase))
		b.complete()
	case "mbarrier.try_wait.parity.shared::cta.b64":
		ad, aerr := e.barrier(t, in, a[1])
		if aerr != nil {
			return false, aerr
		}
		b := e.bars[ad]
		if b == nil {
			return false, fmt.Errorf("line %d: wait on an mbarrier never initialised", in.line)
		}
		parity := int(v(2) & 1)
		if b.phase&1 == parity {
			e.land(ad)
		}
		if b.phase&1 == parity {
			// other warps may complete it: run them first
			t.blocked = true
			return false, nil
		}
		e.set(t, a[0], 1)
	case "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes":
		if err := e.bulkTensor(t, in); err != nil {
			return false, err
		}
	case "ld.global.v4.b32":
		ad, aerr := e.addr(t, in, a[1])
		if aerr != nil {
			return false, aerr
		}
		if ad%16 != 0 {
			return false, fmt.Errorf("line %d: misaligned v4 load at %#x", in.line, ad)
		}
		m, gerr := e.global(in, ad, 16)
		if gerr != nil {
			return false, gerr
		}
		for i, r := range vector(a[0]) {
			e.set(t, r, uint64(binary.LittleEndian.Uint32(m[4*i:])))
		}
	case "st.shared.b32":
		m, err := e.sharedOperand(t, in, a[0], 4)
		if err != nil {
			return false, err
		}
		binary.LittleEndian.PutUint32(m, uint32(v(1)))
	case "add.u64":
		e.set(t, a[0], v(1)+v(2))
	case "mul.lo.u64":
		e.set(t, a[0], v(1)*v(2))
	case "setp.lt.u64":
		e.set(t, a[0], b2u(v(1) < v(2)))
	case "cvt.u32.u64":
		e.set(t, a[0], uint64(uint32(v(1))))
	case "mul.wide.u32":
		e.set(t, a[0], uint64(u(1))*uint64(u(2)))
	case "setp.lt.u32":
		e.set(t, a[0], b2u(u(1) < u(2)))
	case "setp.le.u32":
		e.set(t, a[0], b2u(u(1) <= u(2)))
	case "setp.ge.u32":
		e.set(t, a[0], b2u(u(1) >= u(2)))
	case "setp.eq.u32":
		e.set(t, a[0], b2u(u(1) == u(2)))
	case "setp.ne.u32":
		e.set(t, a[0], b2u(u(1) != u(2)))
	case "min.u32":
		e.set(t, a[0], uint64(min(u(1), u(2))))
	case "div.u64", "rem.u64":
		if v(2) == 0 {
			return false, fmt.Errorf("line %d: %s by 0", in.line, in.op)
		}
		if in.op == "div.u64" {
			e.set(t, a[0], v(1)/v(2))
		} else {
			e.set(t, a[0], v(1)%v(2))
		}
	case "mov.pred":
		e.set(t, a[0], v(1))
	case "and.pred":
		e.set(t, a[0], v(1)&v(2))
	case "bra", "bra.uni":
		l, ok := e.labels[a[0]]
		if !ok {
			return false, fmt.Errorf("line %d: undefined label %s", in.line, a[0])
		}
		next = l
	case "ld.global.u16", "ld.global.b32":
		n := 2
		if in.op == "ld.global.b32" {
			n = 4
		}
		ad, aerr := e.addr(t, in, a[1])
		if aerr != nil {
			return false, aerr
		}
		m, gerr := e.global(in, ad, n)
		if gerr != nil {
			return false, gerr
		}
		if n == 2 {
			e.set(t, a[0], uint64(binary.LittleEndian.Uint16(m)))
		} else {
			e.set(t, a[0], uint64(binary.LittleEndian.Uint32(m)))
		}
	case "st.global.f32", "st.global.v2.f32":
		ad, aerr := e.addr(t, in, a[0])
		if aerr != nil {
			return false, aerr
		}
		vals := []string{a[1]}
		if in.op == "st.global.v2.f32" {
			vals = vector(a[1])
			if ad%8 != 0 {
				return false, fmt.Errorf("line %d: misaligned v2 store at %#x", in.line, ad)
			}
		}
		m, gerr := e.global(in, ad, 4*len(vals))
		if gerr != nil {
			return false, gerr
		}
		for i, r := range vals {
			binary.LittleEndian.PutUint32(m[4*i:], uint32(t.regs[e.reg(r)]))
		}
	case "st.shared.v4.b32":
		m, err := e.sharedOperand(t, in, a[0], 16)
		if err != nil {
			return false, err
		}
		for i, r := range vector(a[1]) {
			binary.LittleEndian.PutUint32(m[4*i:], uint32(t.regs[e.reg(r)]))
		}
	case "ld.shared.b32":
		m, err := e.sharedOperand(t, in, a[1], 4)
		if err != nil {
			return false, err
		}
		e.set(t, a[0], uint64(binary.LittleEndian.Uint32(m)))
	case "cp.async.cg.shared.global":
		dst, derr := e.addr(t, in, a[0])
		src, serr := e.addr(t, in, a[1])
		if derr != nil || serr != nil {
			return false, fmt.Errorf("line %d: cp.async operands", in.line)
		}
		if _, err := e.sharedAt(in, dst, 16); err != nil {
			return false, err
		}
		if src%16 != 0 {
			return false, fmt.Errorf("line %d: cp.async source %#x is not 16-byte aligned", in.line, src)
		}
		m, gerr := e.global(in, src, 16)
		if gerr != nil {
			return false, gerr
		}
		c := tcCopy{dst: uint32(dst), data: append([]byte(nil), m...)}
		if e.eager {
			copy(e.shared[c.dst-tcSharedBase:], c.data)
		} else {
			t.open = append(t.open, c)
		}
	case "cp.async.commit_group":
		t.groups = append(t.groups, t.open)
		t.open = nil
	case "cp.async.wait_group":
		n, _ := strconv.Atoi(a[0])
		e.flush(t, n)
	case "cp.async.wait_all":
		t.groups = append(t.groups, t.open)
		t.open = nil
		e.flush(t, 0)
	case "ret":
		t.done = true
	default:
		return false, fmt.Errorf("line %d: the emulator has no %s", in.line, in.op)
	}
	t.pc = next
	return false, err
}

// barrier is the address of the 8-byte aligned mbarrier at operand s.
func (e *tcEmu) barrier(t *tcThread, in *tcInst, s string) (uint64, error) {
	ad, err := e.addr(t, in, s)
	if err != nil {
		return 0, err
	}
	if _, err := e.sharedAt(in, ad, 8); err != nil {
		return 0, err
	}
	return ad, nil
}

// land writes the bulk copies pending on the mbarrier at ad into shared
// memory and completes their bytes on it.
func (e *tcEmu) land(ad uint64) {
	b := e.bars[ad]
	for _, c := range e.bulk[ad] {
		copy(e.shared[c.dst-tcSharedBase:], c.data)
		b.tx -= int64(len(c.data))
	}
	delete(e.bulk, ad)
	b.complete()
}

// bulkTensor runs cp.async.bulk.tensor.2d [dst], [map, {x, y}], [mbar]: the
// map's box at column x, row y, each element at dst + its row·the box's row
// bytes + its column·size, 16-byte chunks swizzled by the address; 0 outside
// the map's dimensions.
func (e *tcEmu) bulkTensor(t *tcThread, in *tcInst) error {
	e.bulkCopies++
	if len(in.args) != 3 {
		return fmt.Errorf("line %d: %d operands", in.line, len(in.args))
	}
	dst, err := e.addr(t, in, in.args[0])
	if err != nil {
		return err
	}
	mapReg, coords, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(in.args[1], "["), "]"), ",")
	ma, err := e.val(t, in, strings.TrimSpace(mapReg))
	if err != nil {
		return err
	}
	enc, ok := e.tmaps[ma]
	if !ok {
		return fmt.Errorf("line %d: %#x is no tensor map", in.line, ma)
	}
	cs := vector(strings.TrimSpace(coords))
	if len(cs) != 2 {
		return fmt.Errorf("line %d: coordinates %q", in.line, coords)
	}
	x, errX := e.val(t, in, cs[0])
	y, errY := e.val(t, in, cs[1])
	bar, errB := e.barrier(t, in, in.args[2])
	if errX != nil || errY != nil || errB != nil {
		return fmt.Errorf("line %d: operands of the bulk copy", in.line)
	}
	if e.bars[bar] == nil {
		return fmt.Errorf("line %d: bulk copy onto an mbarrier never initialised", in.line)
	}
	es := uint64(enc.Elem.Size())
	rowBytes := uint64(enc.Box[0]) * es
	sw := uint64(enc.SwizzleBytes)
	switch {
	case enc.Base%16 != 0 || enc.RowStride%16 != 0 || enc.RowStride < enc.Dims[0]*es:
		return fmt.Errorf("line %d: tensor map %+v breaks the copy engine's rules", in.line, enc)
	case sw != 32 && sw != 64 && sw != 128, rowBytes > sw, rowBytes%16 != 0:
		return fmt.Errorf("line %d: box rows of %d bytes in a %d-byte swizzle", in.line, rowBytes, sw)
	case dst%128 != 0:
		return fmt.Errorf("line %d: bulk copy destination %#x is not 128-byte aligned", in.line, dst)
	}
	if _, err := e.sharedAt(in, dst, int(rowBytes)*int(enc.Box[1])); err != nil {
		return err
	}
	bits := map[uint64]uint{32: 1, 64: 2, 128: 3}[sw]
	var copies []tcCopy
	for r := range uint64(enc.Box[1]) {
		for c := range uint64(enc.Box[0]) {
			gx, gy := uint64(uint32(x))+c, uint64(uint32(y))+r
			val := make([]byte, es)
			if gx < enc.Dims[0] && gy < enc.Dims[1] {
				m, err := e.global(in, enc.Base+gy*enc.RowStride+gx*es, int(es))
				if err != nil {
					return err
				}
				copy(val, m)
			}
			a := dst + r*rowBytes + c*es
			a ^= (a >> 7 & (1<<bits - 1)) << 4
			copies = append(copies, tcCopy{dst: uint32(a), data: val})
		}
	}
	e.bulk[bar] = append(e.bulk[bar], copies...)
	if e.eager {
		e.land(bar)
	}
	return nil
}

// warpOp runs the collective at the warp's pc for its 32 threads.
func (e *tcEmu) warpOp(ts []*tcThread) error {
	pc := ts[0].pc
	in := &e.insts[pc]
	for _, t := range ts {
		if t.pc != pc {
			return fmt.Errorf("line %d: %s reached by part of a warp", in.line, in.op)
		}
	}
	switch {
	case strings.HasPrefix(in.op, "ldmatrix.sync.aligned.m8n8.x4"):
		trans := strings.Contains(in.op, ".trans")
		dsts := vector(in.args[0])
		// rows[m][r] are the 8 b16 of row r of matrix m.
		var rows [4][8][8]uint16
		for l, t := range ts {
			m, err := e.sharedOperand(t, in, in.args[1], 16)
			if err != nil {
				return err
			}
			for c := range 8 {
				rows[l/8][l%8][c] = binary.LittleEndian.Uint16(m[2*c:])
			}
		}
		for l, t := range ts {
			for m, d := range dsts {
				var lo, hi uint16
				if trans {
					lo, hi = rows[m][2*(l%4)][l/4], rows[m][2*(l%4)+1][l/4]
				} else {
					lo, hi = rows[m][l/4][2*(l%4)], rows[m][l/4][2*(l%4)+1]
				}
				e.set(t, d, uint64(lo)|uint64(hi)<<16)
			}
		}
	case strings.HasPrefix(in.op, "mma.sync.aligned"):
		return e.mma(ts, in)
	case strings.HasPrefix(in.op, "wgmma.mma_async"):
		t := ts[0]
		w := t.tid / 32
		da, db := t.regs[e.reg(in.args[1])], t.regs[e.reg(in.args[2])]
		for _, o := range ts {
			if o.regs[e.reg(in.args[1])] != da || o.regs[e.reg(in.args[2])] != db {
				return fmt.Errorf("line %d: wgmma descriptors differ across the warp", in.line)
			}
		}
		e.open[w] = append(e.open[w], tcWgmma{in: in, descA: da, descB: db, scaleD: t.regs[e.reg(in.args[3])] != 0})
	case in.op == "wgmma.commit_group.sync.aligned":
		w := ts[0].tid / 32
		e.wgmma[w] = append(e.wgmma[w], e.open[w])
		e.open[w] = nil
	case in.op == "wgmma.wait_group.sync.aligned":
		w := ts[0].tid / 32
		keep, _ := strconv.Atoi(in.args[0])
		for len(e.wgmma[w]) > keep {
			for _, op := range e.wgmma[w][0] {
				if err := e.runWgmma(ts, op); err != nil {
					return err
				}
			}
			e.wgmma[w] = e.wgmma[w][1:]
		}
	default:
		return fmt.Errorf("line %d: no collective %s", in.line, in.op)
	}
	for _, t := range ts {
		t.pc++
	}
	return nil
}

func (e *tcEmu) mma(ts []*tcThread, in *tcInst) error {
	d, av, bv, cv := vector(in.args[0]), vector(in.args[1]), vector(in.args[2]), vector(in.args[3])
	tf32 := strings.Contains(in.op, ".tf32")
	k := 16
	if tf32 {
		k = 8
	}
	var A [16][16]float64
	var B [16][8]float64
	var C [16][8]float64
	elem := func(bits uint16) float64 {
		if strings.Contains(in.op, ".bf16") {
			return float64(half.BFloat16(bits).Float32())
		}
		return half.Float16(bits).Float64()
	}
	for l, t := range ts {
		g, tig := l/4, l%4
		for i, r := range av {
			x := uint32(t.regs[e.reg(r)])
			row := g + 8*(i%2)
			if tf32 {
				A[row][tig+4*(i/2)] = float64(math.Float32frombits(x & 0xffffe000))
				continue
			}
			col := 2*tig + 8*(i/2)
			A[row][col], A[row][col+1] = elem(uint16(x)), elem(uint16(x>>16))
		}
		for i, r := range bv {
			x := uint32(t.regs[e.reg(r)])
			if tf32 {
				B[tig+4*i][g] = float64(math.Float32frombits(x & 0xffffe000))
				continue
			}
			kk := 2*tig + 8*i
			B[kk][g], B[kk+1][g] = elem(uint16(x)), elem(uint16(x>>16))
		}
		for i, r := range cv {
			C[g+8*(i/2)][2*tig+i%2] = float64(math.Float32frombits(uint32(t.regs[e.reg(r)])))
		}
	}
	for l, t := range ts {
		g, tig := l/4, l%4
		for i, r := range d {
			row, col := g+8*(i/2), 2*tig+i%2
			s := C[row][col]
			for kk := range k {
				s += A[row][kk] * B[kk][col]
			}
			e.set(t, r, uint64(math.Float32bits(float32(s))))
		}
		t.pc++
	}
	return nil
}

// tcSmemElem reads the operand element at a shared address after the
// descriptor's swizzle (address bits 4.. XOR bits 7.., 1 to 3 of them).
func (e *tcEmu) tcSmemElem(in *tcInst, addr uint64, bits uint, kind string) (float64, error) {
	addr ^= (addr >> 7 & (1<<bits - 1)) << 4
	size := 2
	if kind == "tf32" {
		size = 4
	}
	m, err := e.sharedAt(in, addr, size)
	if err != nil {
		return 0, err
	}
	switch kind {
	case "bf16":
		return float64(half.BFloat16(binary.LittleEndian.Uint16(m)).Float32()), nil
	case "f16":
		return half.Float16(binary.LittleEndian.Uint16(m)).Float64(), nil
	}
	return float64(math.Float32frombits(binary.LittleEndian.Uint32(m) & 0xffffe000)), nil
}

// runWgmma retires one wgmma.mma_async for a warp: its 16 rows of the 64-row
// product (warp w mod 4 of the warpgroup), A K-major and B K-major or (16-bit,
// imm-trans-b 1) N-major, read through the descriptors: start address, leading
// and stride byte offsets, swizzle mode (1: 128 bytes, 2: 64, 3: 32). A
// K-major element (r, k) is at start + (r/8)·SBO + (r mod 8)·W + k·size; an
// N-major B element (k, n) at start + (n/(W/size))·LBO + (k/8)·SBO + (k mod 8)·W
// + (n mod (W/size))·size, W the swizzle width.
func (e *tcEmu) runWgmma(ts []*tcThread, op tcWgmma) error {
	in := op.in
	var n, k int
	var kind string
	if _, err := fmt.Sscanf(strings.TrimPrefix(in.op, "wgmma.mma_async.sync.aligned.m64n"), "%dk%d", &n, &k); err != nil {
		return fmt.Errorf("line %d: shape of %s: %w", in.line, in.op, err)
	}
	kind = in.op[strings.LastIndex(in.op, ".")+1:]
	size := uint64(2)
	if kind == "tf32" {
		size = 4
	}
	transB := len(in.args) == 8 && in.args[7] == "1"
	dec := func(d uint64) (start, lbo, sbo, w uint64, bits uint, err error) {
		start, lbo, sbo = (d&0x3fff)<<4, (d>>16&0x3fff)<<4, (d>>32&0x3fff)<<4
		switch d >> 62 {
		case 1:
			return start, lbo, sbo, 128, 3, nil
		case 2:
			return start, lbo, sbo, 64, 2, nil
		case 3:
			return start, lbo, sbo, 32, 1, nil
		}
		return 0, 0, 0, 0, 0, fmt.Errorf("line %d: descriptor %#x without a swizzle mode", in.line, d)
	}
	sa, _, sbA, wA, bA, err := dec(op.descA)
	if err != nil {
		return err
	}
	sb, lbB, sbB, wB, bB, err := dec(op.descB)
	if err != nil {
		return err
	}
	quarter := int(ts[0].tid/32) % 4
	acc := vector(in.args[0])
	if len(acc) != n/2 {
		return fmt.Errorf("line %d: %d accumulators for n = %d", in.line, len(acc), n)
	}
	for l, t := range ts {
		g, tig := l/4, l%4
		for i, r := range acc {
			row, col := 16*quarter+g+8*(i%4/2), 8*(i/4)+2*tig+i%2
			s := 0.0
			if op.scaleD {
				s = float64(math.Float32frombits(uint32(t.regs[e.reg(r)])))
			}
			for kk := range k {
				a, err := e.tcSmemElem(in, sa+uint64(row/8)*sbA+uint64(row%8)*wA+uint64(kk)*size, bA, kind)
				if err != nil {
					return err
				}
				var ba uint64
				if transB {
					per := wB / size
					ba = sb + uint64(col)/per*lbB + uint64(kk/8)*sbB + uint64(kk%8)*wB + uint64(col)%per*size
				} else {
					ba = sb + uint64(col/8)*sbB + uint64(col%8)*wB + uint64(kk)*size
				}
				b, err := e.tcSmemElem(in, ba, bB, kind)
				if err != nil {
					return err
				}
				s += a * b
			}
			e.set(t, r, uint64(math.Float32bits(float32(s))))
		}
	}
	return nil
}

// run executes the grid; threads per workgroup from the config.
func (e *tcEmu) run(gridX, gridY, threads uint32, sharedBytes uint32) error {
	for by := range gridY {
		for bx := range gridX {
			e.shared = make([]byte, sharedBytes)
			e.wgmma, e.open = map[uint32][][]tcWgmma{}, map[uint32][]tcWgmma{}
			e.bars, e.bulk = map[uint64]*tcBarrier{}, map[uint64][]tcCopy{}
			for i := range e.shared {
				e.shared[i] = 0xA5 // poison: a read before a write gives garbage
			}
			ts := make([]*tcThread, threads)
			for i := range ts {
				ts[i] = &tcThread{regs: make([]uint64, len(e.regs)), tid: uint32(i)}
				ts[i].regs[e.reg("%ctaid.x")] = uint64(bx)
				ts[i].regs[e.reg("%ctaid.y")] = uint64(by)
				if _, ok := e.regs["%nctaid.x"]; ok {
					ts[i].regs[e.reg("%nctaid.x")] = uint64(gridX)
				}
				if _, ok := e.regs["%nctaid.y"]; ok {
					ts[i].regs[e.reg("%nctaid.y")] = uint64(gridY)
				}
			}
			if err := e.block(ts); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *tcEmu) block(ts []*tcThread) error {
	for {
		progress := false
		for w := 0; w < len(ts); w += 32 {
			moved, err := e.runWarp(ts[w : w+32])
			if err != nil {
				return err
			}
			progress = progress || moved
		}
		done, blocked := 0, -1
		for i, t := range ts {
			if t.done {
				done++
			}
			if t.blocked && blocked < 0 {
				blocked = i
			}
		}
		if done == len(ts) {
			return nil
		}
		if blocked >= 0 {
			if !progress {
				t := ts[blocked]
				return fmt.Errorf("line %d: thread %d waits on an mbarrier phase that nothing completes", e.insts[t.pc].line, t.tid)
			}
			continue
		}
		if done != 0 {
			return fmt.Errorf("part of the workgroup returned while the rest waits at line %d", e.insts[ts[0].pc].line)
		}
		pc := ts[0].pc
		for _, t := range ts {
			if t.pc != pc {
				return fmt.Errorf("bar.sync at line %d reached by part of the workgroup (thread %d at line %d)", e.insts[pc].line, t.tid, e.insts[t.pc].line)
			}
			t.pc++
		}
	}
}

// runWarp runs a warp as far as it goes on its own: through its ldmatrix and
// mma instructions up to a bar.sync, its end, or an mbarrier wait of one of
// its threads that cannot complete yet, so a warp runs ahead of the others
// wherever no barrier holds it (what a missing barrier would allow). moved
// says whether any instruction ran.
func (e *tcEmu) runWarp(ts []*tcThread) (moved bool, err error) {
	for {
		blocked := false
		for _, t := range ts {
			t.blocked = false
			for !t.done {
				if t.pc >= len(e.insts) {
					return moved, fmt.Errorf("fell off the end of the kernel")
				}
				coll, err := e.step(t)
				if err != nil {
					return moved, err
				}
				if t.blocked {
					blocked = true
					break
				}
				if coll {
					break
				}
				moved = true
			}
		}
		if blocked || ts[0].done || e.insts[ts[0].pc].op == "bar.sync" {
			return moved, nil
		}
		if err := e.warpOp(ts); err != nil {
			return moved, err
		}
		moved = true
	}
}

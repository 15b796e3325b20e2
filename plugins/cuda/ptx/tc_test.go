package ptx

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

func tcCfg(t ir.Type, tm, tn, tk, wm, wn, st uint32) TCConfig {
	return TCConfig{Operand: t, TileM: tm, TileN: tn, TileK: tk, WarpsM: wm, WarpsN: wn, Stages: st,
		Target: Target{SM: 80}, Buffers: 3, Uniforms: 3, A: 0, B: 1, C: 2, M: 0, N: 1, K: 2}
}

func tcWgmmaCfg(t ir.Type, tm, tn, tk, st uint32, overlap, dynamic bool) TCConfig {
	c := tcCfg(t, tm, tn, tk, 4*tm/64, 1, st)
	c.Wgmma, c.Overlap, c.DynamicShared, c.Target = true, overlap, dynamic, Target{SM: 90}
	return c
}

// tcTMA is c staged by the bulk tensor copy engine.
func tcTMA(c TCConfig) TCConfig {
	c.TMA = true
	return c
}

// tcGrouped is c with its workgroups in groups of g tile rows.
func tcGrouped(c TCConfig, g uint32) TCConfig {
	c.GroupRows = g
	return c
}

// TestTensorCorePTXStructure checks every benchmark kernel's text: ASCII only
// (ptxas rejects anything else), declared registers cover every one used, every
// branch goes to a label defined once, Emit's parameters in order, and the
// expected number of mma, ldmatrix and cp.async instructions.
func TestTensorCorePTXStructure(t *testing.T) {
	for _, c := range tcBenchConfigs() {
		t.Run(tcFileName(c), func(t *testing.T) {
			text, ok, why := emitTensorCoreMatmul(c)
			if !ok {
				t.Fatal(why)
			}
			for i, r := range text {
				if r > 127 {
					t.Fatalf("non-ASCII %q at byte %d", r, i)
				}
			}
			decl := map[string]int{}
			for _, m := range regexp.MustCompile(`\.reg \.\w+ %(\w+)<(\d+)>`).FindAllStringSubmatch(text, -1) {
				decl[m[1]], _ = strconv.Atoi(m[2])
			}
			for _, m := range regexp.MustCompile(`%(r|rd|p|f)(\d+)\b`).FindAllStringSubmatch(text, -1) {
				n, _ := strconv.Atoi(m[2])
				if n >= decl[m[1]] {
					t.Fatalf("%%%s%d used but %%%s<%d> declared", m[1], n, m[1], decl[m[1]])
				}
			}
			labels := map[string]int{}
			for _, m := range regexp.MustCompile(`(?m)^(TC_L\d+):$`).FindAllStringSubmatch(text, -1) {
				labels[m[1]]++
			}
			for l, n := range labels {
				if n != 1 {
					t.Fatalf("label %s defined %d times", l, n)
				}
			}
			for _, m := range regexp.MustCompile(`bra(?:\.uni)? (\w+);`).FindAllStringSubmatch(text, -1) {
				if labels[m[1]] != 1 {
					t.Fatalf("branch to undefined label %s", m[1])
				}
			}
			wantParams := "kiln_buf0,\n\t.param .u64 kiln_buf1,\n\t.param .u64 kiln_buf2,\n\t.param .u32 kiln_len0,\n\t.param .u32 kiln_len1,\n\t.param .u32 kiln_len2,\n\t.param .b32 kiln_uni0,\n\t.param .b32 kiln_uni1,\n\t.param .b32 kiln_uni2\n)"
			if !strings.Contains(text, wantParams) || !strings.Contains(text, ".entry "+EntryPoint+"(") {
				t.Fatalf("kernel interface differs from Emit's:\n%s", text[:600])
			}
			if !strings.Contains(text, fmt.Sprintf(".reqntid %d, 1, 1", c.Threads())) {
				t.Fatal("no .reqntid for the warps")
			}
			w := &tcWriter{cfg: c}
			steps := c.TileK / c.kStep()
			count := func(s string) int { return strings.Count(text, s) }
			if c.Wgmma {
				if n := count("\twgmma.mma_async.sync.aligned.m64n"); n != int(steps) {
					t.Errorf("%d wgmma instructions, want %d", n, steps)
				}
				waits := "wgmma.wait_group.sync.aligned 0;"
				if c.Overlap {
					waits = "wgmma.wait_group.sync.aligned 1;"
				}
				if count("wgmma.fence.sync.aligned") != 1 || count(waits) != 1 || count("fence.proxy.async.shared::cta") != 1 {
					t.Error("wgmma without its fences and wait")
				}
			} else if n := count("\tmma.sync.aligned."); n != int(steps*w.mTiles()*w.nTiles()) {
				t.Errorf("%d mma instructions, want %d", n, steps*w.mTiles()*w.nTiles())
			}
			wantLdm := steps * w.mTiles()
			if c.Wgmma {
				wantLdm = 0
			} else if c.Operand != ir.F32 {
				wantLdm += steps * w.nTiles() / 2
			}
			if n := count("\tldmatrix.sync.aligned.m8n8.x4"); n != int(wantLdm) {
				t.Errorf("%d ldmatrix, want %d", n, wantLdm)
			}
			chunks := (c.TileM*c.rowBytesA() + c.TileK*c.rowBytesB()) / 16 / c.Threads()
			if c.Wgmma && c.Operand == ir.F32 {
				// b goes through registers, transposed: four 4-byte stores a chunk
				chunks = c.TileM * c.rowBytesA() / 16 / c.Threads()
				bChunks := c.TileK * c.rowBytesB() / 16 / c.Threads()
				if n := count("\tst.shared.b32"); n != int(2*4*bChunks) {
					t.Errorf("%d transposing stores, want %d", n, 2*4*bChunks)
				}
			}
			if n := count("\tcp.async.cg.shared.global"); n != int(4*chunks) {
				t.Errorf("%d cp.async, want %d (prologue and loop, a step inside the bounds and one at an edge)", n, 4*chunks)
			}
			if n := count("cp.async.commit_group"); n != 2 {
				t.Errorf("%d commit_group, want 2", n)
			}
			if !strings.Contains(text, fmt.Sprintf("cp.async.wait_group %d;", c.prefetch()-1)) {
				t.Error("no wait_group for the ring depth")
			}
			if c.DynamicShared {
				if !strings.Contains(text, ".extern .shared .align 1024 .b8 kiln_tc_smem[];") {
					t.Error("no extern shared array")
				}
			} else if c.SharedBytes() > tcMaxStaticShared || !strings.Contains(text, fmt.Sprintf("kiln_tc_smem[%d]", c.SharedBytes())) {
				t.Errorf("shared memory %d", c.SharedBytes())
			}
		})
	}
}

// TestTensorCoreRejects pins the reasons for configurations the generator
// cannot emit.
func TestTensorCoreRejects(t *testing.T) {
	good := tcCfg(ir.BF16, 64, 64, 32, 2, 2, 3)
	cases := map[string]func(*TCConfig){
		"operand type":  func(c *TCConfig) { c.Operand = ir.U32 },
		"target":        func(c *TCConfig) { c.Target = Target{SM: 70} },
		"tile":          func(c *TCConfig) { c.TileM = 48 },
		"k step":        func(c *TCConfig) { c.TileK = 24 },
		"stages":        func(c *TCConfig) { c.Stages = 1 },
		"shared memory": func(c *TCConfig) { c.TileM, c.TileN, c.Stages = 256, 256, 3 },
		"binding":       func(c *TCConfig) { c.C = 3 },
		"uniform":       func(c *TCConfig) { c.K = 5 },
		"split evenly":  func(c *TCConfig) { c.TileM, c.TileN, c.TileK = 32, 32, 16 },
		"TMA path":      func(c *TCConfig) { c.TMA = true },
		"mbarriers":     func(c *TCConfig) { c.Release = true },
	}
	if _, ok, why := emitTensorCoreMatmul(good); !ok {
		t.Fatal(why)
	}
	for want, mod := range cases {
		c := good
		mod(&c)
		_, ok, why := emitTensorCoreMatmul(c)
		if ok || !strings.Contains(why, want) {
			t.Errorf("%s: ok %v, reason %q", want, ok, why)
		}
	}
}

// tcProgram builds a matmul_tc program (the shape of tcBody) with builder calls.
func tcProgram(op ir.Type, tm, tn, tk, threads uint32, tf32 bool) *ir.Program {
	b := ir.NewBuilder("kiln.matrix.matmul_tc", threads, 1, 1)
	m, n, k := b.Uniform("m", ir.U32), b.Uniform("n", ir.U32), b.Uniform("k", ir.U32)
	a := b.Buffer("a", op, ir.Read)
	bb := b.Buffer("b", op, ir.Read)
	c := b.Buffer("c", ir.F32, ir.Write)
	acc := b.Matrix("acc", ir.F32, tm, tn)
	ma := b.Matrix("A", op, tm, tk)
	mb := b.Matrix("B", op, tk, tn)
	row0 := b.Let("row0", ir.Mul(ir.WorkgroupID(1), ir.LitU32(tm)))
	col0 := b.Let("col0", ir.Mul(ir.WorkgroupID(0), ir.LitU32(tn)))
	b.MatrixFill(acc, ir.LitF32(0))
	b.For("k0", ir.U32, ir.LitU32(0), k, ir.LitU32(tk), func(l *ir.Block, k0 ir.Expr) {
		l.MatrixLoadBounded(ma, a, ir.Add(ir.Mul(row0, k), k0), k, ir.RowMajor, ir.Sub(m, row0), ir.Sub(k, k0))
		l.MatrixLoadBounded(mb, bb, ir.Add(ir.Mul(k0, n), col0), n, ir.RowMajor, ir.Sub(k, k0), ir.Sub(n, col0))
		if tf32 {
			l.MatrixMMATF32(acc, ma, mb)
		} else {
			l.MatrixMMA(acc, ma, mb)
		}
	})
	b.MatrixStoreBounded(acc, c, ir.Add(ir.Mul(row0, n), col0), n, ir.RowMajor, ir.Sub(m, row0), ir.Sub(n, col0))
	return b.Program()
}

func TestMatchTensorCoreMatmul(t *testing.T) {
	sm80, sm90 := Target{SM: 80}, Target{SM: 90}
	for _, p := range []*ir.Program{tcProgram(ir.BF16, 128, 64, 32, 256, false), tcProgram(ir.F32, 64, 64, 16, 128, true),
		tcProgram(ir.BF16, 64, 128, 64, 128, false)} {
		if err := ir.Validate(p); err != nil {
			t.Fatalf("the matmul_tc program is not valid IR: %v", err)
		}
	}
	cases := []struct {
		name    string
		p       *ir.Program
		target  Target
		dynamic bool
		want    TCConfig
	}{
		{"mma.sync", tcProgram(ir.BF16, 128, 64, 32, 256, false), sm80, false, tcCfg(ir.BF16, 128, 64, 32, 2, 4, 3)},
		{"wgmma", tcProgram(ir.BF16, 128, 64, 32, 256, false), sm90, false, func() TCConfig {
			c := tcGrouped(tcWgmmaCfg(ir.BF16, 128, 64, 32, 4, true, false), tcGroupRows)
			c.Target = sm90
			return c
		}()},
		{"wgmma, static only", tcProgram(ir.F16, 64, 128, 64, 128, false), sm90, false, tcGrouped(tcWgmmaCfg(ir.F16, 64, 128, 64, 2, false, false), tcGroupRows)},
		{"wgmma, dynamic", tcProgram(ir.F16, 64, 128, 64, 128, false), sm90, true, tcTMA(tcGrouped(tcWgmmaCfg(ir.F16, 64, 128, 64, 4, true, true), tcGroupRows))},
		{"tf32 on mma.sync", tcProgram(ir.F32, 64, 64, 16, 128, true), sm80, true, tcCfg(ir.F32, 64, 64, 16, 2, 2, 3)},
		{"tf32 on wgmma", tcProgram(ir.F32, 64, 64, 16, 128, true), sm90, true, tcGrouped(tcWgmmaCfg(ir.F32, 64, 64, 16, 4, true, false), tcGroupRows)},
		{"not a warpgroup per 64 rows", tcProgram(ir.BF16, 128, 64, 32, 128, false), sm90, false, func() TCConfig {
			c := tcCfg(ir.BF16, 128, 64, 32, 2, 2, 3)
			c.Target = sm90
			return c
		}()},
	}
	cases = append(cases, struct {
		name    string
		p       *ir.Program
		target  Target
		dynamic bool
		want    TCConfig
	}{"the corpus kernel (lets)", gputest.CorpusTC(t, ir.BF16, 64, 128, 32), sm90, false, tcGrouped(tcWgmmaCfg(ir.BF16, 64, 128, 32, 4, true, false), tcGroupRows)})
	for _, tc := range cases {
		var maxDyn uint32
		if tc.dynamic {
			maxDyn = tcMaxDynamicShared
		}
		cfg, ok, why := matchTensorCoreMatmul(tc.p, tc.target, maxDyn)
		if !ok || cfg != tc.want {
			t.Errorf("%s: got %+v (ok %v, %s), want %+v", tc.name, cfg, ok, why, tc.want)
			continue
		}
		if _, ok, why := emitTensorCoreMatmul(cfg); !ok {
			t.Errorf("%s: %s", tc.name, why)
		}
	}
	rejects := map[string]*ir.Program{
		"precision tf32": tcProgram(ir.F32, 64, 64, 16, 128, false),
		"row of whole warps": func() *ir.Program {
			p := tcProgram(ir.BF16, 64, 64, 32, 128, false)
			p.WorkgroupSize = [3]uint32{32, 4, 1}
			return p
		}(),
		"canonical tiled loop": func() *ir.Program {
			p := tcProgram(ir.BF16, 64, 64, 32, 128, false)
			loop := p.Body[3].(ir.ForStmt)
			body := append([]ir.Stmt(nil), loop.Body...)
			ld := body[0].(ir.MatrixLoadStmt)
			ld.Layout = ir.ColMajor
			body[0] = ld
			loop.Body = body
			p.Body[3] = loop
			return p
		}(),
		"not 3": func() *ir.Program {
			p := tcProgram(ir.BF16, 64, 64, 32, 128, false)
			p.Body = p.Body[:4]
			return p
		}(),
	}
	// the corpus kernel with lets that change what the bounds compute: its
	// store's rows and columns swapped
	swapped := gputest.CorpusTC(t, ir.BF16, 64, 64, 32)
	swapped.Body = append([]ir.Stmt(nil), swapped.Body...)
	st := swapped.Body[len(swapped.Body)-1].(ir.MatrixStoreStmt)
	st.Bound = &ir.MatrixBound{Rows: st.Bound.Cols, Cols: st.Bound.Rows}
	swapped.Body[len(swapped.Body)-1] = st
	rejects["canonical tiled loop"+" (lets)"] = swapped
	for want, p := range rejects {
		want = strings.TrimSuffix(want, " (lets)")
		if _, ok, why := matchTensorCoreMatmul(p, sm80, 0); ok || !strings.Contains(why, want) {
			t.Errorf("%s: ok %v, reason %q", want, ok, why)
		}
	}
}

// tcRun emulates cfg's kernel on m×k and k×n small-integer matrices (c guarded
// by extra poisoned elements past m·n: inside its count, as many as a tile's
// rows take, when longC, past it otherwise; b's count shortened by shortB) and compares c with the exact
// product, bit for bit.
func tcRun(t *testing.T, cfg TCConfig, m, n, k, shortB int, longC, eager bool, rng *rand.Rand) {
	t.Helper()
	text, ok, why := emitTensorCoreMatmul(cfg)
	if !ok {
		t.Fatal(why)
	}
	g := tcGeometry{operand: cfg.Operand, tileM: cfg.TileM, tileN: cfg.TileN, threads: cfg.Threads(), shared: cfg.SharedBytes()}
	if cfg.TMA {
		g.maps = cfg.tensorMaps(9)
	}
	tcRunText(t, text, g, m, n, k, shortB, longC, eager, rng)
}

// tcGeometry is what running a tensor-core module takes besides its text: the
// operand type, the tile (the grid is ceil(n/TileN) × ceil(m/TileM)), the
// workgroup's invocations and its shared memory, static and dynamic.
type tcGeometry struct {
	operand      ir.Type
	tileM, tileN uint32
	threads      uint32
	shared       uint32
	// maps are the module's tensor maps (TMA path): the run passes them
	// encoded by TensorMap.Encoding and kiln_tma 1 when every one encodes
	// and noTMA is false, else kiln_tma 0.
	maps  []TensorMap
	noTMA bool
}

// tcRunText is tcRun for a module's text; it returns the emulator after the
// run.
func tcRunText(t *testing.T, text string, g tcGeometry, m, n, k, shortB int, longC, eager bool, rng *rand.Rand) *tcEmu {
	t.Helper()
	e, err := tcRunCheck(text, g, m, n, k, shortB, longC, eager, rng)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// tcRunCheck is tcRunText returning what differs as an error.
func tcRunCheck(text string, g tcGeometry, m, n, k, shortB int, longC, eager bool, rng *rand.Rand) (*tcEmu, error) {
	cfg := TCConfig{Operand: g.operand, TileM: g.tileM, TileN: g.tileN}
	e, err := newTCEmu(text)
	if err != nil {
		return nil, err
	}
	e.eager = eager
	es := int(cfg.elemBytes())
	a := make([]float64, m*k)
	b := make([]float64, k*n)
	enc := func(vals []float64) []byte {
		out := make([]byte, len(vals)*es+es) // one element more than the count: never read
		for i, v := range vals {
			switch cfg.Operand {
			case ir.BF16:
				binary.LittleEndian.PutUint16(out[2*i:], uint16(half.NewBFloat16(float32(v))))
			case ir.F16:
				binary.LittleEndian.PutUint16(out[2*i:], uint16(half.NewFloat16(float32(v))))
			default:
				binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(v)))
			}
		}
		return out
	}
	for i := range a {
		a[i] = float64(rng.IntN(7) - 3)
	}
	for i := range b {
		b[i] = float64(rng.IntN(7) - 3)
	}
	lenB := k*n - shortB
	guard := 8
	if longC {
		guard = 256*n + 8 // past any tile's rows
	}
	cbuf := make([]byte, 4*(m*n+guard))
	for i := range m*n + guard {
		binary.LittleEndian.PutUint32(cbuf[4*i:], 0x7fc00123)
	}
	e.bufs = [][]byte{enc(a), enc(b), cbuf}
	for i := range e.bufs {
		e.bases = append(e.bases, uint64(i+1)<<36)
	}
	lenC := m * n
	if longC {
		lenC += guard
	}
	e.params = map[string]uint64{
		"kiln_buf0": e.bases[0], "kiln_buf1": e.bases[1], "kiln_buf2": e.bases[2],
		"kiln_len0": uint64(m * k), "kiln_len1": uint64(lenB), "kiln_len2": uint64(lenC),
		"kiln_uni0": uint64(m), "kiln_uni1": uint64(n), "kiln_uni2": uint64(k),
	}
	if g.maps != nil {
		counts := []uint32{uint32(m * k), uint32(lenB), uint32(lenC)}
		uniforms := []uint32{uint32(m), uint32(n), uint32(k)}
		e.tmapAddr, e.tmaps = map[string]uint64{}, map[uint64]TensorMapEncoding{}
		ready := !g.noTMA
		for i, tm := range g.maps {
			enc, ok := tm.Encoding(e.bases[tm.Binding], counts[tm.Binding], uniforms)
			ready = ready && ok
			addr := uint64(0xE000_0000 + 128*i)
			e.tmapAddr[tmaParam(i)], e.tmaps[addr] = addr, enc
		}
		e.params[tmaFlagParam] = 0
		if ready {
			e.params[tmaFlagParam] = 1
		}
	}
	gx, gy := (uint32(n)+cfg.TileN-1)/cfg.TileN, (uint32(m)+cfg.TileM-1)/cfg.TileM
	if err := e.run(max(gx, 1), max(gy, 1), g.threads, g.shared); err != nil {
		return e, fmt.Errorf("%dx%dx%d: %w", m, n, k, err)
	}
	for r := range m {
		for col := range n {
			s := 0.0
			for kk := range k {
				if kk*n+col < lenB {
					s += a[r*k+kk] * b[kk*n+col]
				}
			}
			got := binary.LittleEndian.Uint32(cbuf[4*(r*n+col):])
			if got != math.Float32bits(float32(s)) {
				return e, fmt.Errorf("%dx%dx%d (eager %v): c[%d][%d] = %v (%#x), want %v", m, n, k, eager, r, col,
					math.Float32frombits(got), got, s)
			}
		}
	}
	for i := m * n; i < m*n+guard; i++ {
		if binary.LittleEndian.Uint32(cbuf[4*i:]) != 0x7fc00123 {
			return e, fmt.Errorf("%dx%dx%d: c[%d] past m·n was written (count %d)", m, n, k, i, lenC)
		}
	}
	return e, nil
}

// TestTensorCoreEmulated runs the kernels on the emulator (tcEmu) against the
// exact product: aligned sizes (every chunk through cp.async), ragged sizes
// (element-wise edges and unaligned rows), k = 0, and a b shorter than k·n (its
// missing tail reads as 0), with cp.async landing late and early.
func TestTensorCoreEmulated(t *testing.T) {
	cfgs := []TCConfig{
		tcCfg(ir.BF16, 64, 64, 32, 2, 2, 4),
		tcCfg(ir.F16, 64, 64, 32, 2, 2, 2),
		tcCfg(ir.BF16, 128, 128, 32, 2, 4, 3),
		tcCfg(ir.F32, 64, 64, 16, 2, 2, 4),
		tcCfg(ir.F32, 128, 128, 16, 2, 2, 3),
		tcWgmmaCfg(ir.BF16, 128, 128, 32, 3, false, false),
		tcWgmmaCfg(ir.F16, 64, 64, 16, 4, true, false),
		tcWgmmaCfg(ir.BF16, 128, 64, 64, 4, true, true),
		tcWgmmaCfg(ir.F32, 64, 64, 32, 3, false, true),
		tcWgmmaCfg(ir.F32, 128, 128, 32, 4, true, true),
		tcGrouped(tcCfg(ir.F16, 32, 64, 32, 1, 2, 3), 2),
		tcGrouped(tcWgmmaCfg(ir.BF16, 64, 64, 32, 4, true, false), 2),
		tcGrouped(tcWgmmaCfg(ir.F16, 128, 256, 64, 4, true, true), 8), // the tuned tile: two warpgroups, n256
	}
	sizes := []struct {
		m, n, k, shortB int
		longC           bool
	}{
		{80, 136, 96, 0, false},
		{70, 45, 37, 0, false},
		{17, 8, 0, 0, false},
		{33, 72, 40, 5, false},
		{48, 128, 32, 0, true},
		{136, 64, 40, 0, false}, // aligned, k ends inside a step: the rows above the last fit the counts
	}
	if testing.Short() || raceEnabled {
		// one configuration of each path and kind of b copy, a ragged size
		// (element-wise edges) and an aligned one with a short b
		cfgs, sizes = []TCConfig{cfgs[0], cfgs[3], cfgs[6], cfgs[9], cfgs[10]}, append(sizes[1:2:2], sizes[3], sizes[4], sizes[5])
	}
	rng := rand.New(rand.NewPCG(27, 1))
	for _, c := range cfgs {
		t.Run(tcFileName(c), func(t *testing.T) {
			for _, s := range sizes {
				for _, eager := range []bool{false, true} {
					tcRun(t, c, s.m, s.n, s.k, s.shortB, s.longC, eager, rng)
				}
			}
		})
	}
}

// TestTensorCoreModule pins the module tensorCoreModule builds: Emit's
// interface, the path per target, dynamic shared memory only when allowed.
func TestTensorCoreModule(t *testing.T) {
	p := tcProgram(ir.BF16, 64, 128, 64, 128, false)
	m, ok, why := tensorCoreModule(p, Options{Target: Target{SM: 90}, MaxDynamicSharedBytes: tcMaxDynamicShared})
	if !ok {
		t.Fatal(why)
	}
	want := []Param{
		{BufferPointer, 0, "kiln_buf0"}, {BufferPointer, 1, "kiln_buf1"}, {BufferPointer, 2, "kiln_buf2"},
		{ElementCount, 0, "kiln_len0"}, {ElementCount, 1, "kiln_len1"}, {ElementCount, 2, "kiln_len2"},
		{UniformValue, 0, "kiln_uni0"}, {UniformValue, 1, "kiln_uni1"}, {UniformValue, 2, "kiln_uni2"},
		{TensorMapParam, 0, "kiln_tmap0"}, {TensorMapParam, 1, "kiln_tmap1"}, {TensorMapsReady, 0, "kiln_tma"},
	}
	if fmt.Sprint(m.Params) != fmt.Sprint(want) || m.Entry != EntryPoint || m.WorkgroupSize != [3]uint32{128, 1, 1} {
		t.Fatalf("interface %+v %s %v", m.Params, m.Entry, m.WorkgroupSize)
	}
	// a: m rows of k in 64×64 boxes (128-byte rows); b: k rows of n in 64-row panels of 64 columns
	wantMaps := []TensorMap{
		{Param: 9, Binding: 0, Elem: ir.BF16, RowLength: 2, Rows: 0, BoxCols: 64, BoxRows: 64, SwizzleBytes: 128},
		{Param: 10, Binding: 1, Elem: ir.BF16, RowLength: 1, Rows: 2, BoxCols: 64, BoxRows: 64, SwizzleBytes: 128},
	}
	if fmt.Sprint(m.TensorMaps) != fmt.Sprint(wantMaps) {
		t.Fatalf("tensor maps %+v, want %+v", m.TensorMaps, wantMaps)
	}
	if !strings.Contains(m.Text, ".param .align 64 .b8 kiln_tmap0[128],\n\t.param .align 64 .b8 kiln_tmap1[128],\n\t.param .u32 kiln_tma\n)") {
		t.Fatal("no tensor-map parameters in the kernel's interface")
	}
	if m.DynamicSharedBytes != 4*(64*128+64*256)+4*8 || m.SharedBytes != 0 || !strings.Contains(m.Text, "path: wgmma bf16") {
		t.Fatalf("sm_90 with dynamic shared memory: %d dynamic, %d static, %.80s", m.DynamicSharedBytes, m.SharedBytes, m.Text)
	}
	// static only: two stages fill 48 KiB, leaving no room for the mbarriers
	m, ok, _ = tensorCoreModule(p, Options{Target: Target{SM: 90}})
	if !ok || m.DynamicSharedBytes != 0 || m.SharedBytes != 2*(64*128+64*256) || m.TensorMaps != nil || len(m.Params) != 9 {
		t.Fatalf("sm_90 static: ok %v, %d dynamic, %d static", ok, m.DynamicSharedBytes, m.SharedBytes)
	}
	m, ok, _ = tensorCoreModule(p, Options{Target: Target{SM: 80}, WorkgroupSize: [3]uint32{256, 1, 1}})
	if !ok || !strings.Contains(m.Text, "path: mma.sync bf16") || m.WorkgroupSize != [3]uint32{256, 1, 1} ||
		!strings.Contains(m.Text, ".reqntid 256, 1, 1") {
		t.Fatalf("sm_80 with a workgroup override: ok %v, %v", ok, m.WorkgroupSize)
	}
	if _, ok, why := tensorCoreModule(p, Options{Target: Target{SM: 70}}); ok || !strings.Contains(why, "sm_80") {
		t.Fatalf("sm_70: ok %v, %q", ok, why)
	}
}

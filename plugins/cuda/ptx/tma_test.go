package ptx

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// tmaConfigs are TMA kernels over every swizzle of A (32-, 64- and 128-byte
// rows), one and two warpgroups, with and without a wgmma group in flight,
// one to four B panels.
func tmaConfigs() []TCConfig {
	return []TCConfig{
		tcTMA(tcWgmmaCfg(ir.BF16, 64, 64, 16, 3, false, false)),
		tcTMA(tcWgmmaCfg(ir.F16, 64, 128, 32, 4, true, true)),
		tcTMA(tcGrouped(tcWgmmaCfg(ir.BF16, 128, 64, 64, 4, true, true), 2)),
		tcTMA(tcGrouped(tcWgmmaCfg(ir.BF16, 128, 256, 64, 4, true, true), 8)), // the tuned tile
		tcRelease(tcWgmmaCfg(ir.F16, 64, 128, 32, 4, true, true)),
		tcRelease(tcGrouped(tcWgmmaCfg(ir.BF16, 128, 256, 64, 4, true, true), 8)),
	}
}

// tcRelease is c staged by TMA, releasing its stages on mbarriers.
func tcRelease(c TCConfig) TCConfig {
	c.TMA, c.Release = true, true
	return c
}

// TestTMAEmulated runs the TMA kernels on the emulator against the exact
// product, with the bulk copies landing late (at the wait) and early (at
// issue): sizes the tensor maps take (aligned; ragged m and k whose last
// boxes the copy engine zero-fills; a tile of n past a panel's edge) run the
// TMA loop, and those they do not (k = 0, n of an odd row length, a short b)
// the cp.async loop of the same kernel; every size also runs with kiln_tma 0.
func TestTMAEmulated(t *testing.T) {
	sizes := []struct {
		m, n, k, shortB int
		tma             bool
	}{
		{128, 128, 128, 0, true},
		{70, 72, 40, 0, true}, // ragged: zero fill past m, k and n
		{136, 64, 24, 0, true},
		{17, 8, 0, 0, false},   // k = 0: no map (an empty dimension)
		{70, 45, 37, 0, false}, // rows of n = 45 bf16 are not 16-byte multiples
		{33, 72, 40, 5, false}, // b shorter than k·n: its tail reads 0
	}
	cfgs := tmaConfigs()
	if testing.Short() || raceEnabled {
		cfgs, sizes = []TCConfig{cfgs[1], cfgs[2], cfgs[4]}, sizes[1:5]
	}
	rng := rand.New(rand.NewPCG(27, 3))
	for _, c := range cfgs {
		text, ok, why := emitTensorCoreMatmul(c)
		if !ok {
			t.Fatal(why)
		}
		g := tcGeometry{operand: c.Operand, tileM: c.TileM, tileN: c.TileN, threads: c.Threads(), shared: c.SharedBytes(),
			maps: c.tensorMaps(9)}
		t.Run(tcFileName(c), func(t *testing.T) {
			for _, s := range sizes {
				for _, eager := range []bool{false, true} {
					for _, off := range []bool{false, true} {
						g.noTMA = off
						e := tcRunText(t, text, g, s.m, s.n, s.k, s.shortB, false, eager, rng)
						if used := e.bulkCopies > 0; used != (s.tma && !off) {
							t.Fatalf("%dx%dx%d (kiln_tma off %v): %d bulk copies", s.m, s.n, s.k, off, e.bulkCopies)
						}
					}
				}
			}
		})
	}
}

// TestTMAMutations checks that the emulation catches what would break the TMA
// path on the GPU: a wait on the wrong mbarrier parity, an arrive without
// expect_tx, a tensor map in another swizzle than the descriptors read, a
// copy box of the wrong height, and a refill of the stage one step too early.
func TestTMAMutations(t *testing.T) {
	c := tmaConfigs()[1]
	text, ok, why := emitTensorCoreMatmul(c)
	if !ok {
		t.Fatal(why)
	}
	g := tcGeometry{operand: c.Operand, tileM: c.TileM, tileN: c.TileN, threads: c.Threads(), shared: c.SharedBytes(),
		maps: c.tensorMaps(9)}
	rng := rand.New(rand.NewPCG(27, 4))
	run := func(text string, g tcGeometry) error {
		for _, eager := range []bool{false, true} {
			if _, err := tcRunCheck(text, g, 70, 136, 200, 0, false, eager, rng); err != nil {
				return err
			}
		}
		return nil
	}
	if err := run(text, g); err != nil {
		t.Fatalf("the kernel itself: %v", err)
	}
	phase := regexp.MustCompile(`mbarrier\.try_wait\.parity\.shared::cta\.b64 %p\d+, \[%r\d+\], (%r\d+);`).FindStringSubmatch(text)
	if phase == nil {
		t.Fatal("no try_wait.parity")
	}
	textMut := map[string]string{
		"wrong parity": strings.Replace(text, "mov.u32 "+phase[1]+", 0;", "mov.u32 "+phase[1]+", 1;", 1),
		"no expect_tx": regexp.MustCompile(`mbarrier\.arrive\.expect_tx\.shared::cta\.b64 (%rd\d+), (\[%r\d+\]), \d+;`).
			ReplaceAllString(text, "mbarrier.arrive.shared::cta.b64 $1, $2;"),
		"expect_tx short": regexp.MustCompile(`(mbarrier\.arrive\.expect_tx\.shared::cta\.b64 %rd\d+, \[%r\d+\]), (\d+);`).
			ReplaceAllString(text, "$1, 4096;"),
		// two wgmma groups in flight: step kt refills the stage step kt-2's
		// group may still read (the TMA loop's wait comes first)
		"refill too early": strings.Replace(text, "wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 2;", 1),
	}
	for name, mut := range textMut {
		if mut == text {
			t.Fatalf("%s: the mutation changed nothing", name)
		}
		if err := run(mut, g); err == nil {
			t.Errorf("%s: the emulation passed", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	mapMut := map[string]func(*TensorMap){
		// a's 64-byte rows in the 128-byte swizzle: a valid map that lands
		// the chunks where the descriptors do not read them
		"wrong swizzle": func(m *TensorMap) {
			if m.Binding == c.A {
				m.SwizzleBytes = 128
			}
		},
		"wrong box": func(m *TensorMap) {
			if m.Binding == c.A {
				m.BoxRows /= 2
			}
		},
	}
	for name, mod := range mapMut {
		mg := g
		mg.maps = append([]TensorMap(nil), g.maps...)
		for i := range mg.maps {
			mod(&mg.maps[i])
		}
		if err := run(text, mg); err == nil {
			t.Errorf("%s: the emulation passed", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestTMAReleaseMutations checks that the emulation catches a Release
// kernel whose copying invocation refills a stage without waiting for its
// release, or whose warps release a stage before their wgmma group reading
// it retired.
func TestTMAReleaseMutations(t *testing.T) {
	c := tcRelease(tcWgmmaCfg(ir.F16, 64, 128, 32, 4, true, true))
	text, ok, why := emitTensorCoreMatmul(c)
	if !ok {
		t.Fatal(why)
	}
	g := tcGeometry{operand: c.Operand, tileM: c.TileM, tileN: c.TileN, threads: c.Threads(), shared: c.SharedBytes(),
		maps: c.tensorMaps(9)}
	rng := rand.New(rand.NewPCG(27, 5))
	run := func(text string) error {
		for _, eager := range []bool{false, true} {
			if _, err := tcRunCheck(text, g, 70, 136, 200, 0, false, eager, rng); err != nil {
				return err
			}
		}
		return nil
	}
	if err := run(text); err != nil {
		t.Fatalf("the kernel itself: %v", err)
	}
	// the empty wait is the try_wait on an address with an offset
	emptyWait := regexp.MustCompile(`(?m)^(TC_L\d+):\n\tmbarrier\.try_wait\.parity\.shared::cta\.b64 %p\d+, \[%r\d+\+\d+\], %r\d+;\n\t@!%p\d+ bra TC_L\d+;\n`)
	if !emptyWait.MatchString(text) || !strings.Contains(text, "\twgmma.wait_group.sync.aligned 1;\n") {
		t.Fatal("the Release kernel's empty wait or wgmma wait not found")
	}
	for name, mut := range map[string]string{
		"no empty wait": emptyWait.ReplaceAllString(text, "$1:\n"),
		// the TMA loop's wgmma wait gone: warps release stages their wgmma
		// groups still read
		"release before retiring": strings.Replace(text, "\twgmma.wait_group.sync.aligned 1;\n", "", 1),
	} {
		if mut == text {
			t.Fatalf("%s: the mutation changed nothing", name)
		}
		if err := run(mut); err == nil {
			t.Errorf("%s: the emulation passed", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestTensorMapEncoding pins the recipe of a launch's tensor map: the
// dimensions and stride from the uniforms, and no map where the copy engine
// cannot take the launch or its zero fill would differ from the IR's bounds.
func TestTensorMapEncoding(t *testing.T) {
	a := TensorMap{Param: 9, Binding: 0, Elem: ir.BF16, RowLength: 2, Rows: 0, BoxCols: 64, BoxRows: 128, SwizzleBytes: 128}
	uni := []uint32{300, 72, 40} // m, n, k
	enc, ok := a.Encoding(1<<20, 300*40, uni)
	want := TensorMapEncoding{Elem: ir.BF16, Base: 1 << 20, Dims: [2]uint64{40, 300}, RowStride: 80, Box: [2]uint32{64, 128}, SwizzleBytes: 128}
	if !ok || enc != want {
		t.Fatalf("got %+v (ok %v), want %+v", enc, ok, want)
	}
	if _, ok := a.Encoding(1<<20, 300*40+7, uni); !ok {
		t.Error("a buffer longer than the matrix: no map")
	}
	for name, c := range map[string]struct {
		base  uint64
		count uint32
		uni   []uint32
	}{
		"unaligned base":         {1<<20 + 8, 300 * 40, uni},
		"rows of 74 bytes":       {1 << 20, 300 * 37, []uint32{300, 72, 37}},
		"buffer shorter":         {1 << 20, 300*40 - 1, uni},
		"no rows":                {1 << 20, 300 * 40, []uint32{0, 72, 40}},
		"empty rows":             {1 << 20, 300 * 40, []uint32{300, 72, 0}},
		"rows past 2^30":         {1 << 20, 1 << 31, []uint32{1<<30 + 1, 72, 8}},
		"uniform index past all": {1 << 20, 300 * 40, uni[:2]},
	} {
		if enc, ok := a.Encoding(c.base, c.count, c.uni); ok {
			t.Errorf("%s: got a map %+v", name, enc)
		}
	}
}

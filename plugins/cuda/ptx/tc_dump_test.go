package ptx

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// tcBenchConfigs are the kernels scripts/gpu-tc-run.sh measures.
func tcBenchConfigs() []TCConfig {
	base := TCConfig{Target: Target{SM: 80}, Buffers: 3, Uniforms: 3, A: 0, B: 1, C: 2, M: 0, N: 1, K: 2}
	var out []TCConfig
	add := func(t ir.Type, tm, tn, tk, wm, wn, st uint32) {
		c := base
		c.Operand, c.TileM, c.TileN, c.TileK, c.WarpsM, c.WarpsN, c.Stages = t, tm, tn, tk, wm, wn, st
		out = append(out, c)
	}
	// wgmma: tile m, n, k, stages, overlap, dynamic shared memory, group rows
	wg := func(t ir.Type, s [7]uint32) {
		c := base
		c.Operand, c.TileM, c.TileN, c.TileK, c.Stages = t, s[0], s[1], s[2], s[3]
		c.WarpsM, c.WarpsN, c.Wgmma, c.Target = 4*s[0]/64, 1, true, Target{SM: 90}
		c.Overlap, c.DynamicShared, c.GroupRows = s[4] == 1, s[5] == 1, s[6]
		out = append(out, c)
	}
	// the untuned default tile (64x128x32), the tiles the tuner may pick
	// (four warpgroups on 256x128, two on 128x256), k steps of 64 and of 32
	// with more stages, with and without the grouped tile order
	for _, t := range []ir.Type{ir.BF16, ir.F16} {
		add(t, 128, 64, 32, 2, 2, 4)
		for _, s := range [][7]uint32{{64, 128, 32, 4, 1, 0, 0}, {256, 128, 64, 4, 1, 1, 0}, {256, 128, 64, 4, 1, 1, 8},
			{128, 256, 64, 4, 1, 1, 0}, {128, 256, 64, 4, 1, 1, 8}, {128, 256, 32, 8, 1, 1, 8}, {256, 128, 32, 8, 1, 1, 8}} {
			wg(t, s)
		}
	}
	add(ir.F32, 128, 64, 16, 2, 2, 4)
	for _, s := range [][7]uint32{{64, 128, 32, 4, 1, 1, 0}, {256, 128, 32, 4, 1, 1, 0}, {256, 128, 32, 4, 1, 1, 8},
		{128, 256, 32, 4, 1, 1, 8}, {256, 128, 16, 8, 1, 1, 8}} {
		wg(ir.F32, s)
	}
	return out
}

func tcFileName(c TCConfig) string {
	path := ""
	if c.Wgmma {
		path = "wg"
	}
	var flags string
	if c.Overlap {
		flags += "_ov"
	}
	if c.DynamicShared {
		flags += "_dyn"
	}
	if c.GroupRows > 1 {
		flags += fmt.Sprintf("_g%d", c.GroupRows)
	}
	if c.TMA {
		flags += "_tma"
	}
	if c.Release {
		flags += "_rel"
	}
	return fmt.Sprintf("tc_%s%s_%dx%dx%d_w%dx%d_s%d%s.ptx", path, tcOperandName(c.Operand), c.TileM, c.TileN, c.TileK, c.WarpsM, c.WarpsN, c.Stages, flags)
}

// TestTensorCorePTXDump writes the benchmark kernels into $KILN_TC_PTX_DIR
// for scripts/gpu-tc-run.sh (skipped without it), and the modules the CUDA
// backend builds for the corpus matmul_tc on an H200 (sm_90, 227 KiB of
// dynamic shared memory) at the tuned and default tiles, named *_corpus: the
// bf16 and f16 ones are TMA modules (*_tma_corpus), written beside their
// cp.async twins (the same configuration without TMA).
func TestTensorCorePTXDump(t *testing.T) {
	dir := os.Getenv("KILN_TC_PTX_DIR")
	if dir == "" {
		t.Skip("KILN_TC_PTX_DIR not set")
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range tcBenchConfigs() {
		text, ok, why := emitTensorCoreMatmul(c)
		if !ok {
			t.Fatalf("%s: %s", tcFileName(c), why)
		}
		write(tcFileName(c), text)
	}
	// the script launches a, b, c, their counts, then m, n, k
	want := []Param{
		{BufferPointer, 0, "kiln_buf0"}, {BufferPointer, 1, "kiln_buf1"}, {BufferPointer, 2, "kiln_buf2"},
		{ElementCount, 0, "kiln_len0"}, {ElementCount, 1, "kiln_len1"}, {ElementCount, 2, "kiln_len2"},
		{UniformValue, 0, "kiln_uni0"}, {UniformValue, 1, "kiln_uni1"}, {UniformValue, 2, "kiln_uni2"},
	}
	opts := Options{Target: Target{SM: 90}, MaxDynamicSharedBytes: tcMaxDynamicShared}
	for _, s := range []struct {
		op         ir.Type
		tm, tn, tk uint32
	}{{ir.BF16, 128, 256, 64}, {ir.F16, 128, 256, 64}, {ir.F32, 256, 128, 32}, {ir.BF16, 64, 128, 32}} {
		p := gputest.CorpusTC(t, s.op, s.tm, s.tn, s.tk)
		cfg, ok, why := matchTensorCoreMatmul(p, opts.Target, opts.MaxDynamicSharedBytes)
		m, mok, mwhy := tensorCoreModule(p, opts)
		if !ok || !mok {
			t.Fatalf("%v %dx%dx%d: %s %s", s.op, s.tm, s.tn, s.tk, why, mwhy)
		}
		wantParams := want
		if cfg.TMA {
			wantParams = append(append([]Param(nil), want...), cfg.tmaParams()...)
			plain := cfg
			plain.TMA = false
			twin, ok := tcStages(plain, []uint32{cfg.Stages}, opts.MaxDynamicSharedBytes)
			text, eok, why := emitTensorCoreMatmul(twin)
			if !ok || twin.TMA || !eok {
				t.Fatalf("%s without TMA: %s", tcFileName(cfg), why)
			}
			write(strings.TrimSuffix(tcFileName(twin), ".ptx")+"_corpus.ptx", text)
			if cfg.Overlap && !cfg.Release {
				rel := cfg
				rel.Release = true
				text, ok, why := emitTensorCoreMatmul(rel)
				if !ok {
					t.Fatalf("%s with Release: %s", tcFileName(cfg), why)
				}
				write(strings.TrimSuffix(tcFileName(rel), ".ptx")+"_corpus.ptx", text)
			}
		}
		if fmt.Sprint(m.Params) != fmt.Sprint(wantParams) {
			t.Fatalf("corpus module parameters %v", m.Params)
		}
		write(strings.TrimSuffix(tcFileName(cfg), ".ptx")+"_corpus.ptx", m.Text)
	}
}

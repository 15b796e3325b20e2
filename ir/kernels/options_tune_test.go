package kernels_test

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// matmul_tc's tile (tm, tn, tk) is what a tuner searches; type and tf32 key
// its records, defaults filled in.
func TestMatmulTCTunedAndFixedOptions(t *testing.T) {
	k, _ := kernels.Lookup("matmul_tc")
	if got := strings.Join(k.TunedOptions().Names(), " "); got != "tk tm tn" {
		t.Fatalf("tuned options %q", got)
	}
	fixed := k.FixedOptions(options("tm", ir.SpecU32(256)))
	typ, _ := fixed.Get("type")
	if dt, _ := typ.DType(); fixed.Len() != 2 || dt != ir.BF16 {
		t.Fatalf("fixed options %v", fixed.Names())
	}
	fixed = k.FixedOptions(options("type", ir.SpecDType(ir.F16)))
	if typ, _ = fixed.Get("type"); typ != ir.SpecDType(ir.F16) {
		t.Fatalf("fixed type %v", typ)
	}
	if v, _ := kernels.Lookup("vector_add"); v.TunedOptions().Len() != 0 {
		t.Fatal("vector_add has no options to search")
	}
}

// OptionSpace lists every tile that builds, the defaults first, narrowed by
// the options set, and says why the others do not build.
func TestMatmulTCOptionSpace(t *testing.T) {
	k, _ := kernels.Lookup("matmul_tc")
	space, skipped := k.OptionSpace(ir.SpecMap{})
	// 4 tm × 4 tn × 3 tk at bf16; 256×256 (256 KiB of f32 accumulator) is over
	// ir.MaxMatrixBytes at every tk.
	if len(space)+len(skipped) != 48 || len(skipped) != 3 {
		t.Fatalf("%d built, %d skipped: %v", len(space), len(skipped), skipped)
	}
	if got := space[0].Options; formatOpts(got) != formatOpts(k.TunedOptions()) {
		t.Fatalf("first %s, want the defaults", formatOpts(got))
	}
	for _, err := range skipped {
		if !strings.Contains(err.Error(), "tm=256 tn=256") || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("skipped: %v", err)
		}
	}
	for _, c := range space {
		tm, _ := c.Options.Get("tm")
		if c.Kernel.Program().WorkgroupSize[0] != 2*tm.Bits() {
			t.Errorf("%s builds a workgroup of %v", formatOpts(c.Options), c.Kernel.Program().WorkgroupSize)
		}
	}
	space, skipped = k.OptionSpace(options("type", ir.SpecDType(ir.F32), "tm", ir.SpecU32(128), "tk", ir.SpecU32(64)))
	// f32 operands: 128×tn×4 + (128+tn)·64·4 bytes; tn=256 is over.
	if len(space) != 3 || len(skipped) != 1 {
		t.Fatalf("f32 tm=128 tk=64: %d built, %d skipped", len(space), len(skipped))
	}
	if p := space[0].Kernel.Program(); p.Name != "kiln.matrix.matmul_tc.f32" {
		t.Fatalf("built %s", p.Name)
	}
}

// ParseTunedOptions reads a record's tile back and refuses what does not fit.
func TestMatmulTCParseTunedOptions(t *testing.T) {
	k, _ := kernels.Lookup("matmul_tc")
	got, err := k.ParseTunedOptions(ir.SpecMap{}, "tk=64 tm=256 tn=128")
	if err != nil || formatOpts(got) != "tk=64 tm=256 tn=128" {
		t.Fatalf("got %s, %v", formatOpts(got), err)
	}
	for _, bad := range []string{"", "tm", "tm=64 tm=64", "type=f16", "bm=4", "tm=x", "tm=40", "tk=64 tm=256 tn=256", " tm=64", "tm=64 "} {
		if _, err := k.ParseTunedOptions(ir.SpecMap{}, bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	// 256×128×64 fits bf16 (176 KiB) but not f32 operands (224 KiB).
	if _, err := k.ParseTunedOptions(options("type", ir.SpecDType(ir.F32)), "tk=64 tm=256 tn=128"); err == nil {
		t.Error("an f32 tile over the matrix bytes parsed")
	}
}

// FuzzParseTunedOptions: a record's params never panic the parser, and what
// parses builds.
func FuzzParseTunedOptions(f *testing.F) {
	for _, s := range []string{"tk=64 tm=256 tn=128", "tm=32", "tm=4294967295", "tm=-1", "tn==", "tk=16 tk=16", "\x00=1"} {
		f.Add(s)
	}
	k, _ := kernels.Lookup("matmul_tc")
	f.Fuzz(func(t *testing.T, s string) {
		opts, err := k.ParseTunedOptions(ir.SpecMap{}, s)
		if err != nil {
			return
		}
		if _, _, err := k.Configure(opts); err != nil {
			t.Fatalf("%q parsed to options that do not build: %v", s, err)
		}
	})
}

func formatOpts(m ir.SpecMap) string {
	var parts []string
	for _, n := range m.Names() {
		v, _ := m.Get(n)
		parts = append(parts, n+"="+kernels.OptionString(v))
	}
	return strings.Join(parts, " ")
}

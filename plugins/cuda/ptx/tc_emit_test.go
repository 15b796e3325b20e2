package ptx

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// isTensorCoreModule reports whether m is the tensor-core matmul (tc.go), whose
// instructions tcEmu runs rather than the interpreter of interp_test.go.
func isTensorCoreModule(m *Module) bool {
	return strings.HasPrefix(m.Text, "// kiln tensor-core matmul")
}

// backendOptions are the options the CUDA backend emits with on a device of
// target t that allows 227 KiB of dynamic shared memory (an H200's opt-in limit).
func backendOptions(t Target, wg uint32) Options {
	return Options{Target: t, NonCoherentReads: true, MaxDynamicSharedBytes: 227 << 10, WorkgroupSize: [3]uint32{wg, 1, 1}}
}

// TestEmitTensorCorePaths pins the path Emit takes for the matmul_tc program
// per target and workgroup, and that the module's first line names it (what
// `kiln compile --emit ptx` shows): wgmma (.target sm_90a, PTX ISA 8.0) on sm_90
// with a warpgroup per 64 rows, mma.sync (.target sm_80) on sm_80 and on sm_90
// otherwise, the scalar path with the reason on sm_70 and for a workgroup that
// is not whole warps (its module declares sm_80 on an sm_90 target).
func TestEmitTensorCorePaths(t *testing.T) {
	for _, c := range []struct {
		name       string
		op         ir.Type
		tm, tn, tk uint32
		wg         uint32
		target     Target
		first      string
		arch       string
		moduleSM   int
		dynamic    uint32
	}{
		// TMA: the ring and a mbarrier per stage, over 48 KiB: dynamic
		{"bf16 sm_90 64x128x32", ir.BF16, 64, 128, 32, 128, Target{SM: 90}, "path: wgmma bf16, tile 64x128x32, warps 4x1, 4 TMA stages", ".target sm_90a", 90, 4*(64*32+32*128)*2 + 4*8},
		{"bf16 sm_90 256x128x64", ir.BF16, 256, 128, 64, 512, Target{SM: 90}, "path: wgmma bf16, tile 256x128x64, warps 16x1, 4 TMA stages", ".target sm_90a", 90, 4*(256*64+64*128)*2 + 4*8},
		{"tf32 sm_90 keeps cp.async", ir.F32, 64, 64, 16, 128, Target{SM: 90}, "path: wgmma tf32, tile 64x64x16, warps 4x1, 4 cp.async stages", ".target sm_90a", 90, 0},
		{"f16 sm_90, two warps per 64 rows", ir.F16, 64, 64, 32, 256, Target{SM: 90}, "path: mma.sync f16", ".target sm_80", 80, 0},
		{"tf32 sm_90", ir.F32, 64, 64, 16, 128, Target{SM: 90}, "path: wgmma tf32", ".target sm_90a", 90, 0},
		{"bf16 sm_80", ir.BF16, 64, 128, 32, 128, Target{SM: 80}, "path: mma.sync bf16, tile 64x128x32, warps 2x2, 3 cp.async stages", ".target sm_80", 80, 0},
	} {
		m, err := Emit(gputest.CorpusTC(t, c.op, c.tm, c.tn, c.tk), backendOptions(c.target, c.wg))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		first, _, _ := strings.Cut(m.Text, "\n")
		if !strings.Contains(first, c.first) || !strings.Contains(m.Text, c.arch+"\n") || m.Target.SM != c.moduleSM ||
			m.DynamicSharedBytes != c.dynamic || m.WorkgroupSize != [3]uint32{c.wg, 1, 1} {
			t.Errorf("%s: first line %q, target %v, %d bytes dynamic shared, workgroup %v; want %q, %s, %d bytes",
				c.name, first, m.Target, m.DynamicSharedBytes, m.WorkgroupSize, c.first, c.arch, c.dynamic)
		}
	}
	// the scalar path, its first line saying why not the tensor cores
	for _, c := range []struct {
		target Target
		wg     uint32
		why    string
	}{
		{Target{SM: 70}, 128, "target sm_70 has no tensor cores kiln uses (sm_80 and later)"},
		{Target{SM: 90}, 48, "workgroup 48x1x1 is not a row of whole warps"},
	} {
		m, err := Emit(gputest.CorpusTC(t, ir.BF16, 64, 128, 32), backendOptions(c.target, c.wg))
		if err != nil {
			t.Fatalf("%s, %d invocations: %v", c.target, c.wg, err)
		}
		want := "// kiln matrix path: scalar (tensor cores not used: " + c.why + ")"
		if first, _, _ := strings.Cut(m.Text, "\n"); first != want || m.Target.SM > 80 || m.DynamicSharedBytes != 0 {
			t.Errorf("%s, %d invocations: %q, target %s; want %q", c.target, c.wg, first, m.Target, want)
		}
		if _, err := parseModule(m.Text); err != nil {
			t.Errorf("%s, %d invocations: the scalar module does not parse: %v", c.target, c.wg, err)
		}
	}
	// without dynamic shared memory the 256x128x64 ring shrinks to what a kernel
	// declares statically, or the program takes the scalar path
	opts := backendOptions(Target{SM: 90}, 512)
	opts.MaxDynamicSharedBytes = 0
	if m, err := Emit(gputest.CorpusTC(t, ir.BF16, 256, 128, 64), opts); err == nil && m.DynamicSharedBytes != 0 {
		t.Errorf("without dynamic shared memory: %d bytes dynamic", m.DynamicSharedBytes)
	}
}

// TestCorpusMatmulTCDefault pins matmul_tc's default build (ir/kernels): the
// 64×128×32 bf16 tile and 128 invocations, which take wgmma on an H200 as the
// backend compiles it (no workgroup override), mma.sync on sm_80.
func TestCorpusMatmulTCDefault(t *testing.T) {
	k, _ := kernels.Lookup("matmul_tc")
	for target, want := range map[Target]string{
		{SM: 90}: "// kiln tensor-core matmul (path: wgmma bf16, tile 64x128x32, warps 4x1, 4 TMA stages)",
		{SM: 80}: "// kiln tensor-core matmul (path: mma.sync bf16, tile 64x128x32, warps 2x2, 3 cp.async stages)",
	} {
		m := mustEmit(t, "matmul_tc", k.Program(), Options{Target: target, NonCoherentReads: true, MaxDynamicSharedBytes: 227 << 10})
		if first, _, _ := strings.Cut(m.Text, "\n"); first != want || m.WorkgroupSize != [3]uint32{128, 1, 1} {
			t.Errorf("%s: %q, workgroup %v; want %q, 128", target, first, m.WorkgroupSize, want)
		}
	}
}

// TestTensorCoreCorpusEmulated runs the matmul_tc program as the backend emits
// it (Emit with the backend's options) on the emulator, against the exact
// product: a ragged size (element-wise edges) and an aligned one with a short b.
func TestTensorCoreCorpusEmulated(t *testing.T) {
	type run struct {
		op         ir.Type
		tm, tn, tk uint32
		wg         uint32
		target     Target
	}
	runs := []run{
		{ir.BF16, 64, 128, 32, 128, Target{SM: 90}},
		{ir.F16, 64, 64, 32, 128, Target{SM: 80}},
		{ir.F32, 64, 64, 16, 128, Target{SM: 90}},
		{ir.BF16, 256, 128, 64, 512, Target{SM: 90}},
	}
	sizes := []struct{ m, n, k, shortB int }{{70, 45, 37, 0}, {80, 136, 96, 5}}
	if testing.Short() || raceEnabled {
		runs, sizes = runs[:2], sizes[:1]
	}
	rng := rand.New(rand.NewPCG(27, 2))
	for _, r := range runs {
		m, err := Emit(gputest.CorpusTC(t, r.op, r.tm, r.tn, r.tk), backendOptions(r.target, r.wg))
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(m.Text, "\n")
		t.Run(strings.TrimPrefix(first, "// "), func(t *testing.T) {
			if !strings.Contains(first, "tensor-core") {
				t.Fatalf("not the tensor-core module: %s", first)
			}
			g := tcGeometry{operand: r.op, tileM: r.tm, tileN: r.tn, threads: r.wg, shared: m.SharedBytes + m.DynamicSharedBytes, maps: m.TensorMaps}
			for _, s := range sizes {
				tcRunText(t, m.Text, g, s.m, s.n, s.k, s.shortB, false, false, rng)
			}
		})
	}
}

// TestTensorCoreModulesAssemble runs ptxas on the matmul_tc modules that
// BenchmarkMatmulTC (package backend) measures, emitted as the backend emits
// them for an H200 (sm_90: wgmma, .target sm_90a) and for sm_80 (mma.sync,
// assembled for sm_80 and sm_90), and checks that the wgmma modules' machine
// code has HGMMA. With KILN_PTX_OUT the modules and cubins stay there, named
// matmul_tc.<type>.<tile>.wg<invocations>, for scripts/gpu-cuda-run.sh.
func TestTensorCoreModulesAssemble(t *testing.T) {
	ptxas := tool(t, "ptxas")
	cuobjdump := tool(t, "cuobjdump")
	for _, c := range []struct {
		op         ir.Type
		tm, tn, tk uint32
		wg         uint32
	}{
		{ir.BF16, 64, 64, 32, 128}, {ir.BF16, 64, 128, 32, 128}, {ir.BF16, 256, 128, 64, 512},
		{ir.F16, 64, 128, 32, 128}, {ir.F16, 256, 128, 64, 512},
		{ir.F32, 64, 128, 32, 128}, {ir.F32, 256, 128, 32, 512},
	} {
		op := c.op.String()
		if c.op == ir.F32 {
			op = "tf32"
		}
		name := fmt.Sprintf("matmul_tc.%s.%dx%dx%d.wg%d", op, c.tm, c.tn, c.tk, c.wg)
		for _, target := range []Target{{SM: 90}, {SM: 80}} {
			m := mustEmit(t, name, gputest.CorpusTC(t, c.op, c.tm, c.tn, c.tk), backendOptions(target, c.wg))
			archs := []string{"sm_80", ptxasArch}
			if strings.Contains(m.Text, ".target sm_90a\n") {
				archs = []string{"sm_90a"}
			}
			for _, arch := range archs {
				cubin := assemble(t, ptxas, name, m, arch)
				if arch != "sm_90a" {
					continue
				}
				sass, err := exec.Command(cuobjdump, "--dump-sass", cubin).CombinedOutput()
				if err != nil {
					t.Fatalf("%s: cuobjdump: %v\n%s", name, err, sass)
				}
				if n := strings.Count(string(sass), "HGMMA"); n == 0 {
					t.Errorf("%s for sm_90a: no HGMMA in the machine code", name)
				} else {
					t.Logf("%s sm_90a: %d HGMMA", name, n)
				}
			}
		}
	}
}

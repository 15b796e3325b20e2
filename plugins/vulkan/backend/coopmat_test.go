package backend

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
)

// tcCase is a matmul_tc launch of m×k times k×n with small integers in
// [-3, 3] (exact in f16 and bf16, every sum exact in f32), and a and b as
// float32 for the reference.
func tcCase(typ ir.Type, m, n, k int, tm, tn uint32, seed uint64) (kernels.Case, []float32, []float32) {
	rng := rand.New(rand.NewPCG(seed, 7))
	enc := func(count int) ([]byte, []float32) {
		out, vals := make([]byte, 2*count), make([]float32, count)
		for i := range vals {
			vals[i] = float32(rng.IntN(7) - 3)
			bits := uint16(half.NewBFloat16(vals[i]))
			if typ == ir.F16 {
				bits = uint16(half.NewFloat16(vals[i]))
			}
			binary.LittleEndian.PutUint16(out[2*i:], bits)
		}
		return out, vals
	}
	ab, av := enc(m * k)
	bb, bv := enc(k * n)
	return kernels.Case{
		Grid:         [3]uint32{uint32(n+int(tn)-1) / tn, uint32(m+int(tm)-1) / tm, 1},
		Inputs:       [][]byte{ab, bb, nil},
		OutputCounts: []uint32{0, 0, uint32(m * n)},
		Uniforms:     kernels.U32Bytes([]uint32{uint32(m), uint32(n), uint32(k)}),
	}, av, bv
}

// tcCheck compares c with a·b at every element (or at samples of them when
// samples > 0).
func tcCheck(t testing.TB, c []byte, a, b []float32, m, n, k, samples int) {
	t.Helper()
	want := func(i, j int) float32 {
		var s float32
		for x := range k {
			s += a[i*k+x] * b[x*n+j]
		}
		return s
	}
	got := func(i, j int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(c[4*(i*n+j):])) }
	bad := 0
	check := func(i, j int) {
		if g, w := got(i, j), want(i, j); g != w && bad < 5 {
			bad++
			t.Errorf("c[%d][%d] = %v, want %v", i, j, g, w)
		}
	}
	if samples == 0 {
		for i := range m {
			for j := range n {
				check(i, j)
			}
		}
		return
	}
	rng := rand.New(rand.NewPCG(uint64(m), 9))
	for range samples {
		check(rng.IntN(m), rng.IntN(n))
	}
	check(m-1, n-1)
}

// TestCoopMatmul runs matmul_tc (bf16 and f16) at sizes with ragged edges,
// misaligned strides and exact multiples, bit-exact against the reference:
// on a device with cooperative matrices through them (interior tiles moved
// directly, edge tiles through the scalar lowering), elsewhere on the
// scalar path. The profile claims tensor cores exactly when the device's
// cooperative matrices are used.
func TestCoopMatmul(t *testing.T) {
	b := newTestBackend(t)
	a := b.adapters.List()[0]
	p := a.info.Profile
	if p.SupportsTensorCores != (a.target.Coop.F16 || a.target.Coop.BF16) {
		t.Errorf("profile claims tensor cores %v, target %+v", p.SupportsTensorCores, a.target.Coop)
	}
	t.Logf("%s: cooperative matrices %s; target %+v", a.info.Name, a.coop.support, a.target.Coop)
	for _, typ := range []ir.Type{ir.BF16, ir.F16} {
		if (typ == ir.F16 && !p.SupportsF16) || (typ == ir.BF16 && !p.SupportsBF16) {
			continue
		}
		for _, sz := range [][3]int{{64, 64, 64}, {100, 72, 40}, {17, 33, 16}, {128, 128, 96}, {96, 160, 200}} {
			m, n, k := sz[0], sz[1], sz[2]
			t.Run(fmt.Sprintf("%s/%dx%dx%d", typ, m, n, k), func(t *testing.T) {
				c, av, bv := tcCase(typ, m, n, k, 64, 64, uint64(m*n*k))
				res, err := gputest.Run(t, b, gputest.TCProgram(typ, false, 64, 64, 32, 128), c)
				if err != nil {
					t.Fatal(err)
				}
				tcCheck(t, res.Outputs[0], av, bv, m, n, k, 0)
			})
		}
	}
}

// BenchmarkCoopMatmul times matmul_tc at 4096³ (bf16 and f16) over resident
// buffers, 8 dispatches per submit after a warm-up (so the GPU runs at its
// working clock), for tile shapes (tm×tn accumulator, K step tk) and
// workgroup sizes whose stages and band fit 48 KiB of workgroup memory
// (NVIDIA's maxComputeSharedMemorySize), and checks sampled elements of each
// result.
func BenchmarkCoopMatmul(b *testing.B) {
	type shape struct{ tm, tn, tk, inv uint32 }
	shapes := []shape{{64, 128, 32, 128}, {128, 64, 32, 128}, {128, 128, 32, 256}, {128, 128, 32, 128},
		{128, 256, 32, 256}, {256, 128, 32, 256}, {128, 128, 64, 256}, {64, 64, 32, 128}, {128, 256, 32, 512}, {256, 128, 32, 512},
		{128, 256, 16, 256}, {256, 128, 16, 256}}
	be := newTestBackend(b)
	if !be.adapters.List()[0].info.Profile.SupportsTensorCores {
		b.Skip("the device has no cooperative matrices kiln uses")
	}
	const s, reps = 4096, 8
	ctx := context.Background()
	for _, typ := range []ir.Type{ir.BF16, ir.F16} {
		c, av, bv := tcCase(typ, s, s, s, 64, 64, 1)
		binding := func(data []byte, bytes int) pluginapi.BufferRange {
			return pluginapi.BufferRange{Buffer: gputest.ResidentBuffer(b, be, 0, bytes/4, data), Size: uint64(bytes)}
		}
		bindings := []pluginapi.BufferRange{binding(c.Inputs[0], 2*s*s), binding(c.Inputs[1], 2*s*s), binding(nil, 4*s*s)}
		for _, sh := range shapes {
			b.Run(fmt.Sprintf("%s/%dx%dx%d/wg%d", typ, sh.tm, sh.tn, sh.tk, sh.inv), func(b *testing.B) {
				cr, err := be.Compile(ctx, &pluginapi.CompileRequest{Program: gputest.TCProgram(typ, false, sh.tm, sh.tn, sh.tk, sh.inv)})
				if err != nil {
					b.Skip(err)
				}
				defer be.Release(ctx, cr.Pipeline)
				cmd := pluginapi.DispatchCommand{Pipeline: cr.Pipeline, Grid: [3]uint32{s / sh.tn, s / sh.tm, 1}, Bindings: bindings, Uniforms: c.Uniforms}
				cmds := make([]pluginapi.SubmitCommand, reps)
				for i := range cmds {
					cmds[i] = cmd
				}
				st := gputest.Submits(b, be, &pluginapi.SubmitRequest{Commands: cmds}, time.Second)
				out := make([]byte, 4*s*s)
				if err := be.ReadBuffer(ctx, bindings[2].Buffer, 0, out); err != nil {
					b.Fatal(err)
				}
				tcCheck(b, out, av, bv, s, s, s, 1024)
				b.ReportMetric(st.MeanDevice/reps, "device-ns/op")
				b.ReportMetric(2*math.Pow(s, 3)*reps/float64(st.BestDevice)/1e3, "TFLOP/s")
			})
		}
	}
}

// TestArtifactNamesMatrixPath: `kiln compile` shows the path a program's
// matrices took (the artifact's matrix_path), cooperative exactly where the
// profile claims tensor cores, and nothing for a program without matrices.
func TestArtifactNamesMatrixPath(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	want := spirv.MatrixPathScalar
	if b.adapters.List()[0].info.Profile.SupportsTensorCores {
		want = spirv.MatrixPathCooperative
	}
	art, err := b.Artifact(ctx, &pluginapi.ArtifactRequest{Program: gputest.TCProgram(ir.F16, false, 64, 64, 32, 128), Kind: ArtifactSPIRV})
	if err != nil {
		t.Fatal(err)
	}
	if got := art.Info["matrix_path"]; got != want {
		t.Errorf("matrix_path %q, want %q (Info %v)", got, want, art.Info)
	}
	k, _ := kernels.Lookup("saxpy")
	art, err = b.Artifact(ctx, &pluginapi.ArtifactRequest{Program: k.Program(), Kind: ArtifactSPIRV})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := art.Info["matrix_path"]; ok {
		t.Errorf("saxpy has matrix_path %q", got)
	}
}

// TestNVChoice pins KILN_VK_MATRIX_PATH's spellings: the NV path only when
// asked for, staged or direct; the KHR path otherwise.
func TestNVChoice(t *testing.T) {
	for _, tc := range []struct {
		path  string
		loads spirv.NVLoads
		nv    bool
	}{
		{"", spirv.NVStaged, false},
		{"khr", spirv.NVStaged, false},
		{"nv", spirv.NVStaged, true},
		{"nv-direct", spirv.NVDirect, true},
		{"nv-tensor", spirv.NVTensor, true},
		{"NV", spirv.NVStaged, false},
	} {
		if loads, nv := nvChoice(tc.path); loads != tc.loads || nv != tc.nv {
			t.Errorf("nvChoice(%q) = %v, %v; want %v, %v", tc.path, loads, nv, tc.loads, tc.nv)
		}
	}
}

package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// handCase is a small case whose outputs were worked out by hand.
type handCase struct {
	kernel string
	c      Case
	want   []uint32 // the single output, as bits
}

func spec(kv ...any) ir.SpecMap {
	var m ir.SpecMap
	for i := 0; i < len(kv); i += 2 {
		m.Set(kv[i].(string), kv[i+1].(ir.SpecValue))
	}
	return m
}

func f32Bits(values ...float32) []uint32 { return BytesU32(F32Bytes(values)) }

func TestReferencesByHand(t *testing.T) {
	f, u := F32Bytes, U32Bytes
	ones := make([]float32, 300)
	for i := range ones {
		ones[i] = 1
	}
	cases := []handCase{
		{"vector_add", Case{Inputs: [][]byte{f([]float32{1, 2}), f([]float32{0.5, -2}), nil}, OutputCounts: []uint32{0, 0, 2}},
			f32Bits(1.5, 0)},
		{"saxpy", Case{Inputs: [][]byte{f([]float32{1, 2}), f([]float32{1, 1})}, OutputCounts: []uint32{0, 0}},
			f32Bits(3, 5)},
		{"saxpy", Case{Inputs: [][]byte{f([]float32{1, 2}), f([]float32{1, 1})}, OutputCounts: []uint32{0, 0},
			Spec: spec("a", ir.SpecF32(-3))},
			f32Bits(-2, -5)},
		{"reduce_sum", Case{Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{f(ones), nil}, OutputCounts: []uint32{0, 2}},
			f32Bits(256, 44)},
		{"reduce_sum", Case{Grid: [3]uint32{3, 1, 1}, Inputs: [][]byte{f(ones), nil}, OutputCounts: []uint32{0, 3},
			WorkgroupSize: [3]uint32{128, 1, 1}},
			f32Bits(128, 128, 44)},
		{"dot", Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{f([]float32{1, 2, 3}), f([]float32{4, 5, 6}), nil},
			OutputCounts: []uint32{0, 0, 1}},
			f32Bits(32)},
		{"exclusive_scan", Case{Inputs: [][]byte{u([]uint32{1, 2, 3, 4}), nil}, OutputCounts: []uint32{0, 4}},
			[]uint32{0, 1, 3, 6}},
		{"exclusive_scan", Case{Inputs: [][]byte{u([]uint32{1, 2, 3, 4, 5}), nil}, OutputCounts: []uint32{0, 5},
			WorkgroupSize: [3]uint32{2, 1, 1}},
			[]uint32{0, 1, 0, 3, 0}},
		{"exclusive_scan", Case{Inputs: [][]byte{u([]uint32{0xffffffff, 2, 0}), nil}, OutputCounts: []uint32{0, 3}},
			[]uint32{0, 0xffffffff, 1}},
		{"transpose", Case{Inputs: [][]byte{f([]float32{1, 2, 3, 4, 5, 6}), nil}, OutputCounts: []uint32{0, 6},
			Spec: spec("rows", ir.SpecU32(2), "cols", ir.SpecU32(3))},
			f32Bits(1, 4, 2, 5, 3, 6)},
		{"matmul", Case{Inputs: [][]byte{f([]float32{1, 2, 3, 4, 5, 6}), f([]float32{7, 8, 9, 10, 11, 12}), nil},
			OutputCounts: []uint32{0, 0, 4}, Uniforms: u([]uint32{2, 2, 3})},
			f32Bits(58, 64, 139, 154)},
		{"scatter_add", Case{Inputs: [][]byte{u([]uint32{0, 4, 1, 2, 7}), f([]float32{1, 2, -3, 8, 0.5}), nil}, OutputCounts: []uint32{0, 0, 3}},
			f32Bits(1, -0.5, 8)},
		{"softmax", Case{Inputs: [][]byte{f([]float32{0, 0, 5, 5, 5, 5}), nil}, OutputCounts: []uint32{0, 6}, Uniforms: u([]uint32{2})},
			f32Bits(0.5, 0.5, 0.5, 0.5, 0.5, 0.5)},
		{"collatz", Case{Inputs: [][]byte{u([]uint32{1, 6, 27, 0}), nil}, OutputCounts: []uint32{0, 4}},
			[]uint32{0, 8, 111, 1000}},
		{"collatz", Case{Inputs: [][]byte{u([]uint32{1, 6, 27, 0}), nil}, OutputCounts: []uint32{0, 4},
			Spec: spec("max_steps", ir.SpecU32(5))},
			[]uint32{0, 5, 5, 5}},
	}
	bins := make([]uint32, 256)
	bins[0], bins[1], bins[255] = 2, 1, 1
	cases = append(cases, handCase{"histogram",
		Case{Inputs: [][]byte{u([]uint32{0, 256, 1, 511}), nil}, OutputCounts: []uint32{0, 0}}, bins})

	sg, _ := Lookup("subgroup_sum")
	out := sg.Reference(Case{Inputs: [][]byte{u([]uint32{0xffffffff, 2, 7}), nil, nil}})
	if got := [2]uint32{BytesU32(out[0])[0], BytesU32(out[1])[0]}; got != [2]uint32{8, 0xffffffff} {
		t.Errorf("subgroup_sum: reference gives %v, want the wrapped sum 8 and the max", got)
	}

	for i, hc := range cases {
		k, ok := Lookup(hc.kernel)
		if !ok {
			t.Fatalf("no kernel %s", hc.kernel)
		}
		out := k.Reference(hc.c)
		if len(out) != 1 {
			t.Fatalf("case %d (%s): %d outputs", i, hc.kernel, len(out))
		}
		if got := BytesU32(out[0]); !slices.Equal(got, hc.want) {
			t.Errorf("case %d (%s): reference gives %v, want %v", i, hc.kernel, got, hc.want)
		}
	}
}

// TestMatmulRegCasesAreExact pins what matmul_reg's check relies on: on its
// cases a fused multiply-add and a rounded multiply then add give the same
// bits at every step, up to the deepest k the doc allows (65535 products of
// magnitude 1, all of one sign) and on a drawn case.
func TestMatmulRegCasesAreExact(t *testing.T) {
	same := func(a, b []float32) (int, bool) {
		var fused, split float32
		for e := range a {
			fused = float32(math.FMA(float64(a[e]), float64(b[e]), float64(fused)))
			split += float32(a[e] * b[e])
			if math.Float32bits(fused) != math.Float32bits(split) {
				return e, false
			}
		}
		return len(a), true
	}
	ones := make([]float32, 65535)
	for i := range ones {
		ones[i] = 1
	}
	if e, ok := same(ones, ones); !ok {
		t.Fatalf("65535 products of 1: fused and split sums differ at step %d", e)
	}
	k, _ := Lookup("matmul_reg")
	c := k.NewCase(rand.New(rand.NewPCG(1, 2)), 300)
	a, b := BytesF32(c.Inputs[0]), BytesF32(c.Inputs[1])
	m, kk, n := 300, 301, 302
	for row := 0; row < m; row += 37 {
		for col := 0; col < n; col += 41 {
			bcol := make([]float32, kk)
			for e := range bcol {
				bcol[e] = b[e*n+col]
			}
			if e, ok := same(a[row*kk:row*kk+kk], bcol); !ok {
				t.Fatalf("c[%d][%d]: fused and split sums differ at step %d", row, col, e)
			}
		}
	}
}

package verify

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir/half"
)

// mmaF32 computes acc + a·b as a backend may: each product rounded to f32 and
// summed in f32 in the order order(k) gives, for k of the inner dimension; keep
// says which k take part (a backend that drops a step leaves one out).
func mmaF32(m Matmul, order func(k int) []int, keep func(k int) bool) []float32 {
	out := make([]float32, m.M*m.N)
	for r := range m.M {
		for c := range m.N {
			var acc float32
			if m.Acc != nil {
				acc = m.Acc[r*m.N+c]
			}
			for _, k := range order(m.K) {
				if keep(k) {
					acc += float32(m.A[r*m.K+k] * m.B[k*m.N+c])
				}
			}
			out[r*m.N+c] = acc
		}
	}
	return out
}

func inOrder(k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = i
	}
	return out
}

func reversed(k int) []int {
	out := inOrder(k)
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func all(int) bool { return true }

// randomBF16 draws n values of bf16 precision (as float32), from [-1, 1)
// scaled by powers of two up to 2^±8, so sums cancel and round.
func randomBF16(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		v := (2*rng.Float32() - 1) * float32(math.Ldexp(1, rng.IntN(17)-8))
		out[i] = half.NewBFloat16(v).Float32()
	}
	return out
}

// truncated is x rounded toward zero to 10 fraction bits (tf32).
func truncated(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ 0x1FFF) }

// TestMMABoundAcceptsAnyOrderAndRejectsAMissingStep pins docs/design.md's
// matrix_mma bound: a product summed in f32 in any order (forward, backward,
// in blocks truncated toward zero as tensor cores do) passes, and one that
// drops the last k step fails.
func TestMMABoundAcceptsAnyOrderAndRejectsAMissingStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := Matmul{M: 17, N: 31, K: 64}
	m.A, m.B, m.Acc = randomBF16(rng, m.M*m.K), randomBF16(rng, m.K*m.N), randomBF16(rng, m.M*m.N)
	if err := m.Check(mmaF32(m, inOrder, all), nil); err != nil {
		t.Errorf("in-order f32 sum rejected: %v", err)
	}
	if err := m.Check(mmaF32(m, reversed, all), nil); err != nil {
		t.Errorf("reversed f32 sum rejected: %v", err)
	}
	if err := m.Check(truncatingBlocks(m, 8), nil); err != nil {
		t.Errorf("blocks of 8 truncated toward zero rejected: %v", err)
	}
	err := m.Check(mmaF32(m, inOrder, func(k int) bool { return k != m.K-1 }), nil)
	if err == nil || !strings.Contains(err.Error(), "beyond the matrix_mma bound") {
		t.Fatalf("a result without the last k step accepted: %v", err)
	}
	if !strings.Contains(err.Error(), "C[0][0]") {
		t.Errorf("error does not describe the first element: %v", err)
	}
}

// truncatingBlocks sums the products in blocks of w: each block's exact sum
// added to the accumulator, the result truncated toward zero to f32 (a tensor
// core's block FMA, Fasi et al. 2021).
func truncatingBlocks(m Matmul, w int) []float32 {
	out := make([]float32, m.M*m.N)
	for r := range m.M {
		for c := range m.N {
			acc := float64(m.Acc[r*m.N+c])
			for k0 := 0; k0 < m.K; k0 += w {
				s := acc
				for k := k0; k < min(k0+w, m.K); k++ {
					s += float64(m.A[r*m.K+k]) * float64(m.B[k*m.N+c])
				}
				acc = float64(towardZero(s))
			}
			out[r*m.N+c] = float32(acc)
		}
	}
	return out
}

// towardZero rounds x to f32 toward zero.
func towardZero(x float64) float32 {
	f := float32(x)
	if math.Abs(float64(f)) > math.Abs(x) {
		f = math.Nextafter32(f, 0)
	}
	return f
}

// TestMMABoundTF32 pins the tf32 term: operands truncated to tf32 pass with
// precision tf32 and fail without it.
func TestMMABoundTF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m := Matmul{M: 16, N: 16, K: 32}
	m.A, m.B = make([]float32, m.M*m.K), make([]float32, m.K*m.N)
	for i := range m.A {
		m.A[i] = 1 + rng.Float32()
	}
	for i := range m.B {
		m.B[i] = 1 + rng.Float32()
	}
	rounded := m
	rounded.A, rounded.B = make([]float32, len(m.A)), make([]float32, len(m.B))
	for i, v := range m.A {
		rounded.A[i] = truncated(v)
	}
	for i, v := range m.B {
		rounded.B[i] = truncated(v)
	}
	got := mmaF32(rounded, inOrder, all)
	if err := m.Check(got, nil); err == nil {
		t.Error("tf32-rounded operands accepted without precision tf32")
	}
	m.TF32 = true
	if err := m.Check(got, nil); err != nil {
		t.Errorf("tf32-rounded operands rejected with precision tf32: %v", err)
	}
}

func TestMMABoundSpecialValues(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	m := Matmul{M: 1, N: 2, K: 2, A: []float32{1, 2}, B: []float32{inf, nan, 1, 1}}
	if err := m.Check([]float32{inf, nan}, nil); err != nil {
		t.Errorf("inf and NaN results rejected: %v", err)
	}
	if err := m.Check([]float32{nan, 3}, nil); err == nil {
		t.Error("NaN for an infinite exact value and a number for a NaN accepted")
	}
	flushed := Matmul{M: 1, N: 1, K: 1, A: []float32{0x1p-70}, B: []float32{0x1p-70}}
	if err := flushed.Check([]float32{0}, nil); err != nil {
		t.Errorf("a flushed subnormal product rejected: %v", err)
	}
	if got := MMABound(1<<23, false, 1, 1); !math.IsInf(got, 1) {
		t.Errorf("MMABound beyond n·u = 1: %g, want +Inf", got)
	}
	want := 17 * 0x1p-23 / (1 - 17*0x1p-23) * 3
	if got := MMABound(16, false, 1, 2); math.Abs(got-want-17*0x1p-126) > 1e-30 {
		t.Errorf("MMABound(16, false, 1, 2) = %g, want %g", got, want)
	}
	if err := m.Check([]float32{inf, nan}, []int{2}); err == nil {
		t.Error("an element index outside the result accepted")
	}
}

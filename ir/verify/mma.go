package verify

import (
	"fmt"
	"math"
	"strings"
)

// The matrix_mma conformance bound (IR v1.2; docs/design.md, "IR v1.2
// semantics", derives it).
const (
	// mmaUnit is the unit roundoff the bound allows each f32 addition: 2^-23,
	// twice round-to-nearest's, so that truncation and any other rounding
	// direction pass, as NVIDIA's tensor cores round (Fasi et al. 2021).
	mmaUnit = 0x1p-23
	// tf32Slack is the relative error of a product of two operands each rounded
	// to tf32 (10 fraction bits) in any direction: (1+2^-10)² - 1.
	tf32Slack = 0x1p-9 + 0x1p-20
	// flushSlack is what flushing one subnormal result to zero may lose.
	flushSlack = 0x1p-126
)

// MMABound is the largest accepted distance between a backend's result for one
// element of matrix_mma (or of a chain of matrix_mma statements into one
// accumulator) and the exact value acc + Σ_k a_k·b_k: with n = k+1 terms, k the
// inner dimension (the sum of the chain's), absAcc = |acc| and absProducts =
// Σ_k |a_k·b_k| (exact values),
//
//	γ_n·(absAcc + (1+τ)·absProducts) + τ·absProducts + n·2^-126,  γ_n = n·u/(1 - n·u),
//
// u = 2^-23 and τ = 2^-9 + 2^-20 when the operands may be rounded to tf32, else
// 0 (γ_n·τ·absProducts bounds the summation error of the rounded products,
// whose magnitudes exceed the exact ones by up to τ). It is +Inf where n·u ≥ 1. Inputs with a NaN, an infinity, or absAcc +
// absProducts ≥ 2^126 are outside the bound (Matmul treats them apart).
func MMABound(k int, tf32 bool, absAcc, absProducts float64) float64 {
	n := float64(k) + 1
	if n*mmaUnit >= 1 {
		return math.Inf(1)
	}
	gamma := n * mmaUnit / (1 - n*mmaUnit)
	tau := 0.0
	if tf32 {
		tau = tf32Slack
	}
	return gamma*(absAcc+(1+tau)*absProducts) + tau*absProducts + n*flushSlack
}

// Matmul is C = Acc + A·B, what a chain of matrix_mma statements computes over
// a whole inner dimension, for checking a result under MMABound: A is M×K, B is
// K×N, Acc and C are M×N, all row-major; f16 and bf16 operands are given as
// their (exact) float32 values. A nil Acc is zero. TF32 says the operands may
// have been rounded to tf32 (precision "tf32").
type Matmul struct {
	M, N, K int
	A, B    []float32
	Acc     []float32
	TF32    bool
}

// Check compares got (M×N, row-major) with the exact product element by
// element: an element is accepted when it is within MMABound of the exact
// value; where an input is NaN, or infinities meet, any NaN is; where the exact
// value is infinite (an infinite input), that infinity is. elems lists the
// row-major indices to check (a sample of a large product); nil checks all.
// The exact value is summed in float64 with compensation (products of f32 are
// exact in float64; the sum's error is far below the bound). The error counts
// the rejected elements and describes the first few.
func (m Matmul) Check(got []float32, elems []int) error {
	if m.M < 0 || m.N < 0 || m.K < 0 || len(m.A) < m.M*m.K || len(m.B) < m.K*m.N ||
		m.Acc != nil && len(m.Acc) < m.M*m.N || len(got) < m.M*m.N {
		return fmt.Errorf("matmul %d×%d×%d: A has %d elements, B %d, Acc %d, the result %d; too few",
			m.M, m.N, m.K, len(m.A), len(m.B), len(m.Acc), len(got))
	}
	if elems == nil {
		elems = make([]int, m.M*m.N)
		for i := range elems {
			elems[i] = i
		}
	}
	var examples []string
	bad := 0
	for _, e := range elems {
		if e < 0 || e >= m.M*m.N {
			return fmt.Errorf("element %d is outside the %d×%d result", e, m.M, m.N)
		}
		exact, bound := m.element(e/m.N, e%m.N)
		if accepted(float64(got[e]), exact, bound) {
			continue
		}
		bad++
		if len(examples) < maxExamples {
			examples = append(examples, fmt.Sprintf("C[%d][%d]: got %g, exact %g (difference %g, bound %g)",
				e/m.N, e%m.N, got[e], exact, math.Abs(float64(got[e])-exact), bound))
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d checked elements of the %d×%d×%d product differ from the exact value beyond the matrix_mma bound: %s",
			bad, len(elems), m.M, m.N, m.K, strings.Join(examples, "; "))
	}
	return nil
}

// element returns the exact value of C[r][c] (NaN when NaN or opposite
// infinities meet) and its bound.
func (m Matmul) element(r, c int) (exact, bound float64) {
	var acc float64
	if m.Acc != nil {
		acc = float64(m.Acc[r*m.N+c])
	}
	sum, comp, abs := acc, 0.0, 0.0
	for k := range m.K {
		p := float64(m.A[r*m.K+k]) * float64(m.B[k*m.N+c])
		abs += math.Abs(p)
		// Neumaier's compensated sum.
		t := sum + p
		if math.Abs(sum) >= math.Abs(p) {
			comp += (sum - t) + p
		} else {
			comp += (p - t) + sum
		}
		sum = t
	}
	if math.IsInf(sum, 0) || math.IsNaN(sum) {
		return sum, 0
	}
	return sum + comp, MMABound(m.K, m.TF32, math.Abs(acc), abs)
}

// accepted reports whether got is within bound of exact, or matches a NaN or
// infinite exact value as Check says.
func accepted(got, exact, bound float64) bool {
	switch {
	case math.IsNaN(exact):
		return math.IsNaN(got)
	case math.IsInf(exact, 0):
		return got == exact
	}
	return math.Abs(got-exact) <= bound
}

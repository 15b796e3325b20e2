package ptx

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir/half"
)

// The PTX interpreter's 16-bit instructions (IR v1.2), exact through ir/half:
// the f16 arithmetic of .rn instructions is binary16 correctly rounded, cvt.rn
// rounds to nearest even, cvt.f32.f16 is exact, and the integer cvt between .b16
// and .b32 registers truncates or zero-extends.

// decodeHalf decodes the instructions on .b16 registers; done is false for any
// other instruction.
func (m *pmodule) decodeHalf(in *pinst) (done bool, err error) {
	f16 := func(f func(a, b half.Float16) half.Float16) func(a, b uint16) uint16 {
		return func(a, b uint16) uint16 { return uint16(f(half.Float16(a), half.Float16(b))) }
	}
	binaries := map[string]func(a, b uint16) uint16{
		"add.rn.f16": f16(half.Add),
		"sub.rn.f16": f16(half.Sub),
		"mul.rn.f16": f16(half.Mul),
	}
	switch op := in.op; {
	case binaries[op] != nil && len(in.args) == 3:
		return true, m.half3(in, func(v []uint16) uint16 { return binaries[op](v[0], v[1]) })
	case op == "fma.rn.f16" && len(in.args) == 4:
		return true, m.half3(in, func(v []uint16) uint16 {
			return uint16(half.FMA(half.Float16(v[0]), half.Float16(v[1]), half.Float16(v[2])))
		})
	case op == "cvt.u16.u32" || op == "cvt.rn.f16.f32" || op == "cvt.rn.bf16.f32":
		conv := map[string]func(uint32) uint16{
			"cvt.u16.u32":     func(a uint32) uint16 { return uint16(a) },
			"cvt.rn.f16.f32":  func(a uint32) uint16 { return uint16(half.NewFloat16(f32(a))) },
			"cvt.rn.bf16.f32": func(a uint32) uint16 { return uint16(half.NewBFloat16(f32(a))) },
		}[op]
		if len(in.args) != 2 {
			return true, fmt.Errorf("line %d: %s takes 2 operands", in.line, op)
		}
		dst, err := m.dst16(in)
		if err != nil {
			return true, err
		}
		src, err := m.src32(in, 1)
		if err != nil {
			return true, err
		}
		in.exec = func(t *thread) error {
			v, err := src(t)
			dst(t, conv(v))
			return err
		}
		return true, nil
	case op == "cvt.u32.u16" || op == "cvt.f32.f16":
		conv := func(a uint16) uint32 { return uint32(a) }
		if op == "cvt.f32.f16" {
			conv = func(a uint16) uint32 { return fb(half.Float16(a).Float32()) }
		}
		if len(in.args) != 2 {
			return true, fmt.Errorf("line %d: %s takes 2 operands", in.line, op)
		}
		dst, err := m.dst32(in)
		if err != nil {
			return true, err
		}
		src, err := m.src16(in, 1)
		if err != nil {
			return true, err
		}
		in.exec = func(t *thread) error {
			v, err := src(t)
			dst(t, conv(v))
			return err
		}
		return true, nil
	}
	return false, nil
}

// half3 decodes "op d, a, b[, c]" over .b16 registers with f.
func (m *pmodule) half3(in *pinst, f func(v []uint16) uint16) error {
	dst, err := m.dst16(in)
	if err != nil {
		return err
	}
	srcs := make([]func(*thread) (uint16, error), len(in.args)-1)
	for k := range srcs {
		if srcs[k], err = m.src16(in, k+1); err != nil {
			return err
		}
	}
	in.exec = func(t *thread) error {
		v := make([]uint16, len(srcs))
		for k, s := range srcs {
			var err error
			if v[k], err = s(t); err != nil {
				return err
			}
		}
		dst(t, f(v))
		return nil
	}
	return nil
}

// decodeSetpF16 decodes "setp.cmp.f16 p, a, b": IEEE comparisons of binary16
// values, ordered but for neu and nan.
func (m *pmodule) decodeSetpF16(in *pinst, cmp string) error {
	if len(in.args) != 3 {
		return fmt.Errorf("line %d: %s takes 3 operands", in.line, in.op)
	}
	if _, err := compareF16(cmp, 0, 0); err != nil {
		return fmt.Errorf("line %d: %v", in.line, err)
	}
	dst, err := m.dstPred(in)
	if err != nil {
		return err
	}
	a, err := m.src16(in, 1)
	if err != nil {
		return err
	}
	b, err := m.src16(in, 2)
	if err != nil {
		return err
	}
	in.exec = func(t *thread) error {
		x, err := a(t)
		if err != nil {
			return err
		}
		y, err := b(t)
		if err != nil {
			return err
		}
		v, _ := compareF16(cmp, x, y)
		dst(t, v)
		return nil
	}
	return nil
}

func compareF16(cmp string, a, b uint16) (bool, error) {
	x, y := half.Float16(a).Float64(), half.Float16(b).Float64()
	nan := math.IsNaN(x) || math.IsNaN(y)
	switch cmp {
	case "eq":
		return x == y, nil
	case "lt":
		return x < y, nil
	case "le":
		return x <= y, nil
	case "gt":
		return x > y, nil
	case "ge":
		return x >= y, nil
	case "neu":
		return nan || x != y, nil
	case "nan":
		return nan, nil
	}
	return false, fmt.Errorf("setp.%s.f16 is not interpreted", cmp)
}

package ptx

import (
	"fmt"

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
	d := m.decoder(in)
	switch op := in.op; {
	case binaries[op] != nil && len(in.args) == 3:
		in.exec = exec2(d.d16(), d.r16(1), d.r16(2), func(_ *thread, a, b uint16) (uint16, error) { return binaries[op](a, b), nil })
	case op == "fma.rn.f16" && len(in.args) == 4:
		in.exec = exec3(d.d16(), d.r16(1), d.r16(2), d.r16(3), func(_ *thread, a, b, c uint16) (uint16, error) {
			return uint16(half.FMA(half.Float16(a), half.Float16(b), half.Float16(c))), nil
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
		in.exec = exec1(d.d16(), d.r32(1), same(conv))
	case op == "cvt.u32.u16" || op == "cvt.f32.f16":
		conv := func(a uint16) uint32 { return uint32(a) }
		if op == "cvt.f32.f16" {
			conv = func(a uint16) uint32 { return fb(half.Float16(a).Float32()) }
		}
		if len(in.args) != 2 {
			return true, fmt.Errorf("line %d: %s takes 2 operands", in.line, op)
		}
		in.exec = exec1(d.d32(), d.r16(1), same(conv))
	default:
		return false, nil
	}
	return true, d.err
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
	d := m.decoder(in)
	in.exec = exec2(d.dPred(), d.r16(1), d.r16(2), func(_ *thread, a, b uint16) (bool, error) { return compareF16(cmp, a, b) })
	return d.err
}

func compareF16(op string, a, b uint16) (bool, error) {
	return floatCompare(op, "f16", half.Float16(a).Float64(), half.Float16(b).Float64())
}

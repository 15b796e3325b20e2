package ptx

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// The PTX interpreter's wide accesses (wide.go): ld.global[.nc].v4.b32,
// .v2.b32 and st.global.v4.b32, .v2.b32 move 16 or 8 bytes, little-endian
// words in order; the address must be a multiple of the access's size (PTX
// requires it; the interpreter fails otherwise, as for every access) and lie
// inside one allocation. cvt.u32.u64 keeps a .b64 register's low half. The
// non-coherent bookkeeping covers every 2-byte granule an access touches.

// decodeWide decodes the wide accesses and cvt.u32.u64; done is false for any
// other instruction.
func (m *pmodule) decodeWide(in *pinst) (done bool, err error) {
	if in.op == "cvt.u32.u64" {
		d := m.decoder(in)
		dst, src := d.d32(), d.r64(1)
		if d.err != nil {
			return true, d.err
		}
		in.exec = func(t *thread) error {
			v, err := src(t)
			dst(t, uint32(v))
			return err
		}
		return true, nil
	}
	var words int
	switch {
	case strings.HasSuffix(in.op, ".v4.b32"):
		words = 4
	case strings.HasSuffix(in.op, ".v2.b32"):
		words = 2
	default:
		return false, nil
	}
	space := strings.TrimSuffix(strings.TrimSuffix(in.op, ".v4.b32"), ".v2.b32")
	size := uint64(4 * words)
	if len(in.args) != words+1 {
		return true, fmt.Errorf("line %d: %s takes %d operands", in.line, in.op, words+1)
	}
	switch space {
	case "ld.global", "ld.global.nc":
		nc := space == "ld.global.nc"
		ad := m.decoder(in)
		addr := ad.address(words, "global")
		if ad.err != nil {
			return true, ad.err
		}
		var dsts []writer[uint32]
		for k := range words {
			tmp := *in
			tmp.args = []opnd{in.args[k]}
			d := m.decoder(&tmp)
			dsts = append(dsts, d.d32())
			if d.err != nil {
				return true, d.err
			}
		}
		in.exec = func(t *thread) error {
			a, err := addr(t)
			if err != nil {
				return err
			}
			c, err := t.cell(in, "global", a, size)
			if err != nil {
				return err
			}
			for g := a; g < a+size; g += 2 {
				if nc && t.m.written[g] {
					return t.fail(in, "reads global address %#x through ld.global.nc, which the kernel wrote", g)
				}
				if nc {
					t.m.ncRead[g] = true
				}
			}
			for k, d := range dsts {
				d(t, binary.LittleEndian.Uint32(c[4*k:]))
			}
			return nil
		}
		return true, nil
	case "st.global":
		d := m.decoder(in)
		addr := d.address(0, "global")
		var srcs []reader[uint32]
		for k := range words {
			srcs = append(srcs, d.r32(k+1))
		}
		if d.err != nil {
			return true, d.err
		}
		in.exec = func(t *thread) error {
			a, err := addr(t)
			if err != nil {
				return err
			}
			vals := make([]uint32, words)
			for k, s := range srcs {
				if vals[k], err = s(t); err != nil {
					return err
				}
			}
			c, err := t.cell(in, "global", a, size)
			if err != nil {
				return err
			}
			for g := a; g < a+size; g += 2 {
				if t.m.ncRead[g] {
					return t.fail(in, "writes global address %#x, which the kernel read through ld.global.nc", g)
				}
				t.m.written[g] = true
			}
			for k, v := range vals {
				binary.LittleEndian.PutUint32(c[4*k:], v)
			}
			return nil
		}
		return true, nil
	}
	return true, fmt.Errorf("line %d: %q is not interpreted (not an instruction Emit writes)", in.line, in.text)
}

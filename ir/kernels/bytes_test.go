package kernels

import (
	"bytes"
	"math"
	"slices"
	"testing"
)

func TestBytesRoundTrip(t *testing.T) {
	if got := U32Bytes([]uint32{0x01020304}); !bytes.Equal(got, []byte{4, 3, 2, 1}) {
		t.Errorf("U32Bytes is not little-endian: % x", got)
	}
	if got := F32Bytes([]float32{1}); !bytes.Equal(got, []byte{0, 0, 0x80, 0x3f}) {
		t.Errorf("F32Bytes(1) = % x, want IEEE bits little-endian", got)
	}
	u := []uint32{0, 1, math.MaxUint32, 0x7fc00001}
	if got := BytesU32(U32Bytes(u)); !slices.Equal(got, u) {
		t.Errorf("u32 round trip: %v", got)
	}
	f := []float32{0, float32(math.Copysign(0, -1)), 1.5, float32(math.Inf(-1)), math.Float32frombits(0x7fc00123)}
	back := BytesF32(F32Bytes(f))
	for i := range f {
		if math.Float32bits(back[i]) != math.Float32bits(f[i]) {
			t.Errorf("f32 round trip of %#x gave %#x", math.Float32bits(f[i]), math.Float32bits(back[i]))
		}
	}
	if got := BytesU32([]byte{1, 0, 0, 0, 9}); len(got) != 1 || got[0] != 1 {
		t.Errorf("a trailing partial element must be ignored: %v", got)
	}
	if got := U16Bytes([]uint16{0x0102}); !bytes.Equal(got, []byte{2, 1}) {
		t.Errorf("U16Bytes is not little-endian: % x", got)
	}
	if got := BytesU16([]byte{2, 1, 0xff, 0xff, 9}); !slices.Equal(got, []uint16{0x0102, 0xffff}) {
		t.Errorf("BytesU16 = %#x, want [0x102 0xffff] (the partial element ignored)", got)
	}
}

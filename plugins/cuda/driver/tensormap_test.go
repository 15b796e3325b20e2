package driver

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// TestEncodeTensorMap runs EncodeTensorMap against a fake
// cuTensorMapEncodeTiled: every argument reaches it (rank 2, the dimensions,
// the row stride, the box, unit element strides, no interleave, the swizzle,
// 256-byte L2 promotion, zero fill) with a 64-byte aligned map, whose bytes
// come back; a driver without the function gives a *SymbolMissingError.
func TestEncodeTensorMap(t *testing.T) {
	type call struct {
		aligned                                 bool
		dtype, rank, base                       uintptr
		dims                                    [2]uint64
		stride                                  uint64
		box, elemStrides                        [2]uint32
		interleave, swizzle, promotion, oobFill uintptr
	}
	var calls []call
	d := &Driver{library: "fake-libcuda.so"}
	d.fns[fnTensorMapEncodeTiled] = purego.NewCallback(func(m, dtype, rank, base, dims, strides, box, elemStrides, interleave, swizzle, promotion, oob uintptr) uintptr {
		c := call{aligned: m%64 == 0, dtype: dtype, rank: rank, base: base,
			dims: *at[[2]uint64](dims), stride: *at[uint64](strides),
			box: *at[[2]uint32](box), elemStrides: *at[[2]uint32](elemStrides),
			interleave: interleave, swizzle: swizzle, promotion: promotion, oobFill: oob}
		calls = append(calls, c)
		out := at[[16]uint64](m)
		for i := range out {
			out[i] = uint64(i) * 0x0101
		}
		if dtype == 99 {
			return 1 // CUDA_ERROR_INVALID_VALUE
		}
		return 0
	})
	unknown := purego.NewCallback(func(r, s uintptr) uintptr { return 1 })
	d.fns[fnGetErrorName], d.fns[fnGetErrorString] = unknown, unknown
	if !d.HasTensorMaps() {
		t.Fatal("the fake driver has cuTensorMapEncodeTiled, HasTensorMaps says not")
	}
	s := TensorMapSpec{DataType: TensorMapBFloat16, Base: 0x7000_0000, Dims: [2]uint64{4096, 1000}, RowStride: 8192,
		Box: [2]uint32{64, 128}, Swizzle: TensorMapSwizzle128B}
	m, err := d.EncodeTensorMap(s)
	if err != nil {
		t.Fatal(err)
	}
	want := call{aligned: true, dtype: 9, rank: 2, base: 0x7000_0000, dims: [2]uint64{4096, 1000}, stride: 8192,
		box: [2]uint32{64, 128}, elemStrides: [2]uint32{1, 1}, swizzle: 3, promotion: 3}
	if len(calls) != 1 || calls[0] != want {
		t.Fatalf("calls %+v, want %+v", calls, want)
	}
	for i, w := range m {
		if w != uint64(i)*0x0101 {
			t.Fatalf("word %d of the map is %#x", i, w)
		}
	}
	s.DataType = 99
	if _, err := d.EncodeTensorMap(s); err == nil {
		t.Error("a failing encode gave no error")
	}
	bare := &Driver{library: "libcuda-11.so"}
	var sm *SymbolMissingError
	if _, err := bare.EncodeTensorMap(s); bare.HasTensorMaps() || !errors.As(err, &sm) || sm.Symbol != "cuTensorMapEncodeTiled" {
		t.Errorf("EncodeTensorMap without the symbol: %v", err)
	}
}

// TestParamsSized pins the parameter layout Launch passes: one pointer per
// parameter, a tensor map's 128 bytes 64-byte aligned and whole, the other
// values in their slots.
func TestParamsSized(t *testing.T) {
	for _, sizes := range [][]int{{8, 8, 4, 128, 128, 4}, {128}, {4, 128}, {}} {
		p := NewParamsSized(sizes)
		if p.Len() != len(sizes) {
			t.Fatalf("%v: %d parameters", sizes, p.Len())
		}
		var m TensorMap
		for i := range m {
			m[i] = 0xabc0 + uint64(i)
		}
		for i, s := range sizes {
			if s == 128 {
				p.SetTensorMap(i, m)
			} else {
				p.Set(i, uint64(100+i))
			}
		}
		for i, s := range sizes {
			ptr := p.ptrs[i]
			if s == 128 {
				if ptr%64 != 0 || *at[TensorMap](ptr) != m {
					t.Errorf("%v: tensor map %d at %#x (64-byte aligned: %v) differs", sizes, i, ptr, ptr%64 == 0)
				}
			} else if got := *at[uint64](ptr); got != uint64(100+i) || p.Get(i) != got {
				t.Errorf("%v: parameter %d is %d", sizes, i, got)
			}
		}
		p.Free()
	}
}

// at is the memory at address p, which the fake driver received from Go
// (checkptr would reject a heap pointer made from a uintptr).
//
//go:nocheckptr
func at[T any](p uintptr) *T { return (*T)(unsafe.Add(nil, p)) }

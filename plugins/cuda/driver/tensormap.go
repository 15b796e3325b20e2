package driver

import (
	"fmt"
	"unsafe"
)

// TensorMapDataType is a CUtensorMapDataType.
type TensorMapDataType uint32

// The element types kiln's tensor maps use.
const (
	TensorMapFloat16  TensorMapDataType = 6 // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
	TensorMapBFloat16 TensorMapDataType = 9 // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
)

// TensorMapSwizzle is a CUtensorMapSwizzle.
type TensorMapSwizzle uint32

// The swizzle modes (CU_TENSOR_MAP_SWIZZLE_*).
const (
	TensorMapSwizzle32B  TensorMapSwizzle = 1
	TensorMapSwizzle64B  TensorMapSwizzle = 2
	TensorMapSwizzle128B TensorMapSwizzle = 3
)

// tensorMapL2Promotion256B is CU_TENSOR_MAP_L2_PROMOTION_L2_256B: the copy
// engine fetches whole 256-byte lines into L2.
const tensorMapL2Promotion256B = 3

// TensorMapSpec is a 2-D tiled tensor map for cuTensorMapEncodeTiled: rank 2,
// element strides 1, no interleave, out-of-bounds elements filled with zeros.
type TensorMapSpec struct {
	DataType TensorMapDataType
	// Base is the tensor's device address (16-byte aligned).
	Base DevicePtr
	// Dims are the row length and the row count in elements; RowStride the
	// distance between rows in bytes (a multiple of 16).
	Dims      [2]uint64
	RowStride uint64
	// Box is the box's columns and rows in elements.
	Box     [2]uint32
	Swizzle TensorMapSwizzle
}

// TensorMap is an encoded CUtensorMap: 128 opaque bytes a kernel takes as a
// parameter (see Params.SetTensorMap).
type TensorMap [16]uint64

// HasTensorMaps reports whether the driver has cuTensorMapEncodeTiled (CUDA 12
// and later).
func (d *Driver) HasTensorMaps() bool { return d.has(fnTensorMapEncodeTiled) }

// EncodeTensorMap runs cuTensorMapEncodeTiled for s. It needs no context.
func (d *Driver) EncodeTensorMap(s TensorMapSpec) (TensorMap, error) {
	if !d.has(fnTensorMapEncodeTiled) {
		return TensorMap{}, d.missing(fnTensorMapEncodeTiled)
	}
	// a CUtensorMap is 64-byte aligned: encode into an aligned part of buf
	var buf [24]uint64
	off := (64 - int(uintptr(unsafe.Pointer(&buf[0]))%64)) % 64 / 8
	dims, strides := s.Dims, [1]uint64{s.RowStride}
	box, elemStrides := s.Box, [2]uint32{1, 1}
	r := d.call(fnTensorMapEncodeTiled, uintptr(unsafe.Pointer(&buf[off])), uintptr(s.DataType), 2, uintptr(s.Base),
		uintptr(unsafe.Pointer(&dims[0])), uintptr(unsafe.Pointer(&strides[0])), uintptr(unsafe.Pointer(&box[0])),
		uintptr(unsafe.Pointer(&elemStrides[0])), 0, uintptr(s.Swizzle), tensorMapL2Promotion256B, 0)
	if err := d.check(fnTensorMapEncodeTiled, r); err != nil {
		return TensorMap{}, fmt.Errorf("encoding a tensor map of %d×%d elements, box %d×%d: %w", s.Dims[0], s.Dims[1], s.Box[0], s.Box[1], err)
	}
	var m TensorMap
	copy(m[:], buf[off:off+16])
	return m, nil
}

// EncodeTensorMap is the context's driver's EncodeTensorMap.
func (c *Context) EncodeTensorMap(s TensorMapSpec) (TensorMap, error) { return c.d.EncodeTensorMap(s) }

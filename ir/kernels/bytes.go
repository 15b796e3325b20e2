package kernels

import (
	"encoding/binary"
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
)

// F32Bytes encodes values as little-endian IEEE-754 f32 buffer data.
func F32Bytes(values []float32) []byte {
	out := make([]byte, 4*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}

// BytesF32 decodes little-endian f32 buffer data; a trailing partial element is
// ignored.
func BytesF32(data []byte) []float32 {
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out
}

// U32Bytes encodes values as little-endian u32 buffer data.
func U32Bytes(values []uint32) []byte {
	out := make([]byte, 4*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint32(out[4*i:], v)
	}
	return out
}

// BytesU32 decodes little-endian u32 buffer data; a trailing partial element is
// ignored.
func BytesU32(data []byte) []uint32 {
	out := make([]uint32, len(data)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(data[4*i:])
	}
	return out
}

// F16Bytes encodes values, rounded to f16 (ties to even), as little-endian
// 2-byte buffer data (IR v1.2).
func F16Bytes(values []float32) []byte {
	out := make([]byte, 2*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint16(out[2*i:], uint16(half.NewFloat16(v)))
	}
	return out
}

// BF16Bytes encodes values, rounded to bf16 (ties to even), as little-endian
// 2-byte buffer data (IR v1.2).
func BF16Bytes(values []float32) []byte {
	out := make([]byte, 2*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint16(out[2*i:], uint16(half.NewBFloat16(v)))
	}
	return out
}

// BytesF16 decodes little-endian f16 buffer data to its exact float32 values;
// a trailing partial element is ignored.
func BytesF16(data []byte) []float32 {
	out := make([]float32, len(data)/2)
	for i := range out {
		out[i] = half.Float16(binary.LittleEndian.Uint16(data[2*i:])).Float32()
	}
	return out
}

// BytesBF16 decodes little-endian bf16 buffer data to its exact float32
// values; a trailing partial element is ignored.
func BytesBF16(data []byte) []float32 {
	out := make([]float32, len(data)/2)
	for i := range out {
		out[i] = half.BFloat16(binary.LittleEndian.Uint16(data[2*i:])).Float32()
	}
	return out
}

// FloatBytes encodes values as buffer data of float type t (f32, f16 or bf16),
// rounding to nearest even where t is narrower.
func FloatBytes(t ir.Type, values []float32) []byte {
	switch t {
	case ir.F16:
		return F16Bytes(values)
	case ir.BF16:
		return BF16Bytes(values)
	}
	return F32Bytes(values)
}

// BytesFloat decodes buffer data of float type t (f32, f16 or bf16) to exact
// float32 values.
func BytesFloat(t ir.Type, data []byte) []float32 {
	switch t {
	case ir.F16:
		return BytesF16(data)
	case ir.BF16:
		return BytesBF16(data)
	}
	return BytesF32(data)
}

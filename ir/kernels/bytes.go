package kernels

import (
	"encoding/binary"
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
)

// F32Bytes encodes values as little-endian IEEE-754 f32 buffer data.
func F32Bytes(values []float32) []byte {
	return encodeEach(values, 4, func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) })
}

// BytesF32 decodes little-endian f32 buffer data; a trailing partial element is
// ignored.
func BytesF32(data []byte) []float32 {
	return decodeEach(data, 4, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) })
}

// U32Bytes encodes values as little-endian u32 buffer data.
func U32Bytes(values []uint32) []byte {
	return encodeEach(values, 4, binary.LittleEndian.PutUint32)
}

// BytesU32 decodes little-endian u32 buffer data; a trailing partial element is
// ignored.
func BytesU32(data []byte) []uint32 {
	return decodeEach(data, 4, binary.LittleEndian.Uint32)
}

// U16Bytes encodes values as little-endian 2-byte buffer data: raw f16 or bf16
// bit patterns (IR v1.2).
func U16Bytes(values []uint16) []byte {
	return encodeEach(values, 2, binary.LittleEndian.PutUint16)
}

// BytesU16 decodes little-endian 2-byte buffer data to its bit patterns; a
// trailing partial element is ignored.
func BytesU16(data []byte) []uint16 {
	return decodeEach(data, 2, binary.LittleEndian.Uint16)
}

// F16Bytes encodes values, rounded to f16 (ties to even), as little-endian
// 2-byte buffer data (IR v1.2).
func F16Bytes(values []float32) []byte {
	return encodeEach(values, 2, func(b []byte, v float32) { binary.LittleEndian.PutUint16(b, uint16(half.NewFloat16(v))) })
}

// BF16Bytes encodes values, rounded to bf16 (ties to even), as little-endian
// 2-byte buffer data (IR v1.2).
func BF16Bytes(values []float32) []byte {
	return encodeEach(values, 2, func(b []byte, v float32) { binary.LittleEndian.PutUint16(b, uint16(half.NewBFloat16(v))) })
}

// BytesF16 decodes little-endian f16 buffer data to its exact float32 values;
// a trailing partial element is ignored.
func BytesF16(data []byte) []float32 {
	return decodeEach(data, 2, func(b []byte) float32 { return half.Float16(binary.LittleEndian.Uint16(b)).Float32() })
}

// BytesBF16 decodes little-endian bf16 buffer data to its exact float32
// values; a trailing partial element is ignored.
func BytesBF16(data []byte) []float32 {
	return decodeEach(data, 2, func(b []byte) float32 { return half.BFloat16(binary.LittleEndian.Uint16(b)).Float32() })
}

// encodeEach writes each value with put into its size bytes of the result.
func encodeEach[T any](values []T, size int, put func([]byte, T)) []byte {
	out := make([]byte, size*len(values))
	for i, v := range values {
		put(out[size*i:], v)
	}
	return out
}

// decodeEach reads each whole size-byte element of data with get.
func decodeEach[T any](data []byte, size int, get func([]byte) T) []T {
	out := make([]T, len(data)/size)
	for i := range out {
		out[i] = get(data[size*i:])
	}
	return out
}

// FloatBytes encodes values as buffer data of float type t (f32, f16 or bf16),
// rounding to nearest even where t is narrower.
func FloatBytes(t ir.Type, values []float32) []byte {
	encode, _ := floatCodec(t)
	return encode(values)
}

// BytesFloat decodes buffer data of float type t (f32, f16 or bf16) to exact
// float32 values.
func BytesFloat(t ir.Type, data []byte) []float32 {
	_, decode := floatCodec(t)
	return decode(data)
}

// floatCodec returns the encoder and decoder of float type t's buffer data (f32
// for any type but f16 and bf16).
func floatCodec(t ir.Type) (func([]float32) []byte, func([]byte) []float32) {
	switch t {
	case ir.F16:
		return F16Bytes, BytesF16
	case ir.BF16:
		return BF16Bytes, BytesBF16
	}
	return F32Bytes, BytesF32
}

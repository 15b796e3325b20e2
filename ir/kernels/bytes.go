package kernels

import (
	"encoding/binary"
	"math"
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

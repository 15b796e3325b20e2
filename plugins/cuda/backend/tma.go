package backend

import (
	"slices"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
)

// tensorMapEncoder encodes a tensor map: the driver's EncodeTensorMap.
type tensorMapEncoder func(driver.TensorMapSpec) (driver.TensorMap, error)

// tensorMaps is a pipeline's tensor-map state: the last encoded maps and what
// they were encoded from, so that a launch with the same buffers and sizes
// reuses them.
type tensorMaps struct {
	encs  []ptx.TensorMapEncoding
	maps  []driver.TensorMap
	ready bool
}

// paramSizes are the byte sizes of m's parameters, for driver.NewParamsSized.
func paramSizes(m *ptx.Module) []int {
	sizes := make([]int, len(m.Params))
	for i, p := range m.Params {
		sizes[i] = p.Bytes()
	}
	return sizes
}

// fill encodes m's tensor maps from the launch's buffer and uniform
// parameters already set in args (ptx.TensorMap.Encoding), stores them and
// sets the TensorMapsReady parameter to 1; where a map cannot be encoded (its
// Encoding refuses the launch's values, or the driver does) it sets 0, and
// the kernel takes its path without maps. A module without maps is left as
// it is.
func (t *tensorMaps) fill(m *ptx.Module, args *driver.Params, encode tensorMapEncoder) {
	if len(m.TensorMaps) == 0 {
		return
	}
	var uniforms []uint32
	for i, p := range m.Params {
		if p.Kind == ptx.UniformValue {
			for int(p.Binding) >= len(uniforms) {
				uniforms = append(uniforms, 0)
			}
			uniforms[p.Binding] = uint32(args.Get(i))
		}
	}
	param := func(kind ptx.ParamKind, binding uint32) uint64 {
		for i, p := range m.Params {
			if p.Kind == kind && p.Binding == binding {
				return args.Get(i)
			}
		}
		return 0
	}
	encs := make([]ptx.TensorMapEncoding, len(m.TensorMaps))
	ready := true
	for i, tm := range m.TensorMaps {
		enc, ok := tm.Encoding(param(ptx.BufferPointer, tm.Binding), uint32(param(ptx.ElementCount, tm.Binding)), uniforms)
		encs[i], ready = enc, ready && ok
	}
	if !ready {
		t.encs, t.maps, t.ready = nil, nil, false
	} else if !t.ready || !slices.Equal(t.encs, encs) {
		maps := make([]driver.TensorMap, len(encs))
		for i, e := range encs {
			var err error
			if maps[i], err = encode(tensorMapSpec(e)); err != nil {
				ready = false
				break
			}
		}
		t.encs, t.maps, t.ready = encs, maps, ready
	}
	flag := uint64(0)
	if t.ready {
		flag = 1
		for i, tm := range m.TensorMaps {
			args.SetTensorMap(tm.Param, t.maps[i])
		}
	}
	for i, p := range m.Params {
		if p.Kind == ptx.TensorMapsReady {
			args.Set(i, flag)
		}
	}
}

// tensorMapSpec is the driver's spelling of an encoding.
func tensorMapSpec(e ptx.TensorMapEncoding) driver.TensorMapSpec {
	dt := driver.TensorMapFloat16
	if e.Elem == ir.BF16 {
		dt = driver.TensorMapBFloat16
	}
	sw := driver.TensorMapSwizzle128B
	switch e.SwizzleBytes {
	case 32:
		sw = driver.TensorMapSwizzle32B
	case 64:
		sw = driver.TensorMapSwizzle64B
	}
	return driver.TensorMapSpec{DataType: dt, Base: driver.DevicePtr(e.Base), Dims: e.Dims, RowStride: e.RowStride, Box: e.Box, Swizzle: sw}
}

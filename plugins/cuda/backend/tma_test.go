package backend

import (
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// TestTensorMapParams pins how a launch fills the TMA kernel's parameters
// (tensorMaps.fill), with a fake encoder: the maps' specs from the buffers
// and uniforms (a: k×m in 64×128 boxes, b: n×k in 64×64 panels, 128-byte
// swizzle, rows of 2·k and 2·n bytes), their bytes in the map parameters and
// kiln_tma 1; the same values again reuse the maps; values the copy engine
// cannot take (rows of an odd multiple of 2 bytes, an unaligned buffer, a
// short buffer) or a failing encoder give kiln_tma 0 and no encode.
func TestTensorMapParams(t *testing.T) {
	m, err := ptx.Emit(gputest.CorpusTC(t, ir.BF16, 128, 256, 64), ptx.Options{Target: ptx.Target{SM: 90},
		NonCoherentReads: true, MaxDynamicSharedBytes: 227 << 10, WorkgroupSize: [3]uint32{256, 1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.TensorMaps) != 2 {
		t.Fatalf("module without its two tensor maps: %+v", m.TensorMaps)
	}
	args := driver.NewParamsSized(paramSizes(m))
	defer args.Free()
	var specs []driver.TensorMapSpec
	var fail error
	encode := func(s driver.TensorMapSpec) (driver.TensorMap, error) {
		specs = append(specs, s)
		var tm driver.TensorMap
		tm[0], tm[15] = 0xA000+uint64(len(specs)), uint64(s.Base)
		return tm, fail
	}
	const baseA, baseB, baseC = 0x7f00_0000_0000, 0x7f00_1000_0000, 0x7f00_2000_0000
	set := func(dm, dn, dk uint32, baseA uint64, lenB uint32) {
		for i, p := range m.Params {
			switch p.Kind {
			case ptx.BufferPointer:
				args.Set(i, []uint64{baseA, baseB, baseC}[p.Binding])
			case ptx.ElementCount:
				args.Set(i, uint64([]uint32{dm * dk, lenB, dm * dn}[p.Binding]))
			case ptx.UniformValue:
				args.Set(i, uint64([]uint32{dm, dn, dk}[p.Binding]))
			}
		}
	}
	flag := func() uint64 {
		for i, p := range m.Params {
			if p.Kind == ptx.TensorMapsReady {
				return args.Get(i)
			}
		}
		t.Fatal("no kiln_tma parameter")
		return 0
	}
	var tmaps tensorMaps
	set(1000, 4096, 520, baseA, 520*4096)
	tmaps.fill(m, args, encode)
	want := []driver.TensorMapSpec{
		{DataType: driver.TensorMapBFloat16, Base: baseA, Dims: [2]uint64{520, 1000}, RowStride: 1040, Box: [2]uint32{64, 128}, Swizzle: driver.TensorMapSwizzle128B},
		{DataType: driver.TensorMapBFloat16, Base: baseB, Dims: [2]uint64{4096, 520}, RowStride: 8192, Box: [2]uint32{64, 64}, Swizzle: driver.TensorMapSwizzle128B},
	}
	if len(specs) != 2 || specs[0] != want[0] || specs[1] != want[1] || flag() != 1 {
		t.Fatalf("specs %+v (kiln_tma %d), want %+v", specs, flag(), want)
	}
	for i, tm := range m.TensorMaps {
		if got := args.Get(tm.Param); got != 0xA001+uint64(i) {
			t.Errorf("map %d's parameter starts %#x", i, got)
		}
	}
	// the same launch again (the resident path sets every parameter's first word)
	set(1000, 4096, 520, baseA, 520*4096)
	args.Set(m.TensorMaps[0].Param, 0)
	tmaps.fill(m, args, encode)
	if len(specs) != 2 || flag() != 1 || args.Get(m.TensorMaps[0].Param) != 0xA001 {
		t.Fatalf("the same launch encoded again (%d encodes) or lost its map", len(specs))
	}
	for name, c := range map[string]struct {
		n     uint32
		baseA uint64
		lenB  uint32
	}{
		"rows of b of 90 bytes": {45, baseA, 520 * 45},
		"a unaligned":           {4096, baseA + 2, 520 * 4096},
		"b short":               {4096, baseA, 520*4096 - 1},
	} {
		specs = nil
		set(1000, c.n, 520, c.baseA, c.lenB)
		tmaps.fill(m, args, encode)
		if flag() != 0 || len(specs) != 0 {
			t.Errorf("%s: kiln_tma %d, %d encodes", name, flag(), len(specs))
		}
	}
	fail = errors.New("CUDA_ERROR_INVALID_VALUE")
	set(1000, 4096, 520, baseA, 520*4096)
	tmaps.fill(m, args, encode)
	if flag() != 0 {
		t.Error("a failing encoder: kiln_tma 1")
	}
}

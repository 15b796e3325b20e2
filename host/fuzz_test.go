package host

import (
	"fmt"
	"strings"
	"testing"
)

func FuzzParseName(f *testing.F) {
	for _, s := range []string{"cpu-ref", "vulkan:1", "cuda:0", "x:", ":1", "a:b:c", "v:-1", "v:99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, adapter, err := parseName(s)
		if err != nil {
			if !strings.Contains(err.Error(), "Fix:") {
				t.Fatalf("error %q has no Fix", err)
			}
			return
		}
		if adapter < 0 {
			if id != s {
				t.Fatalf("parseName(%q) = %q without an adapter", s, id)
			}
			return
		}
		id2, adapter2, err := parseName(fmt.Sprintf("%s:%d", id, adapter))
		if err != nil || id2 != id || adapter2 != adapter {
			t.Fatalf("%q → %q, %d does not round-trip: %q, %d, %v", s, id, adapter, id2, adapter2, err)
		}
	})
}

// FuzzPlan checks that plan never panics, and that a launch it accepts makes
// outputs of exactly the planned sizes pass checkOutputs and any other size fail.
func FuzzPlan(f *testing.F) {
	f.Add(uint16(16), uint16(8), uint32(5), uint32(0), uint8(4), uint8(3), uint32(130), uint32(0), false)
	f.Add(uint16(3), uint16(0), uint32(0), uint32(3), uint8(2), uint8(2), uint32(0), uint32(7), true)
	f.Fuzz(func(t *testing.T, xLen, yLen uint16, outCount, fixedCount uint32, nInputs, nCounts uint8, inv, grid uint32, writeInput bool) {
		p := fourBuffers(t)
		inputs := [][]byte{make([]byte, xLen), make([]byte, yLen), nil, nil}
		if writeInput {
			inputs[2] = make([]byte, 4)
		}
		counts := []uint32{0, 0, outCount, fixedCount}
		w := Work{
			Inputs:       inputs[:min(int(nInputs), 5)%5],
			OutputCounts: counts[:min(int(nCounts), 4)],
			Invocations:  [3]uint32{inv, 1, 1},
			Grid:         [3]uint32{grid, 1, 1},
		}
		if inv == 0 {
			w.Invocations = [3]uint32{}
		}
		if grid == 0 {
			w.Grid = [3]uint32{}
		}
		req, sizes, err := plan(p, [3]uint32{}, w)
		if err != nil {
			if !strings.Contains(err.Error(), "Fix:") {
				t.Fatalf("error %q has no Fix", err)
			}
			return
		}
		if len(req.Inputs) != len(p.Buffers) || len(req.OutputCounts) != len(p.Buffers) || len(sizes) != len(p.Outputs()) {
			t.Fatalf("request not normalized: %d inputs, %d counts, %d sizes", len(req.Inputs), len(req.OutputCounts), len(sizes))
		}
		outs := make([][]byte, len(sizes))
		for i, s := range sizes {
			if s%4 != 0 {
				t.Fatalf("output %d planned at %d bytes", i, s)
			}
			outs[i] = make([]byte, s)
		}
		if err := checkOutputs("f:0", p, sizes, outs); err != nil {
			t.Fatalf("planned outputs rejected: %v", err)
		}
		outs[0] = append(outs[0], 0, 0, 0, 0)
		if err := checkOutputs("f:0", p, sizes, outs); err == nil {
			t.Fatal("an output of the wrong size passed")
		}
	})
}

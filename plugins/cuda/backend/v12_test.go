package backend

import (
	"errors"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
)

// TestCapabilitiesRejectAtCompile: a program using f16 or bf16 (in a buffer, a
// matrix or only a cast) is rejected, naming what it needs and with a Fix, by an
// adapter whose profile lacks it, and accepted by one that has it (every device
// kiln accepts does, see profile).
func TestCapabilitiesRejectAtCompile(t *testing.T) {
	f16Buffer := func() *ir.Program {
		b := ir.NewBuilder("f16buf", 64, 1, 1)
		out := b.Buffer("out", ir.F16, ir.Write)
		b.Store(out, ir.GlobalID(0), ir.LitF16(1))
		return b.Program()
	}()
	bf16Cast := func() *ir.Program {
		b := ir.NewBuilder("bf16cast", 64, 1, 1)
		out := b.Buffer("out", ir.F32, ir.Write)
		b.Store(out, ir.GlobalID(0), ir.Cast(ir.F32, ir.Cast(ir.BF16, ir.LitF32(1))))
		return b.Program()
	}()
	bf16Matrix := func() *ir.Program {
		b := ir.NewBuilder("bf16mat", 64, 1, 1)
		out := b.Buffer("out", ir.F32, ir.Write)
		b.Matrix("m", ir.BF16, 16, 16)
		b.Matrix("acc", ir.F32, 16, 16)
		b.MatrixConvert("acc", "m")
		b.MatrixStore("acc", out, ir.LitU32(0), ir.LitU32(16), ir.RowMajor)
		return b.Program()
	}()
	full := profile(h200())
	noF16, noBF16 := full, full
	noF16.SupportsF16, noBF16.SupportsBF16 = false, false
	for _, c := range []struct {
		p      *ir.Program
		prof   pluginapi.DeviceProfile
		reject string
	}{
		{f16Buffer, full, ""}, {f16Buffer, noF16, "f16 arithmetic and storage"}, {f16Buffer, noBF16, ""},
		{bf16Cast, noBF16, "bf16 storage"}, {bf16Cast, noF16, ""},
		{bf16Matrix, noBF16, "bf16 storage"}, {bf16Matrix, full, ""},
		{addOne(), pluginapi.DeviceProfile{}, ""},
	} {
		err := checkCapabilities(c.p, c.prof, 0, "H200")
		var rejected *pluginapi.RejectedError
		switch {
		case c.reject == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", c.p.Name, err)
		case c.reject != "" && (!errors.As(err, &rejected) || !strings.Contains(err.Error(), c.reject) || !strings.Contains(err.Error(), "Fix:")):
			t.Errorf("%s: %v, want a RejectedError naming %q with a Fix", c.p.Name, err, c.reject)
		}
	}
}

// TestSixteenBitBindings: 16-bit buffers take 2-byte elements: an odd count of
// them is a whole input, a fixed count is 2 bytes an element (the SDK rejects
// the others), and a write buffer's bytes are 2 per element.
func TestSixteenBitBindings(t *testing.T) {
	b := ir.NewBuilder("bind16", 64, 1, 1)
	b.Buffer("in", ir.BF16, ir.Read)
	b.FixedBuffer("fixed", ir.F16, ir.ReadWrite, 3)
	b.Buffer("out", ir.F16, ir.Write)
	p := b.Program()
	lim := gpukit.BindingLimit{Bytes: 1 << 20, Text: "adapter %d's %d"}
	wrap := func(bd gpukit.Binding) gpukit.Binding { return bd }
	binds, err := gpukit.SizeBindings(ID, p, &pluginapi.DispatchRequest{Inputs: [][]byte{make([]byte, 14), make([]byte, 6), nil}, OutputCounts: []uint32{0, 0, 5}}, lim, wrap)
	if err != nil {
		t.Fatal(err)
	}
	if binds[0].Count != 7 || binds[1].Count != 3 || binds[2].Count != 5 || binds[2].Bytes() != 10 {
		t.Errorf("counts %d %d %d, bytes %d; want 7, 3, 5 and 10", binds[0].Count, binds[1].Count, binds[2].Count, binds[2].Bytes())
	}
	for _, inputs := range [][][]byte{{make([]byte, 13), make([]byte, 6), nil}, {make([]byte, 14), make([]byte, 12), nil}} {
		if err := pluginapi.CheckLaunch(p, p.WorkgroupSize, &pluginapi.DispatchRequest{Inputs: inputs, OutputCounts: []uint32{0, 0, 5}}); err == nil || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("inputs of %d and %d bytes: %v, want a rejection with a Fix", len(inputs[0]), len(inputs[1]), err)
		}
	}
	if outs := gpukit.UnchangedOutputs([]*gpukit.Binding{&binds[1], &binds[2]}); len(outs[0]) != 6 || len(outs[1]) != 10 {
		t.Errorf("unchanged outputs of %d and %d bytes, want 6 and 10", len(outs[0]), len(outs[1]))
	}
}

package runs

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

func le16(vs ...uint16) []byte {
	var out []byte
	for _, v := range vs {
		out = binary.LittleEndian.AppendUint16(out, v)
	}
	return out
}

// TestParseValues pins --input NAME=V,V,...: values parsed by the buffer's
// type, f16 and bf16 rounded once to nearest even from the decimal.
func TestParseValues(t *testing.T) {
	for _, c := range []struct {
		t    ir.Type
		text string
		want []byte
	}{
		// 1 + 2^-11 is a tie between 1 and 1 + 2^-10 in f16: even is 1.
		// 1 + 3·2^-11 ties to 1 + 2^-9 (even); 65520 overflows to inf.
		{ir.F16, "1, 1.00048828125, 1.00146484375, 65504, 65520, -0, nan", le16(0x3C00, 0x3C00, 0x3C02, 0x7BFF, 0x7C00, 0x8000, 0x7E00)},
		{ir.BF16, "1, 1.00390625, -2.5, inf", le16(0x3F80, 0x3F80, 0xC020, 0x7F80)},
		{ir.F32, "1.5, -inf", []byte{0, 0, 0xC0, 0x3F, 0, 0, 0x80, 0xFF}},
		{ir.I32, "-1", []byte{0xFF, 0xFF, 0xFF, 0xFF}},
		{ir.U32, "7", []byte{7, 0, 0, 0}},
	} {
		got, err := parseValues(c.t, c.text)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("parseValues(%s, %q) = %x, %v; want %x", c.t, c.text, got, err, c.want)
		}
	}
	for _, bad := range []struct {
		t    ir.Type
		text string
	}{{ir.F16, "1,x"}, {ir.U32, "-1"}, {ir.F32, ""}} {
		if _, err := parseValues(bad.t, bad.text); err == nil {
			t.Errorf("parseValues(%s, %q) accepted", bad.t, bad.text)
		}
	}
}

// TestConfigureKernelPassesParameters pins that --spec names of a kernel
// without options set its program's parameters, parsed by their types, and
// that the case follows them.
func TestConfigureKernelPassesParameters(t *testing.T) {
	k, _ := kernels.Lookup("vector_add")
	built, spec, err := ConfigureKernel(k, []string{"epi=2"})
	if err != nil || built.OpID != k.OpID {
		t.Fatalf("ConfigureKernel: %v, %v", built.OpID, err)
	}
	if v, ok := spec.Get("epi"); !ok || v != ir.SpecU32(2) {
		t.Fatalf("spec %v", spec.Names())
	}
	j := KernelJobWith(built, 1000, 1, "", spec)
	if v, _ := j.Launch.Spec.Get("epi"); v != ir.SpecU32(2) || j.Launch.Invocations != [3]uint32{500, 1, 1} {
		t.Errorf("launch spec %v, invocations %v; want epi 2 over 500 invocations", j.Launch.Spec.Names(), j.Launch.Invocations)
	}
	if _, _, err := ConfigureKernel(k, []string{"nope=1"}); err == nil || !strings.Contains(err.Error(), `no parameter "nope"`) {
		t.Errorf("an unknown name: %v", err)
	}
}

// TestFileJob16BitSizes pins that --size and --zero count elements of a
// 16-bit buffer (2 bytes each) and that --input takes inline values.
func TestFileJob16BitSizes(t *testing.T) {
	const prog = `{"kiln": 1, "name": "t.f16", "workgroup_size": [1, 1, 1],
  "buffers": [{"name": "x", "binding": 0, "type": "f16", "access": "read"},
              {"name": "z", "binding": 1, "type": "bf16", "access": "read"},
              {"name": "out", "binding": 2, "type": "f16", "access": "write"}],
  "body": [{"store": "out", "index": {"u32": 0}, "value": {"load": "x", "index": {"u32": 0}}}]}`
	dir := t.TempDir()
	path := writeFile(t, dir, "p.json", []byte(prog))
	j, err := FileJob(FileArgs{Path: path, Inputs: []string{"x=1.5,-2"}, Zero: []string{"z=3"}, Sizes: []string{"out=5"}, Grid: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(j.Launch.Inputs[0], le16(0x3E00, 0xC000)) || len(j.Launch.Inputs[1]) != 6 || j.Launch.OutputCounts[2] != 5 {
		t.Errorf("inputs %x, output counts %v", j.Launch.Inputs, j.Launch.OutputCounts)
	}
	lim := Limits{MaxBinding: 9, Backend: "test"}
	if _, err := FileJob(FileArgs{Path: path, Inputs: []string{"x=1"}, Zero: []string{"z"}, Sizes: []string{"out=5"}, Grid: "1", Limits: lim}); err == nil {
		t.Error("5 f16 elements (10 bytes) passed a 9-byte limit")
	}
	paths, err := WriteOutputs(filepath.Join(dir, "out"), j.Program, [][]byte{le16(0x3C00, 0x7E00)})
	if err != nil || len(paths) != 1 || !strings.HasSuffix(paths[0], "out.bin") {
		t.Errorf("WriteOutputs: %v, %v", paths, err)
	}
}

// TestStrictCoversMatrices pins that --strict reaches IR v1.2's matrix
// checks: a matrix stored before anything wrote it fails the run, naming the
// hazard, and the same program with a fill passes.
func TestStrictCoversMatrices(t *testing.T) {
	build := func(fill bool) *ir.Program {
		b := ir.NewBuilder("t.strict.matrix", 32, 1, 1)
		o := b.Buffer("out", ir.F32, ir.Write)
		m := b.Matrix("m", ir.F32, 16, 16)
		if fill {
			b.MatrixFill(m, ir.LitF32(1))
		}
		b.MatrixStore(m, o, ir.LitU32(0), ir.LitU32(16), ir.RowMajor)
		return b.MustBuild()
	}
	job := func(p *ir.Program) Job {
		return Job{Program: p, Launch: host.Launch{Work: host.Work{Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{256}}}}
	}
	err := CheckStrict(context.Background(), job(build(false)))
	if err == nil || !strings.Contains(err.Error(), "--strict") || !strings.Contains(err.Error(), `"m"`) {
		t.Fatalf("a store of a never-written matrix under --strict: %v", err)
	}
	if err := CheckStrict(context.Background(), job(build(true))); err != nil {
		t.Errorf("a filled matrix under --strict: %v", err)
	}
}

// TestConfigureKernelOptions pins `kiln run --kernel matmul_tc --spec
// type=f16`: options build the kernel, bad values say how to fix them.
func TestConfigureKernelOptions(t *testing.T) {
	k, _ := kernels.Lookup("matmul_tc")
	built, spec, err := ConfigureKernel(k, []string{"type=f16", "tk=16"})
	if err != nil || built.OpID != "kiln.matrix.matmul_tc.f16" || spec.Len() != 0 {
		t.Fatalf("ConfigureKernel(type=f16, tk=16) = %q, %v, %v", built.OpID, spec.Names(), err)
	}
	if a, _ := built.Program().Buffer("a"); a.Type != ir.F16 {
		t.Errorf("buffer a is %s", a.Type)
	}
	j := KernelJobWith(built, 33, 1, "", spec)
	if len(j.Launch.Inputs[0]) != 2*33*33 {
		t.Errorf("input a has %d bytes, want 2·33·33", len(j.Launch.Inputs[0]))
	}
	for _, c := range []struct{ spec, want string }{
		{"type=f64", "is not a type"},
		{"tf32=maybe", "is not true or false"},
		{"tf32=true", "tf32 is a precision for f32 operands"},
		{"tm=7", "tm=7 is not a matrix side"},
	} {
		if _, _, err := ConfigureKernel(k, []string{c.spec}); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("--spec %s: %v, want %q with a Fix", c.spec, err, c.want)
		}
	}
}

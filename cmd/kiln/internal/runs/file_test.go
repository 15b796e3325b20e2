package runs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// saxpyJSON is the example program of docs/design.md plus a write buffer without a count.
const saxpyJSON = `{
  "kiln": 1,
  "name": "example.saxpy.f32",
  "workgroup_size": [64, 1, 1],
  "params":  [{"name": "a", "type": "f32", "default": 2.0},
              {"name": "n", "type": "u32", "default": 0},
              {"name": "k", "type": "i32", "default": 0},
              {"name": "on", "type": "bool", "default": true}],
  "buffers": [{"name": "x", "binding": 0, "type": "f32", "access": "read"},
              {"name": "y", "binding": 1, "type": "f32", "access": "read_write"},
              {"name": "out", "binding": 2, "type": "u32", "access": "write"}],
  "shared":  [],
  "body": [
    {"let": "i", "value": {"builtin": "global_id", "axis": 0}},
    {"if": {"lt": [{"local": "i"}, {"len": "y"}]}, "then": [
      {"store": "y", "index": {"local": "i"},
       "value": {"add": [{"mul": [{"param": "a"}, {"load": "x", "index": {"local": "i"}}]},
                         {"load": "y", "index": {"local": "i"}}]}},
      {"store": "out", "index": {"local": "i"}, "value": {"local": "i"}}]}
  ]
}`

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFileJobBuildsTheLaunch(t *testing.T) {
	dir := t.TempDir()
	args := FileArgs{
		Path:          writeFile(t, dir, "prog.json", []byte(saxpyJSON)),
		Inputs:        []string{"x=@" + writeFile(t, dir, "x.bin", make([]byte, 16)), "y=@" + writeFile(t, dir, "y.bin", make([]byte, 16))},
		Sizes:         []string{"out=4"},
		Spec:          []string{"a=2.5", "n=0x10", "k=-3", "on=false"},
		Grid:          "2",
		WorkgroupSize: "32,1,1",
		Backend:       "cpu-ref",
	}
	j, err := FileJob(args)
	if err != nil {
		t.Fatal(err)
	}
	l := j.Launch
	if l.Backend != "cpu-ref" || l.Grid != [3]uint32{2, 1, 1} || l.WorkgroupSize != [3]uint32{32, 1, 1} {
		t.Errorf("launch %+v", l)
	}
	if len(l.Inputs[0]) != 16 || len(l.Inputs[1]) != 16 || l.Inputs[2] != nil || l.OutputCounts[2] != 4 {
		t.Errorf("inputs %v, counts %v", l.Inputs, l.OutputCounts)
	}
	for name, want := range map[string]ir.SpecValue{"a": ir.SpecF32(2.5), "n": ir.SpecU32(16), "k": ir.SpecI32(-3), "on": ir.SpecBool(false)} {
		if got, ok := l.Spec.Get(name); !ok || got != want {
			t.Errorf("spec %s = %v, want %v", name, got, want)
		}
	}
	args.Inputs, args.Zero = args.Inputs[:1], []string{"y=5"}
	if j, err = FileJob(args); err != nil || len(j.Launch.Inputs[1]) != 20 {
		t.Fatalf("--zero y=5: %d bytes, %v", len(j.Launch.Inputs[1]), err)
	}
	args.Grid, args.Invocations = "", "100,1,1"
	if j, err = FileJob(args); err != nil || j.Launch.Invocations != [3]uint32{100, 1, 1} {
		t.Fatalf("invocations: %+v, %v", j.Launch.Invocations, err)
	}
}

func TestFileJobErrorsSayHowToFix(t *testing.T) {
	dir := t.TempDir()
	prog := writeFile(t, dir, "prog.json", []byte(saxpyJSON))
	x := writeFile(t, dir, "x.bin", make([]byte, 16))
	base := func() FileArgs {
		return FileArgs{Path: prog, Inputs: []string{"x=@" + x}, Zero: []string{"y"}, Sizes: []string{"out=4"}, Grid: "1"}
	}
	for name, tc := range map[string]struct {
		mutate func(*FileArgs)
		want   string
	}{
		"missing file":     {func(a *FileArgs) { a.Path = filepath.Join(dir, "nope.json") }, "reading program"},
		"bad json":         {func(a *FileArgs) { a.Path = writeFile(t, dir, "bad.json", []byte("{")) }, "bad.json"},
		"input not a pair": {func(a *FileArgs) { a.Inputs = []string{"x"} }, "NAME=VALUE"},
		"input no @":       {func(a *FileArgs) { a.Inputs = []string{"x=" + x} }, "@FILE"},
		"input unknown":    {func(a *FileArgs) { a.Inputs = []string{"zz=@" + x} }, "x, y"},
		"input to write":   {func(a *FileArgs) { a.Inputs = []string{"out=@" + x} }, "no read or read_write buffer"},
		"input twice":      {func(a *FileArgs) { a.Inputs = []string{"x=@" + x, "x=@" + prog} }, `buffer "x" already has --input x=@`},
		"size twice":       {func(a *FileArgs) { a.Sizes = []string{"out=4", "out=8"} }, `buffer "out" already has --size out=4`},
		"input missing":    {func(a *FileArgs) { a.Inputs = []string{"x=@" + filepath.Join(dir, "none")} }, "existing file"},
		"size unknown":     {func(a *FileArgs) { a.Sizes = []string{"x=4", "out=4"} }, "no write buffer"},
		"size bad":         {func(a *FileArgs) { a.Sizes = []string{"out=lots"} }, "not an element count"},
		"size missing":     {func(a *FileArgs) { a.Sizes = nil }, "--size out=<elements>"},
		"spec unknown":     {func(a *FileArgs) { a.Spec = []string{"b=1"} }, "a, n, k, on"},
		"spec type":        {func(a *FileArgs) { a.Spec = []string{"n=-1"} }, "not a u32"},
		"grid bad":         {func(a *FileArgs) { a.Grid = "1,x" }, "axis 1"},
		"grid too long":    {func(a *FileArgs) { a.Grid = "1,1,1,1" }, "more than 3"},
		"no grid":          {func(a *FileArgs) { a.Grid = "" }, "--grid"},
		"no input":         {func(a *FileArgs) { a.Zero = nil }, "read_write buffer \"y\" has no --input"},
		"zero a write":     {func(a *FileArgs) { a.Zero = []string{"y", "out"} }, "no read or read_write buffer \"out\""},
		"zero and input":   {func(a *FileArgs) { a.Zero = []string{"x", "y"} }, "also has an --input"},
		"zero twice":       {func(a *FileArgs) { a.Zero = []string{"y", "y=2"} }, "zeroed twice"},
		"zero count bad":   {func(a *FileArgs) { a.Zero = []string{"y=many"} }, "not an element count"},
		"zero too big":     {func(a *FileArgs) { a.Zero = []string{"y=4000000000"}; a.Limits.MaxBinding = 1 << 30 }, "storage binding limit"},
		"size too big":     {func(a *FileArgs) { a.Sizes = []string{"out=4000000000"}; a.Limits.MemAvailable = 1 << 30 }, "only 1 GiB is available"},
		"input too big":    {func(a *FileArgs) { a.Limits.MaxBinding = 8; a.Limits.Backend = "cpu-ref:0" }, "cpu-ref:0's storage binding limit"},
	} {
		a := base()
		tc.mutate(&a)
		_, err := FileJob(a)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Fix") {
			t.Errorf("%s: got %v, want an error saying %q with a Fix", name, err, tc.want)
		}
	}
}

func TestWriteOutputs(t *testing.T) {
	p, err := ir.ParseJSON([]byte(saxpyJSON))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "new", "dir")
	paths, err := WriteOutputs(dir, p, [][]byte{{1, 2, 3, 4}, {5, 6, 7, 8}})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || filepath.Base(paths[0]) != "y.bin" || filepath.Base(paths[1]) != "out.bin" {
		t.Fatalf("paths %v, want y.bin and out.bin", paths)
	}
	if data, err := os.ReadFile(paths[1]); err != nil || string(data) != "\x05\x06\x07\x08" {
		t.Fatalf("out.bin = %v, %v", data, err)
	}
}

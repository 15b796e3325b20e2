package runs

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir/interp"
)

// uniformJSON scales x by the uniform s into out, for the first n elements.
const uniformJSON = `{
  "kiln": 1,
  "name": "example.scale",
  "workgroup_size": [64, 1, 1],
  "uniforms": [{"name": "n", "type": "u32"}, {"name": "s", "type": "f32"}, {"name": "k", "type": "i32"}],
  "buffers": [{"name": "x", "binding": 0, "type": "f32", "access": "read"},
              {"name": "out", "binding": 1, "type": "f32", "access": "write", "count": 4}],
  "body": [
    {"let": "i", "value": {"builtin": "global_id", "axis": 0}},
    {"if": {"lt": [{"local": "i"}, {"uniform": "n"}]}, "then": [
      {"store": "out", "index": {"local": "i"},
       "value": {"mul": [{"uniform": "s"}, {"load": "x", "index": {"local": "i"}}]}}]}
  ]
}`

func TestFileJobUniforms(t *testing.T) {
	dir := t.TempDir()
	args := FileArgs{
		Path:     writeFile(t, dir, "prog.json", []byte(uniformJSON)),
		Inputs:   []string{"x=@" + writeFile(t, dir, "x.bin", make([]byte, 16))},
		Uniforms: []string{"s=2.5", "n=0x3", "k=-2"},
		Grid:     "1",
	}
	j, err := FileJob(args)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{3, 0, 0, 0, 0, 0, 0x20, 0x40, 0xfe, 0xff, 0xff, 0xff}
	if !bytes.Equal(j.Launch.Uniforms, want) {
		t.Errorf("uniform block % x, want % x (declaration order)", j.Launch.Uniforms, want)
	}
	for name, c := range map[string]struct {
		uniforms []string
		want     string
	}{
		"missing":   {[]string{"s=1", "n=1"}, `uniform "k" (i32) has no value. Fix: pass --uniform k=<i32>`},
		"unknown":   {[]string{"s=1", "n=1", "k=1", "m=1"}, `no uniform "m". Fix: name one of: n, s, k`},
		"twice":     {[]string{"s=1", "n=1", "k=1", "n=2"}, `set twice`},
		"bad value": {[]string{"s=1", "n=-1", "k=1"}, `--uniform n=-1: ir: "-1" is not a u32 value`},
		"no equals": {[]string{"s"}, `expected NAME=VALUE`},
	} {
		a := args
		a.Uniforms = c.uniforms
		if _, err := FileJob(a); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s: error %v, want %q and a Fix", name, err, c.want)
		}
	}
}

// racyJSON reads its neighbour's shared slot with no barrier after the store.
const racyJSON = `{
  "kiln": 1,
  "name": "example.racy",
  "workgroup_size": [8, 1, 1],
  "buffers": [{"name": "out", "binding": 0, "type": "u32", "access": "write", "count": 8}],
  "shared": [{"name": "tile", "type": "u32", "count": 8}],
  "body": [
    {"let": "l", "value": {"builtin": "local_id", "axis": 0}},
    {"store": "tile", "index": {"local": "l"}, "value": {"local": "l"}},
    {"store": "out", "index": {"local": "l"},
     "value": {"load": "tile", "index": {"rem": [{"add": [{"local": "l"}, {"u32": 1}]}, {"u32": 8}]}}}
  ]
}`

func TestCheckStrict(t *testing.T) {
	dir := t.TempDir()
	j, err := FileJob(FileArgs{Path: writeFile(t, dir, "racy.json", []byte(racyJSON)), Invocations: "8"})
	if err != nil {
		t.Fatal(err)
	}
	err = CheckStrict(context.Background(), j)
	var se *interp.StrictError
	if !errors.As(err, &se) || se.Hazard != interp.ReadAfterWrite || !strings.Contains(err.Error(), "--strict: example.racy") {
		t.Fatalf("want a read-after-write report, got %v", err)
	}
	j, err = FileJob(FileArgs{Path: writeFile(t, dir, "prog.json", []byte(uniformJSON)), Grid: "1",
		Inputs: []string{"x=@" + writeFile(t, dir, "x.bin", make([]byte, 16))}, Uniforms: []string{"n=4", "s=1", "k=0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckStrict(context.Background(), j); err != nil {
		t.Fatalf("a race-free program: %v", err)
	}
}

package runs

import (
	"fmt"
	"strings"
	"testing"
)

func FuzzTriple(f *testing.F) {
	for _, s := range []string{"", "1", "4,2", "1,2,3", "1,2,3,4", " 7 , 8", "x", "-1", "4294967296"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := triple("--grid", s)
		if err != nil {
			if !strings.Contains(err.Error(), "Fix:") {
				t.Fatalf("error %q has no Fix", err)
			}
			return
		}
		if s == "" {
			if v != [3]uint32{} {
				t.Fatalf("empty string gave %v", v)
			}
			return
		}
		again, err := triple("--grid", fmt.Sprintf("%d,%d,%d", v[0], v[1], v[2]))
		if err != nil || again != v {
			t.Fatalf("%q → %v does not round-trip: %v, %v", s, v, again, err)
		}
	})
}

// FuzzUniformFlags: any --uniform values either pack into a block of the program's
// size or fail with a Fix.
func FuzzUniformFlags(f *testing.F) {
	for _, s := range []string{"n=1;s=2.5;k=-1", "n=0x10;s=nan;k=0", "n=-1", "s=;n=;k=", "n=1;n=2", "x=1", "=", "k=2147483648"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dir := t.TempDir()
		path := writeFile(t, dir, "prog.json", []byte(uniformJSON))
		j, err := FileJob(FileArgs{Path: path, Grid: "1", Uniforms: strings.Split(s, ";")})
		if err != nil {
			if !strings.Contains(err.Error(), "Fix:") {
				t.Fatalf("error %q has no Fix", err)
			}
			return
		}
		if len(j.Launch.Uniforms) != j.Program.UniformBytes() {
			t.Fatalf("uniform block of %d bytes for %d uniforms", len(j.Launch.Uniforms), len(j.Program.Uniforms))
		}
	})
}

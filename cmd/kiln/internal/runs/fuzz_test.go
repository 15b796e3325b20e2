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

package pluginapi

import "testing"

// TestViewOffset pins ViewOffset's bounds: a view inside mem gives its offset;
// one that starts before, runs past the end, lies elsewhere or is empty does
// not.
func TestViewOffset(t *testing.T) {
	big := make([]byte, 1024)
	mem := big[256:768]
	for _, c := range []struct {
		name string
		view []byte
		off  int
		ok   bool
	}{
		{"start", mem[:10], 0, true},
		{"inside", mem[100:200], 100, true},
		{"whole", mem, 0, true},
		{"at the end", mem[511:512], 511, true},
		{"before", big[200:300], 0, false},
		{"past the end", big[700:800], 0, false},
		{"elsewhere", make([]byte, 16), 0, false},
		{"empty", mem[5:5], 0, false},
	} {
		if off, ok := ViewOffset(mem, c.view); off != c.off || ok != c.ok {
			t.Errorf("%s: ViewOffset = %d, %v; want %d, %v", c.name, off, ok, c.off, c.ok)
		}
	}
	if _, ok := ViewOffset(nil, mem); ok {
		t.Error("a view inside a nil segment")
	}
}

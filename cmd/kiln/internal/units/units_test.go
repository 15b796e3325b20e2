package units

import (
	"math"
	"testing"
)

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.5 KiB"},
		{256 << 20, "256 MiB"},
		{1<<30 + 1<<29, "1.5 GiB"},
		{5 << 40, "5 TiB"},
		{math.MaxUint64, "16 EiB"},
	} {
		if got := Bytes(c.n); got != c.want {
			t.Errorf("Bytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := Bytes(int64(-5)); got != "-5 B" {
		t.Errorf("Bytes(-5) = %q", got)
	}
	if got := Bytes(int64(3 << 20)); got != "3 MiB" {
		t.Errorf("Bytes(int64 3 MiB) = %q", got)
	}
}

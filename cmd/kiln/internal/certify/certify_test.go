package certify

import (
	"fmt"
	"testing"
)

func TestClassSizes(t *testing.T) {
	for _, tc := range []struct {
		largest, n int
		want       string
	}{
		{100000, 3, "[390 6250 100000]"},
		{100, 3, "[6 100]"},
		{0, 3, "[0]"},
		{4096, 1, "[4096]"},
		{4096, 5, "[1 16 256 4096]"},
	} {
		if got := fmt.Sprint(ClassSizes(tc.largest, tc.n)); got != tc.want {
			t.Errorf("ClassSizes(%d, %d) = %s, want %s", tc.largest, tc.n, got, tc.want)
		}
	}
}

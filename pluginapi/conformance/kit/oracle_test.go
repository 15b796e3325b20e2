package kit

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir/kernels"
)

// TestMatchOracle: the reference's own outputs match; one changed element does
// not, and the error names it.
func TestMatchOracle(t *testing.T) {
	k, _ := kernels.Lookup("vector_add")
	c := k.NewCase(rand.New(rand.NewPCG(3, 4)), 100)
	want := k.Reference(c)
	if err := MatchOracle(k.Program(), c, want); err != nil {
		t.Fatalf("the reference's outputs: %v", err)
	}
	bad := [][]byte{append([]byte(nil), want[0]...)}
	bad[0][4*17] ^= 0x40
	if err := MatchOracle(k.Program(), c, bad); err == nil || !strings.Contains(err.Error(), "[17]") {
		t.Fatalf("one changed element: %v, want an error naming out[17]", err)
	}
}

package kernels

import (
	"math"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/verify"
)

// TestChecks pins the corpus's checks: exact compares the named outputs bit for
// bit (any NaN for any NaN on f32), within under its bound, and both name the
// buffer of a mismatch and refuse a wrong number of outputs.
func TestChecks(t *testing.T) {
	f := func(v ...float32) []byte { return F32Bytes(v) }
	nan := float32(math.NaN())
	ex := exact(ir.F32, "a", "b")
	if err := ex([][]byte{f(1, nan), f(2)}, [][]byte{f(1, -nan), f(2)}); err != nil {
		t.Errorf("exact rejected equal outputs: %v", err)
	}
	if err := ex([][]byte{f(1), f(math.Nextafter32(2, 3))}, [][]byte{f(1), f(2)}); err == nil || !strings.Contains(err.Error(), "b[0]: got 2.0000002") {
		t.Errorf("exact: one ULP off in b: %v", err)
	}
	if err := ex([][]byte{f(1)}, [][]byte{f(1)}); err == nil || !strings.Contains(err.Error(), "2 output buffers (a, b)") {
		t.Errorf("exact: one buffer for two: %v", err)
	}
	in := within(ir.F32, verify.Bound{Abs: 0.25}, "y")
	if err := in([][]byte{f(1.25)}, [][]byte{f(1)}); err != nil {
		t.Errorf("within 0.25: %v", err)
	}
	if err := in([][]byte{f(1.5)}, [][]byte{f(1)}); err == nil || !strings.Contains(err.Error(), "0.25 absolute") {
		t.Errorf("within 0.25: 0.5 off: %v", err)
	}
	if err := exact(ir.U32, "n")([][]byte{U32Bytes([]uint32{0x7FC00000})}, [][]byte{U32Bytes([]uint32{0x7FC00001})}); err == nil {
		t.Error("exact on u32 accepted different bits")
	}
}

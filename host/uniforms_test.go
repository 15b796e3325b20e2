package host

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// TestPlanUniforms: the uniform block travels in the request, and a block of the
// wrong size is a LaunchError before any plugin sees it.
func TestPlanUniforms(t *testing.T) {
	b := ir.NewBuilder("test.uniforms", 64, 1, 1)
	n := b.Uniform("n", ir.U32)
	b.Uniform("scale", ir.F32)
	out := b.Buffer("out", ir.U32, ir.Write)
	b.Store(out, ir.GlobalID(0), n)
	p := b.MustBuild()
	block, err := ir.EncodeUniforms(p, map[string]ir.Literal{"n": ir.LitU32(3), "scale": ir.LitF32(2)})
	if err != nil {
		t.Fatal(err)
	}
	req, _, err := plan(p, [3]uint32{}, Work{Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{64}, Uniforms: block})
	if err != nil || !bytes.Equal(req.Uniforms, block) {
		t.Fatalf("request uniforms % x (%v), want % x", req.Uniforms, err, block)
	}
	for _, bad := range [][]byte{nil, block[:4], append(block, 0, 0, 0, 0)} {
		_, _, err := plan(p, [3]uint32{}, Work{Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{64}, Uniforms: bad})
		var le *LaunchError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), "8 bytes of uniforms") || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%d bytes of uniforms: got %v, want a LaunchError", len(bad), err)
		}
	}
}

package client

import (
	"bytes"
	"context"
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
)

// TestWireDispatchCarriesUniforms: the uniform block reaches the backend byte for
// byte, and an empty block stays empty.
func TestWireDispatchCarriesUniforms(t *testing.T) {
	fake := &fakeBackend{}
	b := serveInProcess(t, fake)
	block := []byte{5, 0, 0, 0, 0, 0, 0xc0, 0x3f}
	for _, u := range [][]byte{block, nil} {
		if _, err := b.Dispatch(context.Background(), &pluginapi.DispatchRequest{Pipeline: 1, Grid: [3]uint32{1, 1, 1}, Uniforms: u}); err != nil {
			t.Fatal(err)
		}
	}
	if got := fake.dispatches[0].Uniforms; !bytes.Equal(got, block) {
		t.Errorf("backend saw uniforms % x, want % x", got, block)
	}
	if got := fake.dispatches[1].Uniforms; len(got) != 0 {
		t.Errorf("backend saw uniforms % x for a dispatch without any", got)
	}
}

package kernels

import (
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/verify"
)

// exact is a Check comparing the outputs named names (in binding order) with the
// kernel's reference bit for bit, as elements of type t: integers bit for bit,
// f32 under the zero verify.Bound (equal bits, any NaN for any NaN, a flushed
// denormal).
func exact(t ir.Type, names ...string) func(got, want [][]byte) error {
	return within(t, verify.Bound{}, names...)
}

// within is a Check comparing the outputs named names, elements of type t, with
// the kernel's reference under b (verify.Buffers).
func within(t ir.Type, b verify.Bound, names ...string) func(got, want [][]byte) error {
	bufs := make([]verify.Buffer, len(names))
	for i, n := range names {
		bufs[i] = verify.Buffer{Name: n, Type: t}
	}
	return func(got, want [][]byte) error {
		_, err := verify.Buffers(bufs, b, got, want)
		return err
	}
}

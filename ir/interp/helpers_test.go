package interp

import (
	"context"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

func u32Bytes(v ...uint32) []byte { return kernels.U32Bytes(v) }

func i32Bytes(v ...int32) []byte {
	u := make([]uint32, len(v))
	for i, x := range v {
		u[i] = uint32(x)
	}
	return u32Bytes(u...)
}

func f32Bytes(v ...float32) []byte { return kernels.F32Bytes(v) }

func bytesU32(b []byte) []uint32 { return kernels.BytesU32(b) }

// mustRun compiles and runs p, failing the test on any error. The generous deadline
// turns a run that never ends into a failure instead of a hung test.
func mustRun(t testing.TB, p *ir.Program, opts Options, l Launch) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outs, err := Run(ctx, p, opts, l)
	if err != nil {
		t.Fatalf("run %s: %v", p.Name, err)
	}
	return outs
}

package backend

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
	"github.com/kiln-dev/kiln/pluginapi"
)

// wideIncr16 adds 1 to every element of an f16 read_write buffer, eight
// contiguous elements per invocation: a run of eight loads and one of eight
// stores, which the emitter moves as uvec4 accesses through a view of the
// binding where aligned and in bounds (spirv/wide.go).
func wideIncr16() *ir.Program {
	b := ir.NewBuilder("test.wide_incr16", 64, 1, 1)
	x := b.Buffer("x", ir.F16, ir.ReadWrite)
	at := b.Let("at", ir.Mul(ir.GlobalID(0), ir.LitU32(8)))
	for k := range 8 {
		b.Let(fmt.Sprintf("v%d", k), ir.Load(x, ir.Add(at, ir.LitU32(uint32(k)))))
	}
	for k := range 8 {
		b.Store(x, ir.Add(at, ir.LitU32(uint32(k))), ir.Add(ir.Local(fmt.Sprintf("v%d", k)), ir.LitF16(1)))
	}
	return b.MustBuild()
}

// TestWideAccessesOnTheDevice runs wideIncr16 on the device (lavapipe under the
// validation layer in `make test`) over ranges of a resident buffer that start
// at every multiple of 4 bytes up to 28 (16-byte aligned or not: the backend
// binds an unaligned one through an aligned scratch copy) with odd element
// counts and tails, twice in one submit: every element of each range is
// incremented twice, and the bytes around the ranges are untouched.
func TestWideAccessesOnTheDevice(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		p := compileT(t, b, wideIncr16())
		ctx := context.Background()
		const total = 256 // elements in the buffer
		for _, off := range []uint64{0, 4, 8, 12, 16, 28} {
			for _, n := range []uint64{1, 7, 8, 9, 37, 64, 101} {
				init := make([]byte, 2*total)
				for i := range total {
					binary.LittleEndian.PutUint16(init[2*i:], uint16(half.NewFloat16(float32(i%50))))
				}
				a, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: uint64(len(init))})
				if err != nil {
					t.Fatal(err)
				}
				if err := b.WriteBuffer(ctx, a.Buffer, 0, init); err != nil {
					t.Fatal(err)
				}
				cmd := pluginapi.DispatchCommand{Pipeline: p, Grid: [3]uint32{uint32((n + 8*64 - 1) / (8 * 64)), 1, 1},
					Bindings: []pluginapi.BufferRange{{Buffer: a.Buffer, Offset: off, Size: 2 * n}}}
				if _, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{cmd, cmd}}); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(init))
				if err := b.ReadBuffer(ctx, a.Buffer, 0, got); err != nil {
					t.Fatal(err)
				}
				want := append([]byte(nil), init...)
				for i := off / 2; i < off/2+n; i++ {
					v := half.Float16(binary.LittleEndian.Uint16(want[2*i:]))
					binary.LittleEndian.PutUint16(want[2*i:], uint16(half.NewFloat16(v.Float32()+2)))
				}
				if !bytes.Equal(got, want) {
					t.Errorf("offset %d, %d elements: the buffer differs from two increments of the range", off, n)
				}
				if err := b.FreeBuffer(ctx, a.Buffer); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

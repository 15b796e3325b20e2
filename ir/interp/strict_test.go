package interp

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// strictRun runs p on one workgroup in strict mode and returns the StrictError it
// reports (nil when it reports none) and the outputs.
func strictRun(t *testing.T, p *ir.Program, inputs ...[]byte) (*StrictError, []uint32) {
	t.Helper()
	outs, err := Run(context.Background(), p, Options{Strict: true}, Launch{Grid: [3]uint32{1, 1, 1}, Inputs: inputs})
	if err == nil {
		return nil, bytesU32(outs[len(outs)-1])
	}
	var se *StrictError
	if !errors.As(err, &se) {
		t.Fatalf("want a *StrictError, got %v", err)
	}
	if !strings.Contains(err.Error(), "Fix: ") {
		t.Errorf("strict error lacks a Fix: %v", err)
	}
	return se, nil
}

// staged starts a program of n lanes in which each lane copies its element of
// the fixed buffer in (n u32) into the shared array tile (n u32), followed by a
// barrier when withBarrier; out is a fixed u32 buffer of outs elements.
func staged(name string, n, outs uint32, withBarrier bool) (b *ir.Builder, out, tile string) {
	b = ir.NewBuilder(name, n, 1, 1)
	in := b.FixedBuffer("in", ir.U32, ir.Read, n)
	out = b.FixedBuffer("out", ir.U32, ir.Write, outs)
	tile = b.Shared("tile", ir.U32, n)
	b.Store(tile, lid, ir.Load(in, lid))
	if withBarrier {
		b.Barrier()
	}
	return b, out, tile
}

// reduction sums 16 inputs with a shared-memory tree; withBarriers leaves out the
// barriers between the steps when false.
func reduction(withBarriers bool) *ir.Program {
	b, out, tile := staged("test.reduce", 16, 1, withBarriers)
	for s := uint32(8); s >= 1; s /= 2 {
		b.If(ir.Lt(lid, u32(s)), func(then *ir.Block) {
			then.Store(tile, lid, ir.Add(ir.Load(tile, lid), ir.Load(tile, ir.Add(lid, u32(s)))))
		})
		if withBarriers {
			b.Barrier()
		}
	}
	b.If(ir.Eq(lid, u32(0)), func(then *ir.Block) { then.Store(out, u32(0), ir.Load(tile, u32(0))) })
	return b.MustBuild()
}

func TestStrictMissingBarrier(t *testing.T) {
	in := u32Bytes(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
	// Lockstep execution hides the bug: without strict mode the answer is "right".
	outs := mustRun(t, reduction(false), Options{}, Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{in}})
	if got := bytesU32(outs[0])[0]; got != 136 {
		t.Fatalf("lockstep sum %d, want 136", got)
	}
	se, _ := strictRun(t, reduction(false), in)
	if se == nil {
		t.Fatal("strict mode accepted a reduction without barriers")
	}
	if se.Hazard != ReadAfterWrite || se.Array != "tile" || se.Statement != "body[1].then[0]" || se.OtherStatement != "body[0]" {
		t.Errorf("got %v", se)
	}
	// Lane 0 reads tile[8], which lane 8 stored in body[0].
	if se.Invocation != [3]uint32{0, 0, 0} || se.Other != [3]uint32{8, 0, 0} || se.Index != 8 {
		t.Errorf("want invocation 0 reading tile[8] written by invocation 8, got %v", se)
	}
	if msg := se.Error(); !strings.Contains(msg, `workgroup (0,0,0)`) || !strings.Contains(msg, `invocation (8,0,0) wrote at body[0]`) {
		t.Errorf("message does not name the workgroup, lanes and statements: %s", msg)
	}
	se, got := strictRun(t, reduction(true), in)
	if se != nil || got[0] != 136 {
		t.Fatalf("the reduction with barriers: %v, sum %v", se, got)
	}
}

// neighbour stores each lane's input into tile and reads the next lane's slot.
func neighbour(withBarrier bool) *ir.Program {
	b, out, tile := staged("test.neighbour", 8, 8, withBarrier)
	b.Store(out, lid, ir.Load(tile, ir.Rem(ir.Add(lid, u32(1)), u32(8))))
	return b.MustBuild()
}

func TestStrictNeighbourReadBeforeBarrier(t *testing.T) {
	in := u32Bytes(10, 11, 12, 13, 14, 15, 16, 17)
	se, _ := strictRun(t, neighbour(false), in)
	if se == nil || se.Hazard != ReadAfterWrite || se.Statement != "body[1]" || se.Other != [3]uint32{1, 0, 0} {
		t.Fatalf("want a read after write of lane 1's slot at body[1], got %v", se)
	}
	se, got := strictRun(t, neighbour(true), in)
	if se != nil || !slices.Equal(got, []uint32{11, 12, 13, 14, 15, 16, 17, 10}) {
		t.Fatalf("with the barrier: %v, %v", se, got)
	}
}

func TestStrictHazards(t *testing.T) {
	cases := []struct {
		name   string
		body   func(b *ir.Builder, out, tile string)
		hazard Hazard
		stmt   string
		other  string
	}{
		{"write after write", func(b *ir.Builder, out, tile string) {
			b.Store(tile, u32(0), lid)
		}, WriteAfterWrite, "body[0]", "body[0]"},
		{"write after read", func(b *ir.Builder, out, tile string) {
			b.Store(tile, lid, lid)
			b.Barrier()
			b.Let("next", ir.Load(tile, ir.Rem(ir.Add(lid, u32(1)), u32(8))))
			b.Store(tile, lid, u32(0))
		}, WriteAfterRead, "body[3]", "body[2]"},
		{"in-place shift", func(b *ir.Builder, out, tile string) {
			b.Store(tile, lid, lid)
			b.Barrier()
			b.If(ir.Lt(lid, u32(7)), func(then *ir.Block) { then.Store(tile, lid, ir.Load(tile, ir.Add(lid, u32(1)))) })
		}, WriteAfterRead, "body[2].then[0]", "body[2].then[0]"},
		{"uninitialized read", func(b *ir.Builder, out, tile string) {
			b.If(ir.Lt(lid, u32(4)), func(then *ir.Block) { then.Store(tile, lid, lid) })
			b.Barrier()
			b.Store(out, lid, ir.Load(tile, lid))
		}, UninitializedRead, "body[2]", ""},
		{"uninitialized atomic", func(b *ir.Builder, out, tile string) {
			b.Atomic(ir.AtomicAdd, tile, u32(0), u32(1))
		}, UninitializedRead, "body[0]", ""},
		{"out-of-bounds store", func(b *ir.Builder, out, tile string) {
			b.Store(tile, ir.Add(lid, u32(1)), lid)
		}, OutOfBounds, "body[0]", ""},
		{"out-of-bounds load", func(b *ir.Builder, out, tile string) {
			b.Store(tile, lid, lid)
			b.Barrier()
			b.Store(out, lid, ir.Load(tile, ir.Mul(lid, u32(2))))
		}, OutOfBounds, "body[2]", ""},
		{"atomic after plain write", func(b *ir.Builder, out, tile string) {
			b.Store(tile, lid, lid)
			b.Atomic(ir.AtomicAdd, tile, u32(0), u32(1))
		}, AtomicRace, "body[1]", "body[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := lanesProgram(8, 8, func(b *ir.Builder, out string) {
				tile := b.Shared("tile", ir.U32, 8)
				c.body(b, out, tile)
			})
			se, _ := strictRun(t, p)
			if se == nil {
				t.Fatal("strict mode found nothing")
			}
			if se.Hazard != c.hazard || se.Statement != c.stmt || se.OtherStatement != c.other {
				t.Fatalf("got %s at %s (other %q), want %s at %s (other %q): %v", se.Hazard, se.Statement, se.OtherStatement,
					c.hazard, c.stmt, c.other, se)
			}
			// Without strict mode the same program runs and returns outputs.
			if _, err := Run(context.Background(), p, Options{}, Launch{Grid: [3]uint32{1, 1, 1}}); err != nil {
				t.Fatalf("without strict mode: %v", err)
			}
		})
	}
}

func TestStrictAllowsSafePatterns(t *testing.T) {
	p := lanesProgram(8, 8, func(b *ir.Builder, out string) {
		tile := b.Shared("tile", ir.U32, 8)
		count := b.Shared("count", ir.U32, 1)
		flags := b.Shared("flags", ir.Bool, 8)
		b.Store(tile, lid, ir.Mul(lid, u32(3)))
		b.Store(flags, lid, ir.Eq(ir.Rem(lid, u32(2)), u32(0)))
		b.If(ir.Eq(lid, u32(0)), func(then *ir.Block) { then.Store(count, u32(0), u32(0)) })
		// A lane may read back its own write before the barrier.
		b.Let("mine", ir.Load(tile, lid))
		b.Barrier()
		// Every lane reads every slot; all lanes add to one word atomically.
		b.Let("first", ir.Load(tile, u32(0)))
		b.Atomic(ir.AtomicAdd, count, u32(0), u32(1))
		b.AtomicResult(ir.AtomicMax, count, u32(0), lid, "seen")
		// Inactive lanes evaluate the branch's loads on the side; they are not checked.
		b.If(ir.Eq(lid, u32(3)), func(then *ir.Block) { then.Store(out, u32(0), ir.Load(tile, u32(100))) })
		b.Barrier()
		b.If(ir.Load(flags, lid), func(then *ir.Block) {
			then.Store(out, lid, ir.Add(ir.Load(count, u32(0)), ir.Load(tile, ir.Rem(ir.Add(lid, u32(1)), u32(8)))))
		})
	})
	// lid 3 reads tile[100] on its own: out of bounds, reported.
	se, _ := strictRun(t, p)
	if se == nil || se.Hazard != OutOfBounds || se.Invocation != [3]uint32{3, 0, 0} || se.Count != 8 {
		t.Fatalf("want lane 3's out-of-bounds read, got %v", se)
	}
	// Remove that read: everything else is race-free.
	p.Body = slices.Delete(p.Body, 8, 9)
	se, got := strictRun(t, p)
	if se != nil {
		t.Fatalf("strict mode rejected a race-free program: %v", se)
	}
	// count is 8 adds, then max with 0..7 keeps 8.
	if want := []uint32{8 + 3, 0, 8 + 9, 0, 8 + 15, 0, 8 + 21, 0}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestStrictResetsPerWorkgroup: words written by one workgroup do not count as
// written in the next, even on the same worker.
func TestStrictResetsPerWorkgroup(t *testing.T) {
	b := ir.NewBuilder("test.per_workgroup", 4, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	tile := b.Shared("tile", ir.U32, 4)
	b.If(ir.Eq(ir.WorkgroupID(0), u32(0)), func(then *ir.Block) { then.Store(tile, lid, lid) })
	b.Barrier()
	b.Store(out, ir.GlobalID(0), ir.Load(tile, lid))
	k, err := Compile(b.MustBuild(), Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	k.workers = 1
	_, err = k.Run(context.Background(), Launch{Grid: [3]uint32{2, 1, 1}, OutputCounts: []uint32{8}})
	var se *StrictError
	if !errors.As(err, &se) || se.Hazard != UninitializedRead || se.Workgroup != [3]uint32{1, 0, 0} {
		t.Fatalf("want an uninitialized read in workgroup 1, got %v", err)
	}
}

func TestStrictNamesEveryHazard(t *testing.T) {
	for h := ReadAfterWrite; h <= OutOfBounds; h++ {
		if h.String() == "invalid" {
			t.Errorf("hazard %d has no name", h)
		}
		e := &StrictError{Program: "p", Hazard: h, Array: "a", Statement: "body[0]", OtherStatement: "body[1]"}
		if !strings.Contains(e.Error(), "Fix: ") || !strings.Contains(e.Error(), h.String()) {
			t.Errorf("%s: message %q", h, e.Error())
		}
	}
}

package interp

import (
	"bytes"
	"context"
	"math"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

func TestBufferAtomicsEveryOp(t *testing.T) {
	const wg, groups = 64, 4
	const n = wg * groups
	b := ir.NewBuilder("test.atomics.buffer", wg, 1, 1)
	u := b.FixedBuffer("u", ir.U32, ir.ReadWrite, 7)
	s := b.FixedBuffer("s", ir.I32, ir.ReadWrite, 2)
	res := b.FixedBuffer("res", ir.U32, ir.Write, n)
	oob := b.FixedBuffer("oob", ir.U32, ir.Write, n)
	gid := b.Let("gid", ir.GlobalID(0))
	sgid := ir.Cast(ir.I32, gid)
	b.Atomic(ir.AtomicAdd, u, u32(0), ir.Add(gid, u32(1)))
	b.Atomic(ir.AtomicMin, u, u32(1), ir.Add(gid, u32(5)))
	b.Atomic(ir.AtomicMax, u, u32(2), ir.Mul(gid, u32(3)))
	b.Atomic(ir.AtomicAnd, u, u32(3), ir.Not(ir.Shl(u32(1), ir.Rem(gid, u32(32)))))
	b.Atomic(ir.AtomicOr, u, u32(4), ir.Shl(u32(1), ir.Rem(gid, u32(32))))
	b.Atomic(ir.AtomicXor, u, u32(5), gid)
	old := b.AtomicResult(ir.AtomicExchange, u, u32(6), gid, "old")
	b.Store(res, gid, old)
	b.Atomic(ir.AtomicMin, s, u32(0), ir.Sub(sgid, ir.LitI32(100)))
	b.Atomic(ir.AtomicMax, s, u32(1), ir.Sub(ir.LitI32(100), sgid))
	gone := b.AtomicResult(ir.AtomicAdd, u, u32(7), u32(1), "gone")
	b.Store(oob, gid, ir.Add(gone, u32(1)))

	inU := u32Bytes(10, 0xFFFFFFFF, 0, 0xFFFFFFFF, 0, 0, 99)
	inS := i32Bytes(0, 0)
	keepU := bytes.Clone(inU)
	outs := mustRun(t, b.Program(), Options{}, Launch{Grid: [3]uint32{groups, 1, 1}, Inputs: [][]byte{inU, inS}})
	gotU, gotS := bytesU32(outs[0]), bytesU32(outs[1])
	wantU := []uint32{10 + n*(n+1)/2, 5, 3 * (n - 1), 0, 0xFFFFFFFF, 0}
	if !slices.Equal(gotU[:6], wantU) {
		t.Errorf("u = %v, want %v then the exchange", gotU[:6], wantU)
	}
	if want := []uint32{i32(-100), 100}; !slices.Equal(gotS, want) {
		t.Errorf("s = %v, want %v (min and max compare as i32)", gotS, want)
	}
	// Exchange: the old values plus the final value are the initial value and every
	// gid, each exactly once.
	chain := append(bytesU32(outs[2]), gotU[6])
	slices.Sort(chain)
	want := []uint32{}
	for i := range n {
		want = append(want, uint32(i))
	}
	want = append(want, 99)
	slices.Sort(want)
	if !slices.Equal(chain, want) {
		t.Errorf("exchange results and final value %v are not a permutation of the initial value and the gids", chain)
	}
	for i, v := range bytesU32(outs[3]) {
		if v != 1 {
			t.Fatalf("out-of-bounds atomic result for gid %d = %d, want 0", i, v-1)
		}
	}
	if !bytes.Equal(inU, keepU) {
		t.Error("a read_write input was modified")
	}
}

func TestSharedAtomicsEveryOpInLaneOrder(t *testing.T) {
	const n = 32
	b := ir.NewBuilder("test.atomics.shared", n, 1, 1)
	out := b.FixedBuffer("out", ir.U32, ir.Write, 8)
	order := b.FixedBuffer("order", ir.U32, ir.Write, n)
	signed := b.FixedBuffer("signed", ir.I32, ir.Write, 2)
	sh := b.Shared("sh", ir.U32, 8)
	si := b.Shared("si", ir.I32, 2)
	b.If(ir.Eq(lid, u32(0)), func(then *ir.Block) {
		for i, v := range []uint32{0, 0xFFFFFFFF, 0, 0xFFFFFFFF, 0, 0, 77, 0} {
			then.Store(sh, u32(uint32(i)), u32(v))
		}
		then.Store(si, u32(0), ir.LitI32(0))
		then.Store(si, u32(1), ir.LitI32(0))
	})
	b.Barrier()
	old := b.AtomicResult(ir.AtomicAdd, sh, u32(0), u32(1), "old")
	b.Store(order, lid, old)
	b.Atomic(ir.AtomicMin, sh, u32(1), ir.Add(lid, u32(5)))
	b.Atomic(ir.AtomicMax, sh, u32(2), ir.Mul(lid, u32(3)))
	b.Atomic(ir.AtomicAnd, sh, u32(3), ir.Not(ir.Shl(u32(1), lid)))
	b.Atomic(ir.AtomicOr, sh, u32(4), ir.Shl(u32(1), lid))
	b.Atomic(ir.AtomicXor, sh, u32(5), ir.Add(lid, u32(1)))
	b.Atomic(ir.AtomicExchange, sh, u32(6), lid)
	gone := b.AtomicResult(ir.AtomicOr, sh, u32(8), u32(1), "gone")
	b.Atomic(ir.AtomicAdd, sh, u32(7), gone)
	b.Atomic(ir.AtomicMin, si, u32(0), ir.Sub(ir.Cast(ir.I32, lid), ir.LitI32(10)))
	b.Atomic(ir.AtomicMax, si, u32(1), ir.Sub(ir.LitI32(10), ir.Cast(ir.I32, lid)))
	b.Barrier()
	b.If(ir.Lt(lid, u32(8)), func(then *ir.Block) { then.Store(out, lid, ir.Load(sh, lid)) })
	b.If(ir.Lt(lid, u32(2)), func(then *ir.Block) { then.Store(signed, lid, ir.Load(si, lid)) })
	outs := mustRun(t, b.Program(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}})
	var xor uint32
	for i := range uint32(n) {
		xor ^= i + 1
	}
	want := []uint32{n, 5, 3 * (n - 1), 0, 0xFFFFFFFF, xor, n - 1, 0}
	if got := bytesU32(outs[0]); !slices.Equal(got, want) {
		t.Errorf("shared = %v, want %v", got, want)
	}
	for i, v := range bytesU32(outs[1]) {
		if v != uint32(i) {
			t.Fatalf("lane %d saw old value %d; atomics must apply in lane order", i, v)
		}
	}
	if got, want := bytesU32(outs[2]), []uint32{i32(-10), 10}; !slices.Equal(got, want) {
		t.Errorf("signed = %v, want %v", got, want)
	}
}

func TestOutOfBounds(t *testing.T) {
	b := ir.NewBuilder("test.oob", 1, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.FixedBuffer("out", ir.U32, ir.ReadWrite, 4)
	sh := b.Shared("sh", ir.U32, 2)
	b.Store(sh, u32(0), u32(1))
	b.Store(sh, u32(1), u32(2))
	b.Store(sh, u32(2), u32(99)) // out of bounds: nothing
	b.Store(out, u32(0), ir.Load(in, ir.Len(in)))
	b.Store(out, u32(1), ir.Load(in, u32(0xFFFFFFFF)))
	b.Store(out, u32(2), ir.Add(ir.Load(sh, u32(2)), ir.Load(sh, u32(1))))
	b.Store(out, u32(4), u32(7))          // out of bounds: nothing
	b.Store(out, u32(0xFFFFFFFF), u32(7)) // out of bounds: nothing
	outs := mustRun(t, b.Program(), Options{}, Launch{
		Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{u32Bytes(5, 6, 7), u32Bytes(9, 9, 9, 9)},
	})
	if got, want := bytesU32(outs[0]), []uint32{0, 0, 2, 9}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// Shared arrays are poisoned at the start of every workgroup, so reading before
// writing never sees zeros or a previous workgroup's data. A poisoned bool reads
// as true everywhere.
func TestSharedPoison(t *testing.T) {
	const n = 4
	b := ir.NewBuilder("test.poison", n, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	flags := b.Buffer("flags", ir.U32, ir.Write)
	sh := b.Shared("sh", ir.U32, n)
	bs := b.Shared("bs", ir.Bool, n)
	gid := b.Let("gid", ir.GlobalID(0))
	flag := b.Let("flag", ir.Load(bs, lid))
	b.Store(out, gid, ir.Load(sh, lid))
	b.Store(flags, gid, ir.Add(ir.Cast(ir.U32, flag),
		ir.Add(ir.Select(flag, u32(10), u32(20)), ir.Cast(ir.U32, ir.Not(flag)))))
	b.Store(sh, lid, u32(0))
	b.Store(bs, lid, ir.LitBool(false))
	k, err := Compile(b.Program(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	k.workers = 1 // both workgroups reuse one worker's shared arrays
	outs, err := k.Run(context.Background(), Launch{Grid: [3]uint32{2, 1, 1}, OutputCounts: []uint32{2 * n, 2 * n}})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range bytesU32(outs[0]) {
		if v != poison {
			t.Errorf("invocation %d read %#x from unwritten shared memory, want the poison %#x", i, v, uint32(poison))
		}
	}
	for i, v := range bytesU32(outs[1]) {
		if v != 11 {
			t.Errorf("invocation %d: poisoned bool gave cast+select+not = %d, want 11 (true everywhere)", i, v)
		}
	}
}

func TestWriteBuffersZeroFilledAndFixedCounts(t *testing.T) {
	b := ir.NewBuilder("test.outputs", 2, 1, 1)
	in := b.FixedBuffer("in", ir.F32, ir.Read, 2)
	sized := b.Buffer("sized", ir.F32, ir.Write)
	fixed := b.FixedBuffer("fixed", ir.U32, ir.Write, 3)
	b.Buffer("untouched", ir.I32, ir.Write)
	b.Store(sized, ir.Mul(lid, u32(2)), ir.Load(in, lid))
	b.Store(fixed, lid, u32(1))
	outs := mustRun(t, b.Program(), Options{}, Launch{
		Grid:         [3]uint32{1, 1, 1},
		Inputs:       [][]byte{f32Bytes(1.5, -2), nil, nil, nil},
		OutputCounts: []uint32{0, 5, 100, 3},
	})
	if len(outs) != 3 {
		t.Fatalf("got %d outputs, want 3 (write buffers in binding order)", len(outs))
	}
	if !bytes.Equal(outs[0], f32Bytes(1.5, 0, -2, 0, 0)) {
		t.Errorf("sized = %v", outs[0])
	}
	if got := bytesU32(outs[1]); !slices.Equal(got, []uint32{1, 1, 0}) {
		t.Errorf("fixed = %v, want [1 1 0] (its Count, not OutputCounts)", got)
	}
	if !bytes.Equal(outs[2], make([]byte, 12)) {
		t.Errorf("untouched = %v, want 12 zero bytes", outs[2])
	}
}

func TestGridWithZeroAxisRunsNothing(t *testing.T) {
	b := ir.NewBuilder("test.zero", 4, 1, 1)
	rw := b.Buffer("rw", ir.U32, ir.ReadWrite)
	out := b.Buffer("out", ir.U32, ir.Write)
	b.Store(rw, lid, u32(1))
	b.Store(out, lid, u32(1))
	for _, grid := range [][3]uint32{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}} {
		outs := mustRun(t, b.Program(), Options{}, Launch{
			Grid: grid, Inputs: [][]byte{u32Bytes(5, 6), nil}, OutputCounts: []uint32{0, 3},
		})
		if got := bytesU32(outs[0]); !slices.Equal(got, []uint32{5, 6}) {
			t.Errorf("grid %v: read_write = %v, want its input", grid, got)
		}
		if got := bytesU32(outs[1]); !slices.Equal(got, []uint32{0, 0, 0}) {
			t.Errorf("grid %v: write = %v, want zeros", grid, got)
		}
	}
}

func TestReadWriteInputNotModifiedAndNotShared(t *testing.T) {
	b := ir.NewBuilder("test.rw", 4, 1, 1)
	rw := b.Buffer("rw", ir.F32, ir.ReadWrite)
	b.Store(rw, lid, ir.Mul(ir.Load(rw, lid), ir.LitF32(2)))
	in := f32Bytes(1, 2, 3, 4)
	keep := bytes.Clone(in)
	outs := mustRun(t, b.Program(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{in}})
	if !bytes.Equal(in, keep) {
		t.Error("the read_write input was modified")
	}
	if !bytes.Equal(outs[0], f32Bytes(2, 4, 6, 8)) {
		t.Errorf("output = %v", outs[0])
	}
	outs[0][0] = 0xFF
	if in[0] == 0xFF {
		t.Error("the output shares memory with the input")
	}
}

// An input that is not 4-byte aligned in memory is copied, not misread.
func TestUnalignedInput(t *testing.T) {
	b := ir.NewBuilder("test.unaligned", 2, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	b.Store(out, lid, ir.Load(in, lid))
	raw := append([]byte{0}, u32Bytes(0x01020304, 0xA0B0C0D0)...)
	outs := mustRun(t, b.Program(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{raw[1:], nil}, OutputCounts: []uint32{0, 2}})
	if got := bytesU32(outs[0]); !slices.Equal(got, []uint32{0x01020304, 0xA0B0C0D0}) {
		t.Errorf("got %#x", got)
	}
}

func TestLenOfBuffers(t *testing.T) {
	b := ir.NewBuilder("test.len", 1, 1, 1)
	in := b.Buffer("in", ir.I32, ir.Read)
	rw := b.Buffer("rw", ir.U32, ir.ReadWrite)
	out := b.Buffer("out", ir.U32, ir.Write)
	b.Store(out, u32(0), ir.Len(in))
	b.Store(out, u32(1), ir.Len(rw))
	b.Store(out, u32(2), ir.Len(out))
	outs := mustRun(t, b.Program(), Options{}, Launch{
		Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{i32Bytes(1, 2, 3, 4, 5), u32Bytes(1)}, OutputCounts: []uint32{0, 0, 6},
	})
	if got := bytesU32(outs[1]); !slices.Equal(got, []uint32{5, 1, 6, 0, 0, 0}) {
		t.Errorf("got %v", got)
	}
}

func TestFloatStoresKeepBits(t *testing.T) {
	b := ir.NewBuilder("test.bits", 1, 1, 1)
	in := b.Buffer("in", ir.F32, ir.Read)
	out := b.Buffer("out", ir.F32, ir.Write)
	b.Store(out, u32(0), ir.Load(in, u32(0)))
	b.Store(out, u32(1), ir.Load(in, u32(1)))
	bits := []uint32{0x7FA00001, 0x00000001} // a signalling NaN payload, the smallest subnormal
	outs := mustRun(t, b.Program(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{u32Bytes(bits...), nil}, OutputCounts: []uint32{0, 2}})
	if got := bytesU32(outs[0]); !slices.Equal(got, bits) {
		t.Errorf("got %#x, want %#x", got, bits)
	}
	if math.Float32frombits(bits[1]) == 0 {
		t.Fatal("subnormal test value is zero")
	}
}

package backend

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"golang.org/x/sys/unix"
)

// vectorAdd is c[i] = a[i] + b[i] over u32, one element per invocation, plus
// two terms that are 0 when the semantics hold: b read len(b) past i (an
// out-of-bounds load gives 0) and len(a) - n. Every invocation also stores to
// c past its end, which must be dropped.
func vectorAdd(n uint32) *ir.Program {
	b := ir.NewBuilder("test.vadd.large", 256, 1, 1)
	a := b.Buffer("a", ir.U32, ir.Read)
	bb := b.Buffer("b", ir.U32, ir.Read)
	c := b.Buffer("c", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(c)), func(then *ir.Block) {
		oob := ir.Load(bb, ir.Add(i, ir.Len(bb)))
		then.Store(c, i, ir.Add(ir.Add(ir.Load(a, i), ir.Load(bb, i)), ir.Add(oob, ir.Sub(ir.Len(a), ir.LitU32(n)))))
		then.Store(c, ir.Add(i, ir.Len(c)), ir.LitU32(7))
	})
	return b.MustBuild()
}

// period is the period of the test vectors: a prime, so that no power-of-two
// offset maps an element onto one with the same value.
const period = 65521

// periodic returns largeN little-endian elements f(i mod period), built by
// doubling copies (cheap under the race detector).
func periodic(f func(i uint32) uint32) []byte {
	out := make([]byte, 4*largeN)
	for i := range uint32(period) {
		binary.LittleEndian.PutUint32(out[4*i:], f(i))
	}
	for n := 4 * period; n < len(out); n *= 2 {
		copy(out[n:], out[:n])
	}
	return out
}

// largeN is the element count of the large bindings: 256 MiB and 3 elements,
// beyond lavapipe's maxStorageBufferRange of 128 MiB.
const largeN = 64<<20 + 3

// TestBindingsBeyondMaxStorageBufferRange adds two vectors of 256 MiB + 12 bytes
// (through protocol 1's Dispatch, over resident buffers, and with the first in
// imported host memory) on a device with
// buffer device addresses, which reaches them through addresses, and checks
// every element, len and the out-of-bounds rules. A small dispatch of the same
// pipeline still runs on descriptors.
func TestBindingsBeyondMaxStorageBufferRange(t *testing.T) {
	b := newTestBackend(t)
	a := b.adapters.List()[0]
	if uint64(largeN)*4 <= uint64(a.props.Limits.MaxStorageBufferRange) {
		t.Skipf("the device binds %d bytes with descriptors; nothing to test", a.props.Limits.MaxStorageBufferRange)
	}
	if !a.addresses {
		t.Skip("the device has no bufferDeviceAddress; TestLargeBindingWithoutAddressesIsRejected covers it")
	}
	p := vectorAdd(largeN)
	x := periodic(func(i uint32) uint32 { return i })
	y := periodic(func(i uint32) uint32 { return 3*i + 1 })
	want := periodic(func(i uint32) uint32 { return 4*i + 1 })
	check := func(t *testing.T, out []byte) {
		t.Helper()
		if !bytes.Equal(out, want) {
			if len(out) != len(want) {
				t.Fatalf("%d output bytes, want %d", len(out), len(want))
			}
			for i := 0; i < len(out); i += 4 {
				if got, exp := binary.LittleEndian.Uint32(out[i:]), binary.LittleEndian.Uint32(want[i:]); got != exp {
					t.Fatalf("c[%d] = %d, want %d", i/4, got, exp)
				}
			}
		}
	}
	grid := [3]uint32{(largeN + 255) / 256, 1, 1}
	t.Run("dispatch", func(t *testing.T) {
		res, err := run(t, b, p, ir.SpecMap{}, [3]uint32{}, grid, [][]byte{x, y}, []uint32{0, 0, largeN})
		if err != nil {
			t.Fatal(err)
		}
		check(t, res.Outputs[0])
	})
	resident := func(t *testing.T, shared []byte) {
		ctx := context.Background()
		pl := compileT(t, b, p)
		var bufs [3]uint64
		for k, data := range [][]byte{x, y, make([]byte, 4*largeN)} {
			req := &pluginapi.AllocRequest{Size: uint64(len(data))}
			if k == 0 && shared != nil {
				req.Usage, req.Shared = pluginapi.UsageMap|pluginapi.UsageStorage, shared[:len(data)]
			}
			r, err := b.AllocBuffer(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 && shared != nil && !r.Mapped {
				t.Skip("the device does not import host memory")
			}
			if err := b.WriteBuffer(ctx, r.Buffer, 0, data); err != nil {
				t.Fatal(err)
			}
			bufs[k] = r.Buffer
		}
		cmd := pluginapi.DispatchCommand{Pipeline: pl, Grid: grid, Bindings: []pluginapi.BufferRange{
			{Buffer: bufs[0], Size: 4 * largeN}, {Buffer: bufs[1], Size: 4 * largeN}, {Buffer: bufs[2], Size: 4 * largeN}}}
		if _, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{cmd}}); err != nil {
			t.Fatal(err)
		}
		out := make([]byte, 4*largeN)
		if err := b.ReadBuffer(ctx, bufs[2], 0, out); err != nil {
			t.Fatal(err)
		}
		check(t, out)
		// The same pipeline over small ranges of the same buffers runs on
		// descriptors: no variant for it.
		small := pluginapi.DispatchCommand{Pipeline: pl, Grid: [3]uint32{1, 1, 1}, Bindings: []pluginapi.BufferRange{
			{Buffer: bufs[0], Size: 4 * 8}, {Buffer: bufs[1], Size: 4 * 8}, {Buffer: bufs[2], Size: 4 * 8}}}
		if _, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{small}}); err != nil {
			t.Fatal(err)
		}
		parent, _ := b.pipelines.Get(pl)
		parent.addr.mu.Lock()
		variants := len(parent.addr.variants)
		parent.addr.mu.Unlock()
		if variants != 1 {
			t.Errorf("%d address variants after one large and one small dispatch, want 1", variants)
		}
		for _, buf := range bufs {
			if err := b.FreeBuffer(ctx, buf); err != nil {
				t.Error(err)
			}
		}
	}
	t.Run("resident", func(t *testing.T) { resident(t, nil) })
	// Imported host memory has no device address: the large binding runs on a
	// scratch copy.
	t.Run("imported", func(t *testing.T) {
		mem, err := unix.Mmap(-1, 0, 4*largeN+8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(mem)
		resident(t, mem)
	})
}

// TestLargeBindingWithoutAddressesIsRejected pins the fallback: on a device
// without buffer device addresses a binding beyond maxStorageBufferRange is a
// rejection that names the limit.
func TestLargeBindingWithoutAddressesIsRejected(t *testing.T) {
	b := newTestBackend(t)
	a := b.adapters.List()[0]
	own := a.addresses
	a.addresses = false
	defer func() { a.addresses = own }()
	lim := a.props.Limits.MaxStorageBufferRange
	_, err := run(t, b, vectorAdd(0), ir.SpecMap{}, [3]uint32{}, [3]uint32{1, 1, 1}, nil, []uint32{0, 0, lim/4 + 1})
	var rejected *pluginapi.RejectedError
	if !errors.As(err, &rejected) {
		t.Fatalf("dispatch with a %d-byte binding: %v, want a rejection", 4*(lim/4+1), err)
	}
}

package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
)

// pattern returns n bytes of a seeded pseudo-random pattern.
func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// filled allocates a buffer on b holding data.
func filled(t *testing.T, b *Backend, data []byte, usage BufferUsage) *Buffer {
	t.Helper()
	buf := alloc(t, b, int64(len(data)), usage)
	if err := buf.Write(context.Background(), 0, data); err != nil {
		t.Fatal(err)
	}
	return buf
}

// readAll returns a buffer's bytes.
func readAll(t *testing.T, buf *Buffer) []byte {
	t.Helper()
	out := make([]byte, buf.Size())
	if err := buf.Read(context.Background(), 0, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkCopied checks that dst holds before with src's range copied in at
// dstOffset, and reports the first differing byte.
func checkCopied(t *testing.T, dst *Buffer, before []byte, dstOffset int, srcBytes []byte) {
	t.Helper()
	want := bytes.Clone(before)
	copy(want[dstOffset:], srcBytes)
	got := readAll(t, dst)
	if !bytes.Equal(got, want) {
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("byte %d of %s is %#x, want %#x (copied range starts at %d, %d bytes)", i, dst.Name(), got[i], want[i], dstOffset, len(srcBytes))
			}
		}
	}
}

func trafficOf(b *Backend) int64 {
	tr := b.Traffic()
	return tr.ToPlugin + tr.FromPlugin
}

// A copy between the two adapters of a plugin with pluginapi.PeerCopier stays
// in the plugin: the bytes arrive exactly, and none crosses the process
// boundary.
func TestCopyBufferBetweenAdaptersStaysInThePlugin(t *testing.T) {
	ctx := context.Background()
	h := openHost(t, "fx-peers")
	b0, b1 := acquire(t, h, "fx-peers:0"), acquire(t, h, "fx-peers:1")
	srcData, dstData := pattern(1<<20+13, 1), pattern(1<<20+7, 2)
	src, dst := filled(t, b0, srcData, 0), filled(t, b1, dstData, 0)
	before := trafficOf(b0)
	if err := CopyBuffer(ctx, dst, 17, src, 3, 1<<20-11); err != nil {
		t.Fatal(err)
	}
	if moved := trafficOf(b0) - before; moved != 0 {
		t.Errorf("the copy moved %d bytes across the process boundary, want 0 (peer copy in the plugin)", moved)
	}
	checkCopied(t, dst, dstData, 17, srcData[3:3+1<<20-11])
}

// A plugin whose PeerCopy answers unimplemented for the pair gets the copy
// through the host: the same bytes, each crossing twice.
func TestCopyBufferFallsBackThroughTheHost(t *testing.T) {
	t.Setenv("KILN_FIXTURE_NO_PEER", "1")
	ctx := context.Background()
	h := openHost(t, "fx-peers")
	b0, b1 := acquire(t, h, "fx-peers:0"), acquire(t, h, "fx-peers:1")
	const n = 2*copyThroughHostChunk + 12345 // three chunks, the last one short
	srcData := pattern(n+8, 3)
	src, dst := filled(t, b0, srcData, 0), alloc(t, b1, n, 0)
	before := trafficOf(b0)
	if err := CopyBuffer(ctx, dst, 0, src, 8, n); err != nil {
		t.Fatal(err)
	}
	if moved := trafficOf(b0) - before; moved != 2*n {
		t.Errorf("the copy moved %d bytes across the process boundary, want %d (read and written through the host)", moved, 2*n)
	}
	checkCopied(t, dst, make([]byte, n), 0, srcData[8:])
}

// Copies within one adapter run as a submit on the device, between two buffers
// and within one.
func TestCopyBufferWithinOneAdapter(t *testing.T) {
	ctx := context.Background()
	h := openHost(t, "cpuref")
	b := acquire(t, h, "cpu-ref")
	data := pattern(64<<10, 4)
	src, dst := filled(t, b, data, 0), filled(t, b, make([]byte, 64<<10), UsageMap)
	before := trafficOf(b)
	if err := CopyBuffer(ctx, dst, 100, src, 1000, 50000); err != nil {
		t.Fatal(err)
	}
	if err := CopyBuffer(ctx, src, 0, src, 32<<10, 1000); err != nil {
		t.Fatal(err)
	}
	if moved := trafficOf(b) - before; moved != 0 {
		t.Errorf("copies on one adapter moved %d bytes across the process boundary, want 0", moved)
	}
	checkCopied(t, dst, make([]byte, 64<<10), 100, data[1000:51000])
	checkCopied(t, src, data, 0, data[32<<10:32<<10+1000])
}

// Between plugins, and between a host-kept buffer (a plugin without Buffers)
// and a resident one, the copy goes through the host.
func TestCopyBufferAcrossPlugins(t *testing.T) {
	ctx := context.Background()
	h := openHost(t, "cpuref", "fx-resident", "fx-zeros")
	cpu, res, kept := acquire(t, h, "cpu-ref"), acquire(t, h, "fx-resident"), acquire(t, h, "fx-zeros")
	const n = copyThroughHostChunk + 4097
	data := pattern(n, 5)
	src := filled(t, cpu, data, 0)
	mid := alloc(t, res, n, 0)
	host := alloc(t, kept, n, 0)
	if host.Resident() {
		t.Fatal("fx-zeros kept a buffer; the test needs a host-kept one")
	}
	back := alloc(t, cpu, n, UsageMap)
	for _, step := range []struct {
		dst, src *Buffer
	}{{mid, src}, {host, mid}, {back, host}} {
		if err := CopyBuffer(ctx, step.dst, 0, step.src, 0, n); err != nil {
			t.Fatalf("copy %s -> %s: %v", step.src.Name(), step.dst.Name(), err)
		}
		checkCopied(t, step.dst, make([]byte, n), 0, data)
	}
}

// Ranges outside a buffer, overlapping ranges in one buffer, freed and nil
// buffers are BufferErrors ending in a fix, and nothing is copied.
func TestCopyBufferRefusesBadRanges(t *testing.T) {
	ctx := context.Background()
	h := openHost(t, "fx-peers")
	b0, b1 := acquire(t, h, "fx-peers:0"), acquire(t, h, "fx-peers:1")
	src, dst := filled(t, b0, pattern(4096, 6), 0), alloc(t, b1, 1024, 0)
	freed := alloc(t, b1, 16, 0)
	if err := freed.Free(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                     string
		dst, src                 *Buffer
		dstOff, srcOff, n        int64
		wantBuffer, wantInDetail string
	}{
		{"source range past the end", dst, src, 0, 4000, 100, src.Name(), "lies outside"},
		{"destination range past the end", dst, src, 1000, 0, 100, dst.Name(), "lies outside"},
		{"negative size", dst, src, 0, 0, -1, src.Name(), "lies outside"},
		{"negative offset", dst, src, -4, 0, 4, dst.Name(), "lies outside"},
		{"overlap within a buffer", src, src, 10, 0, 100, src.Name(), "overlaps"},
		{"freed destination", freed, src, 0, 0, 4, freed.Name(), "freed"},
		{"no source", dst, nil, 0, 0, 4, "<nil>", "needs a source"},
	} {
		err := CopyBuffer(ctx, tc.dst, tc.dstOff, tc.src, tc.srcOff, tc.n)
		var be *BufferError
		if !errors.As(err, &be) || be.Buffer != tc.wantBuffer || !strings.Contains(be.Detail, tc.wantInDetail) {
			t.Errorf("%s: %v (%T), want a BufferError on %s saying %q", tc.name, err, err, tc.wantBuffer, tc.wantInDetail)
			continue
		}
		assertEndsWithFix(t, err.Error())
	}
	if got := readAll(t, dst); !bytes.Equal(got, make([]byte, 1024)) {
		t.Error("a refused copy wrote into the destination")
	}
}

// A copy from a buffer whose plugin died is a LostBufferError naming it.
func TestCopyBufferFromALostBuffer(t *testing.T) {
	ctx := context.Background()
	h := openHost(t, "cpuref", "fx-resident")
	cpu, res := acquire(t, h, "cpu-ref"), acquire(t, h, "fx-resident")
	src, dst := filled(t, cpu, pattern(4096, 8), 0), alloc(t, res, 4096, 0)
	pid := pidOf(t, h, "cpu-ref")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	var lost *LostBufferError
	err := CopyBuffer(ctx, dst, 0, src, 0, 4096)
	if !errors.As(err, &lost) || !strings.Contains(err.Error(), src.Name()) {
		t.Fatalf("copy from a buffer of a killed plugin: %v (%T), want a LostBufferError naming %s", err, err, src.Name())
	}
	assertEndsWithFix(t, err.Error())
}

// A large copy between plugins through the host arrives byte for byte.
func TestCopyBufferLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("copies 256 MiB")
	}
	ctx := context.Background()
	h := openHost(t, "cpuref", "fx-peers")
	cpu, peer := acquire(t, h, "cpu-ref"), acquire(t, h, "fx-peers:1")
	const n = 256 << 20
	data := pattern(n, 9)
	src := filled(t, cpu, data, 0)
	dst := alloc(t, peer, n, 0)
	if err := CopyBuffer(ctx, dst, 0, src, 0, n); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, dst); !bytes.Equal(got, data) {
		t.Fatal("the 256 MiB copy differs from its source")
	}
}

// BenchmarkCopyBuffer copies 64 MiB between the two adapters of one plugin (in
// the plugin) and between two plugins (through the host).
func BenchmarkCopyBuffer(b *testing.B) {
	const n = 64 << 20
	for _, tc := range []struct{ name, dst, src string }{
		{"peer", "fx-peers:1", "fx-peers:0"},
		{"host", "fx-peers:1", "cpu-ref"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			h, err := Open(ctx, Options{PluginDir: pluginDir(b, "cpuref", "fx-peers"), NoCache: true, NoAutotune: true, NoPGO: true})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			bufs := make([]*Buffer, 2)
			for i, name := range []string{tc.src, tc.dst} {
				be, err := h.Acquire(ctx, name)
				if err != nil {
					b.Fatal(err)
				}
				if bufs[i], err = be.Alloc(ctx, n, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(n)
			b.ResetTimer()
			for range b.N {
				if err := CopyBuffer(ctx, bufs[1], 0, bufs[0], 0, n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A copy whose deadline has passed is a TimeoutError, and both buffers stay
// usable.
func TestCopyBufferDeadline(t *testing.T) {
	h := openHost(t, "cpuref", "fx-resident")
	cpu, res := acquire(t, h, "cpu-ref"), acquire(t, h, "fx-resident")
	data := pattern(4<<20, 10)
	src, dst := filled(t, cpu, data, 0), alloc(t, res, 4<<20, 0)
	ctx, cancel := context.WithTimeout(context.Background(), -1)
	defer cancel()
	err := CopyBuffer(ctx, dst, 0, src, 0, 4<<20)
	var timeout *TimeoutError
	if !errors.As(err, &timeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("copy past its deadline: %v (%T), want a TimeoutError matching context.DeadlineExceeded", err, err)
	}
	if err := CopyBuffer(context.Background(), dst, 0, src, 0, 4<<20); err != nil {
		t.Fatalf("copy after a timed-out one: %v", err)
	}
	checkCopied(t, dst, make([]byte, 4<<20), 0, data)
}

// A batch's copy may reach a buffer of another adapter of a plugin with
// PeerCopier: it runs in order with the batch's other commands (a fill before
// it, a copy on the adapter after it) and moves no bytes across the boundary.
// Without PeerCopier the batch is refused before it is sent.
func TestBatchCopyBetweenAdapters(t *testing.T) {
	ctx := context.Background()
	h := openHost(t, "fx-peers")
	b0, b1 := acquire(t, h, "fx-peers:0"), acquire(t, h, "fx-peers:1")
	data := pattern(4096, 11)
	other := filled(t, b0, data, 0)
	dst, next := alloc(t, b1, 4096, 0), alloc(t, b1, 4096, 0)
	var bt Batch
	bt.Fill(Binding{Buffer: dst, Size: 4096}, 0x01010101)
	bt.Copy(Binding{Buffer: dst, Offset: 100, Size: 1000}, Binding{Buffer: other, Offset: 7, Size: 1000})
	bt.Copy(Bind(next), Bind(dst))
	before := trafficOf(b1)
	if _, err := b1.Submit(ctx, &bt); err != nil {
		t.Fatal(err)
	}
	if moved := trafficOf(b1) - before; moved != 0 {
		t.Errorf("the batch moved %d bytes across the boundary, want 0", moved)
	}
	want := bytes.Repeat([]byte{1}, 4096)
	copy(want[100:], data[7:1007])
	checkCopied(t, next, want, 0, nil)
	checkCopied(t, dst, want, 0, nil)

	res := openHost(t, "fx-resident", "cpuref")
	r0, c0 := acquire(t, res, "fx-resident"), acquire(t, res, "cpu-ref")
	a, c := alloc(t, r0, 64, 0), alloc(t, c0, 64, 0)
	var across Batch
	across.Copy(Bind(a), Bind(c))
	var be *BufferError
	if _, err := r0.Submit(ctx, &across); !errors.As(err, &be) || !strings.Contains(err.Error(), "host.CopyBuffer") {
		t.Fatalf("a batch copy from another plugin: %v, want a BufferError pointing to host.CopyBuffer", err)
	}
}

// A backend that cannot copy between a pair of adapters (its PeerCopy answers
// unimplemented) fails a batch copy between them with an UnsupportedError and
// writes nothing; host.CopyBuffer is the way then.
func TestBatchCopyBetweenAdaptersNeedsPeerCopier(t *testing.T) {
	t.Setenv("KILN_FIXTURE_NO_PEER", "1")
	ctx := context.Background()
	h := openHost(t, "fx-peers")
	b0, b1 := acquire(t, h, "fx-peers:0"), acquire(t, h, "fx-peers:1")
	src, dst := filled(t, b0, pattern(64, 12), 0), alloc(t, b1, 64, 0)
	var bt Batch
	bt.Copy(Bind(dst), Bind(src))
	_, err := b1.Submit(ctx, &bt)
	var unsupported *UnsupportedError
	if !errors.As(err, &unsupported) {
		t.Fatalf("a batch copy between adapters whose PeerCopy is unimplemented: %v (%T), want an UnsupportedError", err, err)
	}
	if got := readAll(t, dst); !bytes.Equal(got, make([]byte, 64)) {
		t.Error("the refused copy wrote into the destination")
	}
}

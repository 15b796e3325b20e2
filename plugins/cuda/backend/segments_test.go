package backend

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
)

// mapped returns n bytes of anonymous shared memory, as the data plane maps its
// segments, unmapped at cleanup.
func mapped(t *testing.T, n int) []byte {
	t.Helper()
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	return mem
}

func TestSegmentTable(t *testing.T) {
	ctx := context.Background()
	b := New(Config{Library: missingDriver})
	defer b.Close(ctx)
	mem := mapped(t, 1<<16)
	if err := b.AttachSegment(ctx, 7, mem); err != nil {
		t.Fatal(err)
	}
	var rejected *pluginapi.RejectedError
	if err := b.AttachSegment(ctx, 7, mem); !errors.As(err, &rejected) {
		t.Errorf("attaching segment 7 twice = %v, want a RejectedError", err)
	}
	if err := b.DetachSegment(ctx, 7); err != nil {
		t.Errorf("detaching an unregistered segment: %v", err)
	}
	if err := b.DetachSegment(ctx, 7); err != nil {
		t.Errorf("detaching segment 7 twice = %v, want nil (an unknown id is ignored)", err)
	}
	if err := b.AttachSegment(ctx, 8, mem); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.DetachSegment(ctx, 8); err != nil {
		t.Errorf("detaching after Close = %v, want nil", err)
	}
}

// TestSegmentCopiesAreRegistered (needs a device): a write from and a read into
// an attached segment register it with the driver, the bytes arrive, detaching
// unregisters it, and copies from the same memory still work afterwards.
func TestSegmentCopiesAreRegistered(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	mem := mapped(t, 1<<20)
	if err := b.AttachSegment(ctx, 1, mem); err != nil {
		t.Fatal(err)
	}
	buf, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4096})
	if err != nil {
		t.Fatal(err)
	}
	src, dst := mem[8192:8192+4096], mem[65536:65536+4096]
	for i := range src {
		src[i] = byte(i * 7)
	}
	if err := b.WriteBuffer(ctx, buf.Buffer, 0, src); err != nil {
		t.Fatal(err)
	}
	if seg := b.segs.m[1]; !seg.tried || seg.d == nil {
		t.Fatalf("the segment was not registered (tried %v)", seg.tried)
	}
	if err := b.ReadBuffer(ctx, buf.Buffer, 0, dst); err != nil {
		t.Fatal(err)
	}
	for i := range dst {
		if dst[i] != byte(i*7) {
			t.Fatalf("byte %d read back %d, want %d", i, dst[i], byte(i*7))
		}
	}
	if err := b.DetachSegment(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteBuffer(ctx, buf.Buffer, 0, mem[:4096]); err != nil {
		t.Errorf("a write from the detached memory: %v", err)
	}
}

package backend

import (
	"context"
	"math/rand/v2"
	"testing"
)

// TestSegmentFindByAddress pins the lookup of a view's segment (no GPU
// needed): among 200 adjacent segments attached in random order, each view is
// found in the segment holding it, a view across two segments or outside all
// of them in none, and a detached segment (or one Close forgot) no longer.
func TestSegmentFindByAddress(t *testing.T) {
	const n, size = 200, 256
	ctx := context.Background()
	b := New(Config{})
	mem := make([]byte, (n+2)*size)
	seg := func(i int) []byte { return mem[(i+1)*size : (i+2)*size : (i+2)*size] }
	for _, i := range rand.Perm(n) {
		if err := b.AttachSegment(ctx, uint64(i+1), seg(i)); err != nil {
			t.Fatal(err)
		}
	}
	find := func(view []byte) uint64 {
		b.segs.mu.Lock()
		defer b.segs.mu.Unlock()
		if s := b.segs.find(view); s != nil {
			return s.id
		}
		return 0
	}
	for i := range n {
		s := seg(i)
		for _, v := range [][]byte{s, s[:1], s[size-1:], s[17:99]} {
			if got := find(v); got != uint64(i+1) {
				t.Fatalf("a view of segment %d found segment %d", i+1, got)
			}
		}
	}
	if got := find(mem[size+size/2 : 2*size+size/2]); got != 0 {
		t.Fatalf("a view across two segments found segment %d", got)
	}
	if got := find(mem[:size]); got != 0 {
		t.Fatalf("a view outside every segment found segment %d", got)
	}
	if got := find(mem[(n+1)*size:]); got != 0 {
		t.Fatalf("a view past every segment found segment %d", got)
	}
	if err := b.DetachSegment(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if got := find(seg(6)[3:9]); got != 0 {
		t.Fatalf("a view of a detached segment found segment %d", got)
	}
	b.segs.mu.Lock()
	delete(b.segs.m, 9) // as Close does
	b.segs.mu.Unlock()
	if got := find(seg(8)); got != 0 {
		t.Fatalf("a view of a segment Close forgot found segment %d", got)
	}
	if got := find(seg(9)); got != 10 {
		t.Fatalf("a view of segment 10 found segment %d", got)
	}
}

package backend

import (
	"math/rand/v2"
	"testing"
)

// TestBlockTakesAndGivesBack runs random first-fit takes and gives on a block and
// checks the free list after each: sorted, never adjacent, disjoint from the
// taken extents, and together with them the whole block.
func TestBlockTakesAndGivesBack(t *testing.T) {
	const size = 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	b := &block{size: size, free: []extent{{0, size}}}
	var taken []extent
	for step := range 5000 {
		if len(taken) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(taken))
			b.give(taken[i].off, taken[i].size)
			taken = append(taken[:i], taken[i+1:]...)
		} else {
			n := uint64(1+rng.IntN(64)) * spanAlign
			if off, ok := b.take(n); ok {
				taken = append(taken, extent{off, n})
			}
		}
		var total uint64
		for i, e := range b.free {
			total += e.size
			if i > 0 && b.free[i-1].off+b.free[i-1].size >= e.off {
				t.Fatalf("step %d: free list %v is unsorted, overlapping or not merged", step, b.free)
			}
			for _, u := range taken {
				if e.off < u.off+u.size && u.off < e.off+e.size {
					t.Fatalf("step %d: free extent %v overlaps taken %v", step, e, u)
				}
			}
		}
		for _, u := range taken {
			total += u.size
		}
		if total != size {
			t.Fatalf("step %d: free and taken bytes add up to %d, not %d", step, total, size)
		}
	}
	for _, u := range taken {
		b.give(u.off, u.size)
	}
	if !b.empty() {
		t.Errorf("after giving everything back the free list is %v", b.free)
	}
}

// TestHeapRetainsEmptyBlocks pins that spans larger than a block, freed and taken
// again, reuse the blocks they emptied (no vkAllocateMemory), within the heap's
// retention.
func TestHeapRetainsEmptyBlocks(t *testing.T) {
	b := newTestBackend(t)
	d := b.adapters.List()[0].current()
	h := d.heapFor()
	big := h.block + spanAlign
	take := func() []span {
		var out []span
		for range 3 {
			s, err := h.alloc(big)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	for _, s := range take() {
		h.free(s)
	}
	before := d.vk.Allocations()
	for _, s := range take() {
		h.free(s)
	}
	if n := d.vk.Allocations() - before; n != 0 && 3*roundUp(big, spanAlign) <= h.retain {
		t.Errorf("taking three freed large spans again made %d vkAllocateMemory calls", n)
	}
	var idle uint64
	for _, blk := range h.blocks {
		if blk.empty() {
			idle += blk.size
		}
	}
	if idle > h.retain {
		t.Errorf("the heap keeps %d bytes of empty blocks, more than its retention of %d", idle, h.retain)
	}
}

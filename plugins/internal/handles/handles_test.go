package handles

import (
	"maps"
	"slices"
	"sync"
	"testing"
)

func TestTableHandlesStartAtOneAndAreNeverReused(t *testing.T) {
	var tab Table[string]
	if _, ok := tab.Get(0); ok {
		t.Fatal("the zero table holds handle 0")
	}
	a, b := tab.Add("a"), tab.Add("b")
	if a != 1 || b != 2 {
		t.Fatalf("handles %d, %d; want 1, 2", a, b)
	}
	if v, ok := tab.Remove(a); !ok || v != "a" {
		t.Fatalf("Remove(%d) = %q, %v", a, v, ok)
	}
	if _, ok := tab.Remove(a); ok {
		t.Fatal("a handle was removed twice")
	}
	if c := tab.Add("c"); c != 3 {
		t.Fatalf("the handle after a removal is %d, want 3", c)
	}
	if got := tab.RemoveAll(); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("RemoveAll = %q", got)
	}
	if n := tab.Len(); n != 0 {
		t.Fatalf("Len after RemoveAll = %d", n)
	}
	if d := tab.Add("d"); d != 4 {
		t.Fatalf("the handle after RemoveAll is %d, want 4", d)
	}
	if v, ok := tab.Get(4); !ok || v != "d" {
		t.Fatalf("Get(4) = %q, %v", v, ok)
	}
}

func TestTableAllIsASnapshotInHandleOrder(t *testing.T) {
	var tab Table[int]
	for i := range 5 {
		tab.Add(i * 10)
	}
	tab.Remove(2)
	var hs []uint64
	for h, v := range tab.All() {
		tab.Add(-1) // changing the table while reading All is allowed
		hs = append(hs, h)
		if want := int(h-1) * 10; v != want {
			t.Errorf("All yields %d for handle %d, want %d", v, h, want)
		}
	}
	if !slices.Equal(hs, []uint64{1, 3, 4, 5}) {
		t.Fatalf("All yields handles %v", hs)
	}
	for h := range tab.All() {
		if h == 3 {
			break
		}
	}
}

// TestTableGetHeldHoldsBeforeRemove: hold runs before a Remove of the handle
// returns, so a value destroyed after Remove under a write lock is never handed
// to a holder destroyed.
func TestTableGetHeldHoldsBeforeRemove(t *testing.T) {
	type value struct {
		use       sync.RWMutex
		destroyed bool
	}
	var tab Table[*value]
	for range 200 {
		v := &value{}
		h := tab.Add(v)
		var wg sync.WaitGroup
		wg.Go(func() {
			if got, ok := tab.Remove(h); ok {
				got.use.Lock()
				got.destroyed = true
				got.use.Unlock()
			}
		})
		wg.Go(func() {
			if got, ok := tab.GetHeld(h, func(v *value) { v.use.RLock() }); ok {
				if got.destroyed {
					t.Error("GetHeld handed out a destroyed value")
				}
				got.use.RUnlock()
			}
		})
		wg.Wait()
	}
	if _, ok := tab.GetHeld(1, func(*value) { t.Error("hold ran for a missing handle") }); ok {
		t.Error("a removed handle was found")
	}
}

func TestTableConcurrentUse(t *testing.T) {
	var tab Table[int]
	var wg sync.WaitGroup
	got := make([][]uint64, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				h := tab.Add(i)
				got[g] = append(got[g], h)
				tab.Get(h)
				tab.Len()
				for range tab.All() {
				}
				if i%2 == 0 {
					tab.Remove(h)
				}
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, hs := range got {
		for _, h := range hs {
			if seen[h] {
				t.Fatalf("handle %d given out twice", h)
			}
			seen[h] = true
		}
	}
	if len(seen) != 400 || tab.Len() != 200 {
		t.Fatalf("%d handles given out, %d left; want 400, 200", len(seen), tab.Len())
	}
	if !slices.Equal(slices.Sorted(maps.Keys(seen)), slices.Collect(func(yield func(uint64) bool) {
		for h := uint64(1); h <= 400; h++ {
			if !yield(h) {
				return
			}
		}
	})) {
		t.Fatal("the handles are not 1 to 400")
	}
}

// FuzzTable runs a sequence of operations against a map model: each byte is an
// operation (Add, Get, Remove, RemoveAll, Len/All) on a handle the next byte picks.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 2, 1, 0, 0, 3, 0, 0, 0, 4, 0})
	f.Add([]byte{2, 5, 0, 0, 2, 1, 2, 1, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var tab Table[int]
		model := map[uint64]int{}
		var last uint64
		for i := 0; i+1 < len(ops); i += 2 {
			h := uint64(ops[i+1]) % (last + 2)
			switch ops[i] % 5 {
			case 0:
				got := tab.Add(i)
				last++
				if got != last {
					t.Fatalf("op %d: Add = %d, want %d", i, got, last)
				}
				model[got] = i
			case 1:
				v, ok := tab.Get(h)
				mv, mok := model[h]
				if v != mv || ok != mok {
					t.Fatalf("op %d: Get(%d) = %d, %v; want %d, %v", i, h, v, ok, mv, mok)
				}
			case 2:
				v, ok := tab.Remove(h)
				mv, mok := model[h]
				delete(model, h)
				if v != mv || ok != mok {
					t.Fatalf("op %d: Remove(%d) = %d, %v; want %d, %v", i, h, v, ok, mv, mok)
				}
			case 3:
				got := tab.RemoveAll()
				var want []int
				for _, k := range slices.Sorted(maps.Keys(model)) {
					want = append(want, model[k])
				}
				clear(model)
				if len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
					t.Fatalf("op %d: RemoveAll = %v, want %v", i, got, want)
				}
			case 4:
				if n := tab.Len(); n != len(model) {
					t.Fatalf("op %d: Len = %d, want %d", i, n, len(model))
				}
				all := maps.Collect(tab.All())
				if !maps.Equal(all, model) {
					t.Fatalf("op %d: All = %v, want %v", i, all, model)
				}
			}
		}
	})
}

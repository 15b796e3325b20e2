package handles

import (
	"iter"
	"slices"
	"sync"
)

// Table maps handles to values. Handles start at 1 and grow by one per Add; a
// removed handle is never given out again. The zero Table is empty and ready to
// use; a Table is safe for concurrent use and must not be copied after first use.
type Table[T any] struct {
	mu   sync.RWMutex
	m    map[uint64]T
	last uint64
}

// Add stores v under a new handle and returns the handle.
func (t *Table[T]) Add(v T) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[uint64]T)
	}
	t.last++
	t.m[t.last] = v
	return t.last
}

// Get returns the value of handle h and whether h is in the table.
func (t *Table[T]) Get(h uint64) (T, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	v, ok := t.m[h]
	return v, ok
}

// GetHeld is Get that, when h is in the table, calls hold(v) before it returns,
// while a Remove of h still waits: a value whose destruction first takes a lock
// that hold takes for reading is never handed out destroyed or half destroyed.
// hold must not call into the table.
func (t *Table[T]) GetHeld(h uint64, hold func(T)) (T, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	v, ok := t.m[h]
	if ok {
		hold(v)
	}
	return v, ok
}

// Remove deletes handle h and returns its value and whether h was in the table.
func (t *Table[T]) Remove(h uint64) (T, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.m[h]
	delete(t.m, h)
	return v, ok
}

// RemoveAll empties the table and returns the values it held, in handle order.
// Handles given out before stay unused.
func (t *Table[T]) RemoveAll() []T {
	t.mu.Lock()
	defer t.mu.Unlock()
	hs := sortedHandles(t.m)
	vs := make([]T, 0, len(hs))
	for _, h := range hs {
		vs = append(vs, t.m[h])
	}
	clear(t.m)
	return vs
}

// Len is the number of handles in the table.
func (t *Table[T]) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

// All yields the handles and values in the table when All was called, in handle
// order; the table may change while the sequence is read.
func (t *Table[T]) All() iter.Seq2[uint64, T] {
	t.mu.RLock()
	hs := sortedHandles(t.m)
	vs := make([]T, 0, len(hs))
	for _, h := range hs {
		vs = append(vs, t.m[h])
	}
	t.mu.RUnlock()
	return func(yield func(uint64, T) bool) {
		for i, h := range hs {
			if !yield(h, vs[i]) {
				return
			}
		}
	}
}

func sortedHandles[T any](m map[uint64]T) []uint64 {
	hs := make([]uint64, 0, len(m))
	for h := range m {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	return hs
}

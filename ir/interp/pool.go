package interp

import "sync"

// scratchPool keeps a kernel's per-run scratch memory between runs: the workers'
// registers and masks and the run's per-lane registers are as wide as the
// kernel's lanes (up to batchLanes), and allocating and clearing them again for
// every run dominated small dispatches. A kernel's copies share its pool.
type scratchPool struct {
	workers sync.Pool // *worker, for any run of the kernel
	lanes   sync.Pool // *laneWords: k.lanes words
}

// laneWords is one per-lane register of a run (a buffer's len, num_workgroups on
// an axis, a uniform), with the value it was last filled with.
type laneWords struct {
	words  []uint32
	filled bool
	value  uint32
}

// laneRegister returns a register of k.lanes words holding v in every lane.
func (k *Kernel) laneRegister(v uint32) *laneWords {
	l, _ := k.pool.lanes.Get().(*laneWords)
	if l == nil {
		l = &laneWords{words: make([]uint32, k.lanes)}
	}
	if !l.filled || l.value != v {
		fillWords(l.words, v)
		l.filled, l.value = true, v
	}
	return l
}

// worker returns a worker for r, reusing a pooled one when it may: a strict
// kernel's workers carry a record of shared-memory accesses and are not reused.
func (k *Kernel) worker(r *runState) *worker {
	if !k.strict {
		if w, _ := k.pool.workers.Get().(*worker); w != nil {
			w.run, w.halted, w.active = r, false, nil
			return w
		}
	}
	return newWorker(r)
}

// release returns a run's workers to the pool.
func (r *runState) release(workers []*worker) {
	if r.k.strict {
		return
	}
	for _, w := range workers {
		w.run = nil
		r.k.pool.workers.Put(w)
	}
}

// releaseLanes returns a run's per-lane registers to the pool, once its workers
// are done.
func (r *runState) releaseLanes() {
	for _, l := range r.laneRegs {
		r.k.pool.lanes.Put(l)
	}
	r.laneRegs = nil
}

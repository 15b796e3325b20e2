package interp

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/kiln-dev/kiln/ir"
)

// poison fills shared arrays at the start of every workgroup: a program that reads
// shared memory before writing it sees this, never zeros (a bool reads as true).
const poison = 0xDEADBEEF

// poisonOf is the poison of a shared array of t: an f16 or bf16 element holds the
// low 16 bits, as registers hold such values.
func poisonOf(t ir.Type) uint32 {
	if t.Is16Bit() {
		return poison & 0xFFFF
	}
	return poison
}

// runState is one dispatch: its storage and the uniform registers all workers read.
type runState struct {
	k      *Kernel
	grid   [3]uint32
	groups uint64
	// Workgroups run in units: up to k.batch consecutive workgroups of one row of
	// the grid (the same y and z). rowUnits is the number of units per row.
	units     uint64
	rowUnits  uint64
	bufs      [][]uint32 // by binding
	lens      [][]uint32 // by binding: len(buffer) in every lane
	uniforms  [][]uint32 // by uniform: its value in every lane
	numGroups [3][]uint32
	laneRegs  []*laneWords  // the pooled per-lane registers above, returned after the run
	next      atomic.Uint64 // next workgroup to run
	stop      atomic.Bool   // set on the first error or on cancellation
	mu        sync.Mutex
	err       error
}

func (r *runState) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	r.stop.Store(true)
}

// worker runs units of workgroups one at a time; it owns all its scratch state.
type worker struct {
	run    *runState
	locals [][]uint32
	temps  [][]uint32
	global [3][]uint32
	group  [3][]uint32
	shared [][]uint32
	masks  []mask
	live   []bool // lanes that have not returned
	trues  []bool // all true, to set mask entries by copying
	// filled says which of global and group hold the current unit's values; they
	// are filled the first time a unit reads them.
	filledGlobal [3]bool
	filledGroup  [3]bool
	// wgID is the id of the unit's first workgroup; the unit has count workgroups
	// along x. linBase is global_id(0) of lane 0 (see Kernel.linear).
	wgID    [3]uint32
	count   int
	linBase uint32
	// active is the mask of the statement being evaluated: subgroup operations and
	// strict shared-memory checks look only at its lanes.
	active *mask
	// strict is strict mode's record of shared-memory accesses (nil when off).
	strict *shadowMemory
	// mats holds the workgroup's matrices (IR v1.2), by index in the program, each
	// row-major in register form; written says which the workgroup has written
	// (an unwritten one holds zeros). mulA and mulB hold an mma's operands as f32.
	mats       [][]uint32
	written    []bool
	mulA, mulB []float32
	halted     bool
}

func registers(n, lanes int) [][]uint32 {
	regs := make([][]uint32, n)
	store := make([]uint32, n*lanes)
	for i := range regs {
		regs[i] = store[i*lanes : (i+1)*lanes : (i+1)*lanes]
	}
	return regs
}

func newWorker(r *runState) *worker {
	k := r.k
	n := k.lanes
	w := &worker{
		run:    r,
		locals: registers(k.nLocals, n),
		temps:  registers(k.nTemps, n),
		masks:  make([]mask, k.nMasks),
		live:   make([]bool, n),
		trues:  make([]bool, n),
	}
	for i := range w.trues {
		w.trues[i] = true
	}
	for a := range 3 {
		if k.usesGlobal[a] {
			w.global[a] = make([]uint32, n)
		}
		if k.usesGroup[a] {
			w.group[a] = make([]uint32, n)
		}
	}
	on := make([]bool, k.nMasks*n)
	for i := range w.masks {
		w.masks[i].on = on[i*n : (i+1)*n : (i+1)*n]
	}
	w.shared = make([][]uint32, len(k.prog.Shared))
	for i, s := range k.prog.Shared {
		w.shared[i] = make([]uint32, s.Count)
	}
	if k.strict && len(w.shared) > 0 {
		w.strict = newShadowMemory(w.shared)
	}
	w.mats = make([][]uint32, len(k.prog.Matrices))
	w.written = make([]bool, len(k.prog.Matrices))
	elems := 0
	for i, m := range k.prog.Matrices {
		w.mats[i] = make([]uint32, int(m.Rows)*int(m.Cols))
		elems = max(elems, len(w.mats[i]))
	}
	if elems > 0 {
		w.mulA, w.mulB = make([]float32, elems), make([]float32, elems)
	}
	return w
}

// resetMatrices gives a new workgroup matrices that read as zeros, none written.
func (w *worker) resetMatrices() {
	for i, done := range w.written {
		if done {
			clear(w.mats[i])
			w.written[i] = false
		}
	}
}

func (w *worker) fail(err error) {
	w.halted = true
	w.run.fail(err)
}

// stopped reports (and halts on) cancellation or another worker's error; loops call
// it once per iteration so no program runs on unobserved.
func (w *worker) stopped() bool {
	if w.run.stop.Load() {
		w.halted = true
	}
	return w.halted
}

// loop runs units until none are left or the run stops.
func (w *worker) loop() {
	r := w.run
	for !r.stop.Load() {
		u := r.next.Add(1) - 1
		if u >= r.units {
			return
		}
		w.unit(u)
		if w.halted {
			return
		}
	}
}

// unit runs the workgroups of unit u together.
func (w *worker) unit(u uint64) {
	r, k := w.run, w.run.k
	gx, gy := uint64(r.grid[0]), uint64(r.grid[1])
	row, col := u/r.rowUnits, u%r.rowUnits
	x0 := col * uint64(k.batch)
	w.wgID = [3]uint32{uint32(x0), uint32(row % gy), uint32(row / gy)}
	w.count = int(min(uint64(k.batch), gx-x0))
	w.linBase = w.wgID[0] * k.wg[0]
	w.filledGlobal, w.filledGroup = [3]bool{}, [3]bool{}
	for i, s := range w.shared {
		fillWords(s, poisonOf(k.prog.Shared[i].Type))
	}
	w.resetMatrices()
	if w.strict != nil {
		w.strict.startWorkgroup()
	}
	n := w.count * k.group
	root := &w.masks[0]
	if k.returns || root.hi != n || root.lo != 0 {
		// Only a return changes the root mask or the live lanes.
		copy(w.live, w.trues[:n])
		root.fill(n)
	}
	k.body(w, root)
}

// groupIDs returns the workgroup_id register of axis a for the current unit.
func (w *worker) groupIDs(a int) []uint32 {
	if !w.filledGroup[a] {
		w.filledGroup[a] = true
		d := w.group[a]
		if a == 0 && w.run.k.batch > 1 {
			g := w.run.k.group
			for j := range w.count {
				fillWords(d[j*g:(j+1)*g], w.wgID[0]+uint32(j))
			}
		} else {
			fillWords(d, w.wgID[a])
		}
	}
	return w.group[a]
}

// globalIDs returns the global_id register of axis a for the current unit.
func (w *worker) globalIDs(a int) []uint32 {
	if !w.filledGlobal[a] {
		w.filledGlobal[a] = true
		k := w.run.k
		lid := k.localID[a]
		gid := w.global[a][:len(lid)]
		size := k.wg[a]
		if a == 0 && k.batch > 1 {
			for j := range w.count {
				base := (w.wgID[0] + uint32(j)) * size
				for i := j * k.group; i < (j+1)*k.group; i++ {
					gid[i] = base + lid[i]
				}
			}
		} else {
			base := w.wgID[a] * size
			for i, l := range lid {
				gid[i] = base + l
			}
		}
	}
	return w.global[a]
}

// laneWorkgroup returns the workgroup id and local id of lane i of the unit.
func (w *worker) laneWorkgroup(i int) (wg, local [3]uint32) {
	k := w.run.k
	wg = w.wgID
	wg[0] += uint32(i / k.group)
	return wg, [3]uint32{k.localID[0][i], k.localID[1][i], k.localID[2][i]}
}

func fillWords(d []uint32, v uint32) {
	for i := range d {
		d[i] = v
	}
}

// whole reports whether m holds every invocation of the workgroup, as a barrier
// and a matrix statement need. Programs with barriers or matrices run one
// workgroup per unit.
func (w *worker) whole(m *mask) bool { return m.lo == 0 && m.hi == w.run.k.group && m.dense }

// divergence describes a barrier or matrix statement (what) that m does not cover
// entirely.
func (w *worker) divergence(m *mask, what, path string) error {
	k := w.run.k
	missing := 0
	for i := range k.group {
		if i < m.lo || i >= m.hi || !m.on[i] {
			missing = i
			break
		}
	}
	fix := "keep barriers in uniform control flow, so every invocation of a workgroup reaches each one"
	if what != "barrier" {
		fix = "keep matrix statements in uniform control flow, so every invocation of a workgroup reaches each one (a matrix statement is collective, like a barrier)"
	}
	return fmt.Errorf("interp: program %q: %s at %s reached by only %d of %d invocations of workgroup (%d,%d,%d); the invocation with local id (%d,%d,%d) did not reach it (it returned, left a loop or took another branch). Fix: %s",
		k.prog.Name, what, path, m.count(), k.group, w.wgID[0], w.wgID[1], w.wgID[2],
		k.localID[0][missing], k.localID[1][missing], k.localID[2][missing], fix)
}

// Run executes the kernel once; it returns one byte slice per output buffer (write
// and read_write) in binding order. Inputs are never modified. Safe for concurrent
// use.
func (k *Kernel) Run(ctx context.Context, l Launch) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interp: program %q not run: %w", k.prog.Name, err)
	}
	r, err := k.newRun(l)
	if err != nil {
		return nil, err
	}
	if err := r.run(ctx); err != nil {
		return nil, err
	}
	var outs [][]byte
	for _, b := range k.prog.Outputs() {
		outs = append(outs, encodeElems(r.bufs[b], k.elemSizes[b]))
	}
	return outs, nil
}

// run executes every workgroup, stopping early when ctx ends.
func (r *runState) run(ctx context.Context) error {
	k := r.k
	defer r.releaseLanes()
	if r.groups > 0 {
		stop := context.AfterFunc(ctx, func() { r.stop.Store(true) })
		r.execute(k.workerCount(r.units))
		stop()
	}
	if r.err != nil {
		return r.err
	}
	if r.stop.Load() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interp: program %q stopped before finishing its %d workgroups: %w", k.prog.Name, r.groups, err)
		}
	}
	return nil
}

func (k *Kernel) workerCount(units uint64) int {
	n := runtime.GOMAXPROCS(0)
	if k.workers > 0 {
		n = k.workers
	}
	if uint64(n) > units {
		n = int(units)
	}
	return n
}

// execute runs every workgroup on n workers, each with its own scratch state.
func (r *runState) execute(n int) {
	workers := make([]*worker, n)
	for i := range workers {
		workers[i] = r.k.worker(r)
	}
	defer r.release(workers)
	if n == 1 {
		workers[0].loop()
		return
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop()
		}()
	}
	wg.Wait()
}

// newRun checks the launch and sets up the storage and uniform registers.
func (k *Kernel) newRun(l Launch) (*runState, error) {
	p := k.prog
	if len(l.Inputs) > len(p.Buffers) {
		return nil, fmt.Errorf("interp: program %q has %d buffers but the launch gives %d inputs. Fix: pass one input per binding (nil for write buffers)",
			p.Name, len(p.Buffers), len(l.Inputs))
	}
	r, err := k.newRunState(l.Grid, l.Uniforms)
	if err != nil {
		return nil, err
	}
	for _, d := range p.Buffers {
		var in []byte
		if int(d.Binding) < len(l.Inputs) {
			in = l.Inputs[d.Binding]
		}
		words, err := k.bufferWords(d, in, l.OutputCounts)
		if err != nil {
			return nil, err
		}
		r.bind(d.Binding, words)
	}
	return r, nil
}

// newRunState checks the grid and sets up the uniform registers (from the
// program's uniform block); the caller binds every buffer.
func (k *Kernel) newRunState(grid [3]uint32, uniforms []byte) (*runState, error) {
	p := k.prog
	r := &runState{k: k, grid: grid, bufs: make([][]uint32, len(p.Buffers)), lens: make([][]uint32, len(p.Buffers))}
	groups := uint64(1)
	for a, g := range grid {
		if uint64(g)*uint64(k.wg[a]) > math.MaxUint32+1 {
			return nil, fmt.Errorf("interp: program %q: grid %v with workgroup size %v gives more than 2^32 invocations on axis %d, beyond a u32 global_id. Fix: use a smaller grid",
				p.Name, grid, k.wg, a)
		}
		hi, lo := bits.Mul64(groups, uint64(g))
		if hi != 0 || lo > math.MaxInt64 {
			return nil, fmt.Errorf("interp: program %q: grid %v has more than 2^63 workgroups. Fix: use a smaller grid", p.Name, grid)
		}
		groups = lo
	}
	r.groups = groups
	if groups > 0 {
		r.rowUnits = (uint64(grid[0]) + uint64(k.batch) - 1) / uint64(k.batch)
		r.units = groups / uint64(grid[0]) * r.rowUnits
	}
	vals, err := ir.DecodeUniforms(p, uniforms)
	if err != nil {
		return nil, fmt.Errorf("interp: %w", err)
	}
	r.uniforms = make([][]uint32, len(vals))
	for i, v := range vals {
		r.uniforms[i] = r.laneRegister(v.Bits)
	}
	for a := range 3 {
		r.numGroups[a] = r.laneRegister(grid[a])
	}
	return r, nil
}

// laneRegister takes a pooled per-lane register holding v for this run.
func (r *runState) laneRegister(v uint32) []uint32 {
	l := r.k.laneRegister(v)
	r.laneRegs = append(r.laneRegs, l)
	return l.words
}

// bind makes words the storage of binding b.
func (r *runState) bind(b uint32, words []uint32) {
	r.bufs[b] = words
	r.lens[b] = r.laneRegister(uint32(len(words)))
}

// bufferWords returns the storage of buffer d for one run: a read input as is (it is
// never written), a copy of a read_write input, or zeros for a write buffer.
func (k *Kernel) bufferWords(d ir.BufferDecl, in []byte, counts []uint32) ([]uint32, error) {
	name := k.prog.Name
	if d.Access == ir.Write {
		if len(in) != 0 {
			return nil, fmt.Errorf("interp: program %q: buffer %q (binding %d) is write-only but got %d input bytes. Fix: pass nil for write buffers and size them with OutputCounts",
				name, d.Name, d.Binding, len(in))
		}
		n := d.Count
		if n == 0 && int(d.Binding) < len(counts) {
			n = counts[d.Binding]
		}
		return make([]uint32, n), nil
	}
	size := elemSize(d.Type)
	if len(in)%size != 0 {
		return nil, fmt.Errorf("interp: program %q: input of buffer %q (binding %d) is %d bytes, not a multiple of %d. Fix: pass whole %d-byte %s elements",
			name, d.Name, d.Binding, len(in), size, size, d.Type)
	}
	if d.Count != 0 && uint64(len(in)) != uint64(d.Count)*uint64(size) {
		return nil, fmt.Errorf("interp: program %q: buffer %q (binding %d) holds exactly %d elements but its input is %d bytes. Fix: pass %d bytes",
			name, d.Name, d.Binding, d.Count, len(in), uint64(d.Count)*uint64(size))
	}
	if uint64(len(in))/uint64(size) > math.MaxUint32 {
		return nil, fmt.Errorf("interp: program %q: input of buffer %q (binding %d) has %d elements, more than a u32 len. Fix: split the work into smaller buffers",
			name, d.Name, d.Binding, len(in)/size)
	}
	switch {
	case size != 4:
		return decodeElems(in, size), nil
	case d.Access == ir.Read:
		return bytesWords(in), nil
	}
	return copyWords(in), nil
}

package interp

import "fmt"

// Strict mode (Options.Strict) keeps a shadow of every shared-array word: which
// lanes wrote, read or atomically updated it since the last barrier (an
// interval), and whether any lane of the workgroup wrote it at all. Lockstep
// execution runs every lane's part of a statement before the next statement, so
// the order the interpreter sees is only one of the orders a GPU may choose;
// strict mode therefore reports every pair of accesses a GPU may reorder — any two
// accesses of one word by different lanes in one interval where one of them writes
// and they are not both atomic — as well as reads of words nothing wrote (the
// poison fill) and out-of-bounds shared indices. See docs/design.md, "The oracle
// and strict mode".

// Hazard is the kind of problem strict mode found.
type Hazard uint8

// The hazards strict mode reports.
const (
	// ReadAfterWrite: a lane read a word another lane wrote in the same interval.
	ReadAfterWrite Hazard = iota + 1
	// WriteAfterRead: a lane wrote a word another lane read in the same interval.
	WriteAfterRead
	// WriteAfterWrite: two lanes wrote one word in the same interval.
	WriteAfterWrite
	// AtomicRace: an atomic and a plain access by different lanes met on one word
	// in the same interval.
	AtomicRace
	// UninitializedRead: a lane read (or atomically updated) a word no lane of the
	// workgroup had written, so it reads the undefined initial contents.
	UninitializedRead
	// OutOfBounds: a shared-array index at or beyond the array's count.
	OutOfBounds
	// NonUniformOperand: the invocations of a workgroup computed different values
	// for an operand of a matrix statement (IR v1.2), which must be the same on
	// every invocation.
	NonUniformOperand
	// UnwrittenMatrix: a matrix statement read a matrix (mma a, b or acc, a store's
	// matrix, a convert's source) that the workgroup had not filled, loaded,
	// converted into or accumulated into.
	UnwrittenMatrix
)

var hazardNames = [...]string{
	ReadAfterWrite: "read after write", WriteAfterRead: "write after read", WriteAfterWrite: "write after write",
	AtomicRace: "atomic race", UninitializedRead: "uninitialized read", OutOfBounds: "out of bounds",
	NonUniformOperand: "non-uniform matrix operand", UnwrittenMatrix: "unwritten matrix",
}

func (h Hazard) String() string {
	if h > 0 && int(h) < len(hazardNames) {
		return hazardNames[h]
	}
	return "invalid"
}

// StrictError is a hazard strict mode found: a shared-memory race or misuse, or a
// misused workgroup matrix. The invocations are named by workgroup id and local
// id; the statements by path (body[3].then[1]). A matrix statement's shared-memory
// accesses are the whole workgroup's: such an access is named by Collective (or
// OtherCollective) instead of an invocation.
type StrictError struct {
	Program string
	Hazard  Hazard
	// Array is the shared array, Index the word's index and Count the array's
	// element count.
	Array string
	Index uint32
	Count uint32
	// Workgroup is the workgroup; Invocation the local id of the lane whose access
	// was found to conflict, at Statement.
	Workgroup  [3]uint32
	Invocation [3]uint32
	Statement  string
	// Other is the local id of the other lane of a race, at OtherStatement; both
	// are unset for UninitializedRead and OutOfBounds.
	Other          [3]uint32
	OtherStatement string
	// Collective: the access at Statement is a matrix statement's (IR v1.2), made
	// by the workgroup as a whole, and Invocation is unset; OtherCollective says
	// the same of the access at OtherStatement.
	Collective      bool
	OtherCollective bool
	// Matrix names the matrix of an UnwrittenMatrix hazard. For NonUniformOperand,
	// Operand names the operand ("offset", "stride", "bound rows", "bound cols",
	// "value"), and Value and OtherValue are its bits as computed by Invocation and
	// by Other (the invocation with local id (0,0,0), whose values a run outside
	// strict mode uses).
	Matrix     string
	Operand    string
	Value      uint32
	OtherValue uint32
}

func (e *StrictError) Error() string {
	inv := func(id [3]uint32) string { return fmt.Sprintf("invocation (%d,%d,%d)", id[0], id[1], id[2]) }
	who, other := inv(e.Invocation), inv(e.Other)
	if e.Collective {
		who = "the workgroup's matrix statement"
	}
	if e.OtherCollective {
		other = "the workgroup's matrix statement"
	}
	head := fmt.Sprintf("interp: strict: program %q, workgroup (%d,%d,%d): %s: ", e.Program,
		e.Workgroup[0], e.Workgroup[1], e.Workgroup[2], e.Hazard)
	word := fmt.Sprintf("shared %q[%d]", e.Array, e.Index)
	const sync = "Fix: put a barrier between the two accesses, or give each invocation its own word"
	switch e.Hazard {
	case ReadAfterWrite:
		return head + fmt.Sprintf("%s reads %s at %s, which %s wrote at %s with no barrier in between. Fix: put a barrier between the write and the read",
			who, word, e.Statement, other, e.OtherStatement)
	case WriteAfterRead:
		return head + fmt.Sprintf("%s writes %s at %s, which %s read at %s with no barrier in between, so the read may see either value. %s",
			who, word, e.Statement, other, e.OtherStatement, sync)
	case WriteAfterWrite:
		return head + fmt.Sprintf("%s writes %s at %s, which %s also wrote at %s with no barrier in between, so either value may remain. %s",
			who, word, e.Statement, other, e.OtherStatement, sync)
	case AtomicRace:
		return head + fmt.Sprintf("%s accesses %s at %s, which %s accessed at %s with no barrier in between, one atomically and one not. Fix: use atomics for every access of the word between barriers, or separate the accesses with a barrier",
			who, word, e.Statement, other, e.OtherStatement)
	case UninitializedRead:
		return head + fmt.Sprintf("%s reads %s at %s, which no invocation of the workgroup has written; shared memory starts undefined. Fix: store to the word (and put a barrier after the store) before reading it",
			who, word, e.Statement)
	case NonUniformOperand:
		return head + fmt.Sprintf("%s computes the %s of the matrix statement at %s as %#x, but %s computes %#x; a matrix statement's operands must be the same on every invocation of the workgroup. Fix: compute them from values every invocation shares (workgroup_id, parameters, uniforms, len, uniform loop counters)",
			who, e.Operand, e.Statement, e.Value, other, e.OtherValue)
	case UnwrittenMatrix:
		return head + fmt.Sprintf("the matrix statement at %s reads matrix %q, which the workgroup has not filled, loaded or converted into (outside strict mode it reads as 0). Fix: matrix_fill, matrix_load or matrix_convert it first",
			e.Statement, e.Matrix)
	case OutOfBounds:
		return head + fmt.Sprintf("%s indexes %s at %s, beyond its %d elements (the IR makes such a load 0 and such a store nothing, but it is usually an indexing bug). Fix: keep shared indices below the array's count, also in both operands of a select",
			inv(e.Invocation), word, e.Statement, e.Count)
	}
	return head + fmt.Sprintf("%s at %s", word, e.Statement)
}

// site is one shared-memory access in the program, named in reports.
type site struct {
	path  string // the statement
	array string
	index int // the shared array's index
}

// site registers an access to shared array t by the statement being compiled.
func (c *compiler) site(t target) int {
	c.k.sites = append(c.k.sites, site{path: c.path, array: t.name, index: t.index})
	return len(c.k.sites) - 1
}

const noLane = -1

// matrixLane stands for the workgroup as a whole in the shadow: the accesses of
// the matrix statements (IR v1.2), which are ordered among themselves but race
// with any invocation's access that no barrier separates from them.
const matrixLane = -2

// shadowWord is what strict mode knows about one shared word. Its lane and site
// fields describe interval iv only; an older iv means no access yet.
type shadowWord struct {
	iv      uint32
	written uint32   // the workgroup stamp of the last write; another stamp: never
	writer  int32    // the lane that wrote in this interval
	wsite   int32    // and where
	readers [2]int32 // up to two distinct lanes that read in this interval
	rsites  [2]int32
	atomics [2]int32 // up to two distinct lanes that updated it atomically
	asites  [2]int32
}

// shadowMemory is one worker's shadow of its shared arrays.
type shadowMemory struct {
	arrays [][]shadowWord
	iv     uint32 // the current interval, new at every barrier and workgroup
	stamp  uint32 // the current workgroup
}

func newShadowMemory(shared [][]uint32) *shadowMemory {
	s := &shadowMemory{arrays: make([][]shadowWord, len(shared))}
	for i, a := range shared {
		s.arrays[i] = make([]shadowWord, len(a))
	}
	return s
}

func (s *shadowMemory) startWorkgroup() {
	s.stamp++
	s.iv++
}

func (s *shadowMemory) barrier() { s.iv++ }

// word returns the shadow of word k of array a, reset if it describes an older
// interval.
func (s *shadowMemory) word(a int, k uint32) *shadowWord {
	sw := &s.arrays[a][k]
	if sw.iv != s.iv {
		sw.iv = s.iv
		sw.writer = noLane
		sw.readers = [2]int32{noLane, noLane}
		sw.atomics = [2]int32{noLane, noLane}
	}
	return sw
}

// other returns a lane of set other than lane, and its site.
func other(set, sites [2]int32, lane int32) (int32, int32, bool) {
	for i, l := range set {
		if l != noLane && l != lane {
			return l, sites[i], true
		}
	}
	return 0, 0, false
}

// note adds lane to set (two lanes are enough to find a conflict with any third).
func note(set, sites *[2]int32, lane, at int32) {
	switch {
	case set[0] == lane || set[1] == lane:
	case set[0] == noLane:
		set[0], sites[0] = lane, at
	case set[1] == noLane:
		set[1], sites[1] = lane, at
	}
}

// report stops the run with a StrictError for lane's access at site at; other is
// the conflicting lane and its site, when there is one. Either lane may be
// matrixLane.
func (w *worker) report(h Hazard, at int, lane int, k uint32, otherLane, otherSite int32, hasOther bool) {
	kr := w.run.k
	s := kr.sites[at]
	e := &StrictError{Program: kr.prog.Name, Hazard: h, Array: s.array, Index: k,
		Count: uint32(len(w.shared[s.index])), Workgroup: w.wgID, Statement: s.path}
	if lane == matrixLane {
		e.Collective = true
	} else {
		e.Workgroup, e.Invocation = w.laneWorkgroup(lane)
	}
	if hasOther {
		if otherLane == matrixLane {
			e.OtherCollective = true
		} else {
			_, e.Other = w.laneWorkgroup(int(otherLane))
		}
		e.OtherStatement = kr.sites[otherSite].path
	}
	w.fail(e)
}

// strictLoad is a shared-array load in strict mode: active lanes are checked and
// recorded as readers; inactive lanes compute the value unchecked (they discard it).
func (w *worker) strictLoad(at int, d, idx, words []uint32, lo, hi int, isBool bool) {
	m, s := w.active, w.strict
	a := w.run.k.sites[at].index
	n := uint32(len(words))
	for i := lo; i < hi; i++ {
		k := idx[i]
		if k >= n {
			if m.has(i) {
				w.report(OutOfBounds, at, i, k, 0, 0, false)
				return
			}
			d[i] = 0
			continue
		}
		if m.has(i) && !w.strictRead(at, int32(i), k, s.word(a, k)) {
			return
		}
		d[i] = words[k]
		if isBool {
			d[i] = boolBits(d[i] != 0)
		}
	}
}

// strictStore is a shared-array store in strict mode, in lane order.
func (w *worker) strictStore(at int, m *mask, idx, vals, words []uint32) {
	s := w.strict
	a := w.run.k.sites[at].index
	n := uint32(len(words))
	for i := m.lo; i < m.hi; i++ {
		if !m.has(i) {
			continue
		}
		k := idx[i]
		if k >= n {
			w.report(OutOfBounds, at, i, k, 0, 0, false)
			return
		}
		sw := s.word(a, k)
		lane := int32(i)
		if sw.writer != noLane && sw.writer != lane {
			w.report(WriteAfterWrite, at, i, k, sw.writer, sw.wsite, true)
			return
		}
		if l, ls, ok := other(sw.readers, sw.rsites, lane); ok {
			w.report(WriteAfterRead, at, i, k, l, ls, true)
			return
		}
		if l, ls, ok := other(sw.atomics, sw.asites, lane); ok {
			w.report(AtomicRace, at, i, k, l, ls, true)
			return
		}
		sw.writer, sw.wsite, sw.written = lane, int32(at), s.stamp
		words[k] = vals[i]
	}
}

// strictAtomic checks lane i's atomic on word k of a shared array of n words and
// records it; false means the run stops.
func (w *worker) strictAtomic(at, i int, k uint32, n int) bool {
	s := w.strict
	if k >= uint32(n) {
		w.report(OutOfBounds, at, i, k, 0, 0, false)
		return false
	}
	sw := s.word(w.run.k.sites[at].index, k)
	lane := int32(i)
	switch {
	case sw.written != s.stamp:
		w.report(UninitializedRead, at, i, k, 0, 0, false)
		return false
	case sw.writer != noLane && sw.writer != lane:
		w.report(AtomicRace, at, i, k, sw.writer, sw.wsite, true)
		return false
	}
	if l, ls, ok := other(sw.readers, sw.rsites, lane); ok {
		w.report(AtomicRace, at, i, k, l, ls, true)
		return false
	}
	note(&sw.atomics, &sw.asites, lane, int32(at))
	sw.written = s.stamp
	return true
}

// strictMatrixRead checks a matrix statement's read of word k of the shared array
// of site at and records it; false means the run stops. Matrix statements do not
// conflict with each other, only with invocations' own accesses.
func (w *worker) strictMatrixRead(at int, k uint32) bool {
	return w.strictRead(at, matrixLane, k, w.strict.word(w.run.k.sites[at].index, k))
}

// strictRead checks lane's read of word k (sw) at site at — the workgroup wrote
// the word, no other lane did, no other lane updated it atomically — and records
// it; false means the run stops.
func (w *worker) strictRead(at int, lane int32, k uint32, sw *shadowWord) bool {
	switch {
	case sw.written != w.strict.stamp:
		w.report(UninitializedRead, at, int(lane), k, 0, 0, false)
		return false
	case sw.writer != noLane && sw.writer != lane:
		w.report(ReadAfterWrite, at, int(lane), k, sw.writer, sw.wsite, true)
		return false
	}
	if l, ls, ok := other(sw.atomics, sw.asites, lane); ok {
		w.report(AtomicRace, at, int(lane), k, l, ls, true)
		return false
	}
	note(&sw.readers, &sw.rsites, lane, int32(at))
	return true
}

// strictMatrixWrite checks a matrix statement's write of word k of the shared
// array of site at and records it; false means the run stops.
func (w *worker) strictMatrixWrite(at int, k uint32) bool {
	s := w.strict
	sw := s.word(w.run.k.sites[at].index, k)
	if sw.writer != noLane && sw.writer != matrixLane {
		w.report(WriteAfterWrite, at, matrixLane, k, sw.writer, sw.wsite, true)
		return false
	}
	if l, ls, ok := other(sw.readers, sw.rsites, matrixLane); ok {
		w.report(WriteAfterRead, at, matrixLane, k, l, ls, true)
		return false
	}
	if l, ls, ok := other(sw.atomics, sw.asites, matrixLane); ok {
		w.report(AtomicRace, at, matrixLane, k, l, ls, true)
		return false
	}
	sw.writer, sw.wsite, sw.written = matrixLane, int32(at), s.stamp
	return true
}

// Strict reports whether the kernel runs in strict mode.
func (k *Kernel) Strict() bool { return k.strict }

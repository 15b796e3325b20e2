package kit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/verify"
	"github.com/kiln-dev/kiln/pluginapi"
)

// semantic is one case of the semantics tables: a small program that exercises
// one rule of docs/design.md, "The program (IR)", on its edge values, with a
// launch. The backend's outputs are compared with the CPU reference's (verify.Outputs).
type semantic struct {
	name string
	prog *ir.Program
	c    launch
	// pinned, when set, holds for each output buffer the leading elements the
	// table states (docs/design.md's values); the CPU reference must give them
	// (any NaN for a NaN), or the case fails as a kiln bug before the backend runs.
	pinned [][]uint32
	// unordered compares every output as a multiset of words: the order in which
	// contending atomics ran is free, the values they returned are not.
	unordered bool
	// refusable lets the backend refuse the dispatch with a RejectedError
	// instead of returning outputs (a driver's loop limit; see
	// longLoopCases); outputs it returns must still be right.
	refusable bool
	// err is a mistake in building the case (a kiln bug), reported when it runs.
	err error
}

// table is one group of the semantics subtest.
type table struct {
	name  string
	cases []semantic
}

// semanticTables lists every table in the order Run runs them.
func semanticTables() []table {
	return []table{
		{"operator", operatorCases()},
		{"cast", castCases()},
		{"memory", memoryCases()},
		{"control", controlCases()},
		{"atomic", atomicCases()},
		{"uniform", uniformCases()},
		{"subgroup", subgroupCases()},
		{"f16", f16Cases()},
		{"matrix", matrixCases()},
	}
}

// SemanticCases is the number of cases of the semantics subtest.
func SemanticCases() int {
	n := 0
	for _, t := range semanticTables() {
		n += len(t.cases)
	}
	return n
}

// Program is a program of the semantics tables with the launch options it runs
// under, for a backend's own tests that need every program without running the
// kit: to emit and assemble each, or to check that together they use every
// operation and statement of the IR.
type Program struct {
	// Name is the case's subtest name under "semantics": "control/for".
	Name string
	// Program is the case's program.
	Program *ir.Program
	// Spec and WorkgroupSize are the launch's specialization values and
	// workgroup-size override (zero: the program's own).
	Spec          ir.SpecMap
	WorkgroupSize [3]uint32
}

// SemanticPrograms returns the programs of the semantics tables, one per case
// (SemanticCases of them), in the order Run runs them.
func SemanticPrograms() []Program {
	var out []Program
	for _, t := range semanticTables() {
		for _, s := range t.cases {
			out = append(out, Program{Name: t.name + "/" + s.name, Program: s.prog, Spec: s.c.Spec, WorkgroupSize: s.c.WorkgroupSize})
		}
	}
	return out
}

// semantics runs every table, one subtest per table and case.
func (r *runner) semantics(t T) {
	for _, tab := range semanticTables() {
		t.Run(tab.name, func(t T) {
			for _, s := range tab.cases {
				t.Run(s.name, func(t T) { r.semanticCase(t, s) })
			}
		})
	}
}

func (r *runner) semanticCase(t T, s semantic) {
	if s.err != nil {
		t.Fatalf("the kit's case is broken (a kiln bug): %v", s.err)
	}
	if err := ir.Validate(s.prog); err != nil {
		t.Fatalf("the kit's program %q is invalid (a kiln bug): %v", s.prog.Name, err)
	}
	exp := r.expect(s.prog, s.c, s.unordered)
	for _, ref := range exp.refs {
		want, err := ref(s.prog)
		if err != nil {
			t.Fatalf("CPU reference failed on %q (a kiln bug): %v", s.prog.Name, err)
		}
		if err := checkPinned(s, want); err != nil {
			t.Fatalf("the CPU reference disagrees with the kit's table (a kiln bug): %v", err)
		}
	}
	comp := r.compileOrSkip(t, s.prog, s.c, nil)
	res, err := r.dispatch(comp.Pipeline, s.c)
	var rejected *pluginapi.RejectedError
	if err != nil && s.refusable && errors.As(err, &rejected) {
		t.Skipf("the backend refuses this launch, which the case allows (a driver's loop limit), and returns no outputs: %v", err)
	}
	if err != nil {
		t.Fatalf("Dispatch %s: %v", s.prog.Name, err)
	}
	got := res.Outputs
	if s.unordered {
		got = sortWords(got)
	}
	if err := exp.verify(got); err != nil {
		t.Errorf("%v", err)
	}
}

// sortWords returns copies of bufs with their 4-byte words in ascending order; a
// trailing partial word stays last.
func sortWords(bufs [][]byte) [][]byte {
	out := make([][]byte, len(bufs))
	for i, b := range bufs {
		ws := wordsOf(b)
		slices.Sort(ws)
		out[i] = append(words(ws), b[4*len(ws):]...)
	}
	return out
}

// checkPinned checks the reference's outputs against the values s states.
func checkPinned(s semantic, want [][]byte) error {
	outs := s.prog.Outputs()
	for k, pins := range s.pinned {
		if k >= len(want) {
			return fmt.Errorf("program %q: output %d is shorter than the %d values the table states", s.prog.Name, k, len(pins))
		}
		decl := s.prog.Buffers[outs[k]]
		size := int(decl.Type.Size())
		if size*len(pins) > len(want[k]) {
			return fmt.Errorf("program %q: output %d is shorter than the %d values the table states", s.prog.Name, k, len(pins))
		}
		for i, p := range pins {
			w := element(want[k], size, i)
			if w == p || decl.Type.IsFloat() && isNaN(decl.Type, w) && isNaN(decl.Type, p) {
				continue
			}
			return fmt.Errorf("program %q: %s[%d] is %s, the table says %s", s.prog.Name, decl.Name, i,
				verify.Format(decl.Type, w), verify.Format(decl.Type, p))
		}
	}
	return nil
}

// words encodes ws as little-endian buffer data.
func words(ws []uint32) []byte {
	out := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(out[4*i:], w)
	}
	return out
}

// wordsOf decodes little-endian buffer data; a trailing partial word is ignored.
func wordsOf(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// element reads element i of size bytes (2 or 4) from little-endian data.
func element(data []byte, size, i int) uint32 {
	if size == 2 {
		return uint32(binary.LittleEndian.Uint16(data[2*i:]))
	}
	return binary.LittleEndian.Uint32(data[4*i:])
}

// inOut starts a program of wg invocations along x that reads a buffer "in" of
// element type inT and writes a buffer "out" of element type outT, declared in
// that order; it returns the builder and the two buffers' names.
func inOut(name string, wg uint32, inT, outT ir.Type) (b *ir.Builder, in, out string) {
	b = ir.NewBuilder(name, wg, 1, 1)
	return b, b.Buffer("in", inT, ir.Read), b.Buffer("out", outT, ir.Write)
}

// isNaN reports whether bits is a NaN of float type t: f32, or f16 or bf16 in
// the low 16 bits.
func isNaN(t ir.Type, bits uint32) bool { return math.IsNaN(verify.Value(t, bits)) }

// encode writes values of type t as little-endian buffer data: 2 bytes each
// for f16 and bf16 (the low 16 bits), 4 for the others.
func encode(t ir.Type, values []uint32) []byte {
	if !t.Is16Bit() {
		return words(values)
	}
	out := make([]byte, 2*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint16(out[2*i:], uint16(v))
	}
	return out
}

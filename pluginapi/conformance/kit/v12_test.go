package kit

import (
	"os"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// The IR v1.2 parts of the kit pinned by broken in-process backends: each
// rewrites the programs it compiles the way a real backend bug would, and must
// fail the tables (and corpus kernels) that cover the rule it breaks, and
// nothing else.

// mapStmts applies f to every statement of stmts, nested blocks first, and
// splices in the statements it returns.
func mapStmts(stmts []ir.Stmt, f func(ir.Stmt) []ir.Stmt) []ir.Stmt {
	var out []ir.Stmt
	for _, s := range stmts {
		switch x := s.(type) {
		case ir.IfStmt:
			x.Then, x.Else = mapStmts(x.Then, f), mapStmts(x.Else, f)
			s = x
		case ir.ForStmt:
			x.Body = mapStmts(x.Body, f)
			s = x
		case ir.WhileStmt:
			x.Body = mapStmts(x.Body, f)
			s = x
		}
		out = append(out, f(s)...)
	}
	return out
}

// scratch is the shared array dropLastK adds.
const scratch = "kiln_broken_scratch"

// dropLastK rewrites every matrix_mma acc, a, b to drop its last K step, as
// an emitter with an off-by-one K loop would: a goes through a shared array
// and back with its last column bounded out (zero).
func dropLastK(p *ir.Program) *ir.Program {
	q := *p
	var t ir.Type
	var size uint32
	q.Body = mapStmts(p.Body, func(s ir.Stmt) []ir.Stmt {
		m, ok := s.(ir.MatrixMMAStmt)
		if !ok {
			return []ir.Stmt{s}
		}
		a, _ := p.Matrix(m.A)
		t, size = a.Type, max(size, a.Rows*a.Cols)
		k := ir.LitU32(a.Cols)
		return []ir.Stmt{
			ir.MatrixStoreStmt{Matrix: m.A, To: scratch, Offset: ir.LitU32(0), Stride: k, Layout: ir.RowMajor},
			ir.MatrixLoadStmt{Matrix: m.A, From: scratch, Offset: ir.LitU32(0), Stride: k, Layout: ir.RowMajor,
				Bound: &ir.MatrixBound{Rows: ir.LitU32(a.Rows), Cols: ir.LitU32(a.Cols - 1)}},
			m,
		}
	})
	if size > 0 {
		q.Shared = append(append([]ir.SharedDecl{}, p.Shared...), ir.SharedDecl{Name: scratch, Type: t, Count: size})
	}
	return &q
}

// ignoreBounds drops the bound of every matrix_load and matrix_store.
func ignoreBounds(p *ir.Program) *ir.Program {
	q := *p
	q.Body = mapStmts(p.Body, func(s ir.Stmt) []ir.Stmt {
		switch x := s.(type) {
		case ir.MatrixLoadStmt:
			x.Bound = nil
			s = x
		case ir.MatrixStoreStmt:
			x.Bound = nil
			s = x
		}
		return []ir.Stmt{s}
	})
	return &q
}

// truncatingCasts rewrites every cast of an f32 to f16 or bf16 to truncate
// (clear the f32 bits below the narrow type's last place) before the cast, so
// it rounds toward zero wherever the result is normal.
func truncatingCasts(p *ir.Program) *ir.Program {
	return rewriteExprs(p, func(e ir.Expr) ir.Expr {
		c, ok := e.(ir.CastExpr)
		if !ok || !c.To.Is16Bit() || !operandOf(p, ir.F32, c.X) {
			return e
		}
		mask := uint32(0xFFFFE000)
		if c.To == ir.BF16 {
			mask = 0xFFFF0000
		}
		return ir.Cast(c.To, ir.Bitcast(ir.F32, ir.BinaryExpr{Op: ir.OpAnd, X: ir.Bitcast(ir.U32, c.X), Y: ir.LitU32(mask)}))
	})
}

// contractF16 contracts every f16 a·b + c into fma(a, b, c), as an emitter
// that forgets NoContraction on f16 would.
func contractF16(p *ir.Program) *ir.Program {
	return rewriteExprs(p, func(e ir.Expr) ir.Expr {
		add, ok := e.(ir.BinaryExpr)
		if !ok || add.Op != ir.OpAdd {
			return e
		}
		mul, ok := add.X.(ir.BinaryExpr)
		if !ok || mul.Op != ir.OpMul || !operandOf(p, ir.F16, mul.X) {
			return e
		}
		return ir.Fma(mul.X, mul.Y, add.Y)
	})
}

// brokenV12 are the broken backends, by the name the helper test reads from
// the environment.
var brokenV12 = map[string]func() *interpBackend{
	"drop_last_k":      func() *interpBackend { return &interpBackend{rewrite: dropLastK} },
	"ignore_bounds":    func() *interpBackend { return &interpBackend{rewrite: ignoreBounds} },
	"truncating_casts": func() *interpBackend { return &interpBackend{rewrite: truncatingCasts} },
	"contract_f16":     func() *interpBackend { return &interpBackend{rewrite: contractF16} },
	"false_f16_claim": func() *interpBackend {
		return &interpBackend{no16: true, profile: pluginapi.DeviceProfile{SupportsF16: true, SupportsBF16: true}}
	},
	"no_16bit": func() *interpBackend { return &interpBackend{no16: true} },
}

const brokenV12Env = "KILN_CONFORMANCE_BROKEN_V12"

// TestBrokenV12Helper runs the kit's v1.2 tables and kernels on the backend
// brokenV12Env names, in a child process of TestRunCatchesBrokenV12; it skips
// otherwise.
func TestBrokenV12Helper(t *testing.T) {
	name := os.Getenv(brokenV12Env)
	if name == "" {
		t.Skip("helper for TestRunCatchesBrokenV12")
	}
	check(t, brokenV12[name](), Options{Kernels: []string{"vector_add_f16", "matmul_tc"}, Sizes: []int{17, 100}})
}

// runBrokenV12 runs the helper on the named backend and returns its output and
// whether it passed.
func runBrokenV12(t *testing.T, name string) (string, bool) {
	t.Helper()
	return runHelper(t, "TestBrokenV12Helper", brokenV12Env, name)
}

// TestRunCatchesBrokenV12 pins that each broken backend fails the cases of
// the rule it breaks — and only those (besides the parents of a failing
// case).
func TestRunCatchesBrokenV12(t *testing.T) {
	for _, c := range []struct {
		backend string
		// fails must each appear as a failing case; every failing case must
		// contain one of allowed.
		fails, allowed []string
	}{
		{"drop_last_k",
			[]string{"/semantics/matrix/mma.f16 ", "/semantics/matrix/mma.tf32 ", "/semantics/matrix/chain.bf16 ", "/semantics/matrix/square.f16 ", "/matmul_tc/size=100 "},
			[]string{"/matrix/mma.", "/matrix/chain.", "/matrix/square.", "/matmul_tc/"}},
		// matmul_tc without bounds is a racy program (edge tiles store over their
		// neighbours' elements, which of them wins depends on scheduling), so it
		// may fail but is not required to.
		{"ignore_bounds",
			[]string{"/semantics/matrix/bound.17x31.f32 ", "/semantics/matrix/bound.col.5x0.bf16 ", "/semantics/matrix/chain.f16 "},
			[]string{"/matrix/bound.", "/matrix/chain.", "/matmul_tc/size=100"}},
		{"truncating_casts",
			[]string{"/semantics/f16/cast.f32.f16 ", "/semantics/f16/cast.f32.bf16 ", "/semantics/f16/cast.f32.f16.const "},
			[]string{"/f16/cast.f32."}},
		{"contract_f16",
			[]string{"/semantics/f16/muladd.f16 ", "/semantics/f16/muladd.f16.const "},
			[]string{"/f16/muladd.f16"}},
		{"false_f16_claim",
			[]string{"/semantics/f16/add.f16 ", "/semantics/f16/move.bf16 ", "/semantics/matrix/mma.bf16 ", "/vector_add_f16/size=17 ", "/matmul_tc/size=100 "},
			[]string{".f16", ".bf16", "/f16/", "vector_add_f16", "matmul_tc", "shared_reverse", "odd_count"}},
	} {
		t.Run(c.backend, func(t *testing.T) {
			out, passed := runBrokenV12(t, c.backend)
			if passed {
				t.Fatalf("conformance passed the %s backend:\n%s", c.backend, out)
			}
			for _, want := range c.fails {
				if !strings.Contains(out, "--- FAIL: TestBrokenV12Helper"+want) {
					t.Errorf("no failure of %q:\n%s", want, out)
				}
			}
			for _, line := range strings.Split(out, "\n") {
				if !strings.Contains(line, "--- FAIL") || parentLine(line) {
					continue
				}
				ok := false
				for _, a := range c.allowed {
					ok = ok || strings.Contains(line, a)
				}
				if !ok {
					t.Errorf("a failure outside the broken rule: %s", line)
				}
			}
		})
	}
}

// parentLine reports whether a "--- FAIL" line is a test that fails only
// because a subtest did: the test itself, semantics, a table, a corpus kernel.
func parentLine(line string) bool {
	for _, p := range []string{"TestBrokenV12Helper (", "/semantics (", "/semantics/f16 (", "/semantics/matrix (", "/matmul_tc (", "/vector_add_f16 ("} {
		if strings.Contains(line, p) {
			return true
		}
	}
	return false
}

// TestRunSkips16BitTheProfileDoesNotClaim pins that a backend without f16 and
// bf16, whose profile says so, passes the kit: its rejections of the 16-bit
// cases and kernels are skips reported as not supported, and its f32 matrix
// cases run.
func TestRunSkips16BitTheProfileDoesNotClaim(t *testing.T) {
	out, passed := runBrokenV12(t, "no_16bit")
	if !passed {
		t.Fatalf("conformance failed a backend without 16-bit types that does not claim them:\n%s", out)
	}
	outputHas(t, out,
		"--- SKIP: TestBrokenV12Helper/semantics/f16/add.f16 ",
		"--- SKIP: TestBrokenV12Helper/semantics/matrix/mma.bf16 ",
		"--- SKIP: TestBrokenV12Helper/vector_add_f16/size=17 ",
		"--- SKIP: TestBrokenV12Helper/matmul_tc/size=100 ",
		"--- PASS: TestBrokenV12Helper/semantics/matrix/mma.f32 ",
		"not supported: the backend rejects this program's 16-bit types")
}

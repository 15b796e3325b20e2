package kit

import (
	"context"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/verify"
	"github.com/kiln-dev/kiln/pluginapi"
)

// interpBackend runs programs on the interpreter: the smallest correct backend.
// When broken, it flips the lowest bit of every output's first element and runs
// any unknown pipeline handle as the last compiled one. rewrite, when set,
// changes each program before it is compiled, and flush makes the backend flush
// denormals in every f32 operation (it runs the "flushed denormals" variant) and
// in its f32 outputs: ways to be wrong, or differently right.
type interpBackend struct {
	broken  bool
	rewrite func(*ir.Program) *ir.Program
	flush   bool
	// noSubgroups rejects every program that uses subgroups, as a device without
	// them does; profile is the adapter's profile.
	noSubgroups bool
	profile     pluginapi.DeviceProfile
	// no16 rejects every program that uses f16 or bf16, as a device without
	// 16-bit support does.
	no16 bool

	mu      sync.Mutex
	next    uint64
	kernels map[uint64]*interp.Kernel
}

func (b *interpBackend) Describe(context.Context) (*pluginapi.Description, error) {
	return &pluginapi.Description{
		ID: "test-interp", Version: "0", Dispatches: true, Features: []string{"ir.v1"},
		Adapters: []pluginapi.Adapter{{Index: 0, Name: "interp", Available: true, Profile: b.profile}},
	}, nil
}

func (b *interpBackend) Open(context.Context, int) error { return nil }

func (b *interpBackend) Compile(_ context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	p := req.Program
	if uses, _ := subgroupUse(p.Body); uses && b.noSubgroups {
		return nil, pluginapi.Rejected("test-interp: %q uses subgroups, which this backend does not run. Fix: run it elsewhere", p.Name)
	}
	if f16, bf16 := types16(p); (f16 || bf16) && b.no16 {
		return nil, pluginapi.Rejected("test-interp: %q uses f16 or bf16, which this backend does not run. Fix: run it elsewhere", p.Name)
	}
	if b.rewrite != nil {
		p = b.rewrite(p)
	}
	if b.flush {
		for _, v := range verify.Variants(p) {
			if v.Name == "flushed denormals" {
				p = v.Program
			}
		}
	}
	k, err := interp.Compile(p, interp.Options{WorkgroupSize: req.WorkgroupSize, Spec: req.Spec})
	if err != nil {
		return nil, pluginapi.Rejected("%w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kernels == nil {
		b.kernels = map[uint64]*interp.Kernel{}
	}
	b.next++
	b.kernels[b.next] = k
	return &pluginapi.CompileResult{Pipeline: b.next}, nil
}

func (b *interpBackend) Dispatch(ctx context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	b.mu.Lock()
	k, ok := b.kernels[req.Pipeline]
	if !ok && b.broken {
		k, ok = b.kernels[b.next]
	}
	b.mu.Unlock()
	if !ok {
		return nil, pluginapi.Rejected("pipeline %d is unknown", req.Pipeline)
	}
	outs, err := k.Run(ctx, interp.Launch{Grid: req.Grid, Inputs: req.Inputs, OutputCounts: req.OutputCounts, Uniforms: req.Uniforms})
	if err != nil {
		return nil, pluginapi.Rejected("%w", err)
	}
	if b.flush {
		outs = flushOutputs(k.Program(), outs)
	}
	if b.broken {
		for _, o := range outs {
			if len(o) > 0 {
				o[0] ^= 1
			}
		}
	}
	return &pluginapi.DispatchResult{Outputs: outs}, nil
}

func (b *interpBackend) Release(_ context.Context, pipeline uint64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.kernels, pipeline)
	return nil
}

func (b *interpBackend) Close(context.Context) error { return nil }

func TestRunPassesOnTheInterpreter(t *testing.T) {
	check(t, &interpBackend{}, Options{Seed: 1})
}

const brokenEnv = "KILN_CONFORMANCE_BROKEN_HELPER"

// TestBrokenHelper runs the kit on the broken backend that brokenEnv names, in
// a child process of a TestRunCatches test; it skips otherwise.
func TestBrokenHelper(t *testing.T) {
	switch name := os.Getenv(brokenEnv); name {
	case "":
		t.Skip("helper for the TestRunCatches tests")
	case "outputs":
		check(t, &interpBackend{broken: true}, Options{Kernels: []string{"vector_add"}, Sizes: []int{61}})
	case "casts":
		check(t, &interpBackend{rewrite: wrappingCasts}, Options{Kernels: []string{"vector_add"}, Sizes: []int{1}})
	case "subgroup_claim":
		b := &interpBackend{noSubgroups: true, profile: pluginapi.DeviceProfile{SubgroupSize: 32, SupportsSubgroupOps: true, HasSubgroupShuffle: true}}
		check(t, b, Options{Kernels: []string{"subgroup_sum"}, Sizes: []int{64}})
	default:
		t.Fatalf("no broken backend %q", name)
	}
}

// TestRunCatchesABrokenBackend pins that Check fails a backend whose outputs are one
// bit off and that runs pipelines it never compiled.
func TestRunCatchesABrokenBackend(t *testing.T) {
	out := mustFail(t, "outputs", "a broken backend")
	outputHas(t, out,
		"--- FAIL: TestBrokenHelper/vector_add/size=61",
		"differ from the CPU reference",
		"--- FAIL: TestBrokenHelper/contract/unknown_pipeline",
		"never compiled succeeded")
}

// runHelper runs the test named helper in a child process with env set to value
// and returns its output and whether it passed.
func runHelper(t *testing.T, helper, env, value string) (string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+value)
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// mustFail runs TestBrokenHelper on the named broken backend in a child process
// and returns its output, failing t when it passed (what names the backend).
func mustFail(t *testing.T, name, what string) string {
	t.Helper()
	out, passed := runHelper(t, "TestBrokenHelper", brokenEnv, name)
	if passed {
		t.Fatalf("conformance passed %s:\n%s", what, out)
	}
	return out
}

// outputHas fails t for each of wants that out lacks.
func outputHas(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// flushOutputs returns outs (the outputs of p in binding order) with every
// denormal of an f32 buffer replaced by the zero of its sign.
func flushOutputs(p *ir.Program, outs [][]byte) [][]byte {
	flushed := make([][]byte, len(outs))
	for k, binding := range p.Outputs() {
		if p.Buffers[binding].Type != ir.F32 {
			flushed[k] = outs[k]
			continue
		}
		ws := wordsOf(outs[k])
		for i, w := range ws {
			if w&0x7F800000 == 0 {
				ws[i] = w & 0x80000000
			}
		}
		flushed[k] = words(ws)
	}
	return flushed
}

// unfuse rewrites every fma of p as a multiply then an add: a backend whose fma
// is not fused.
func unfuse(p *ir.Program) *ir.Program {
	return rewriteExprs(p, func(e ir.Expr) ir.Expr {
		if f, ok := e.(ir.FmaExpr); ok {
			return ir.Add(ir.Mul(f.A, f.B), f.C)
		}
		return e
	})
}

// rewriteExprs is a copy of p with every expression rewritten by f (mapExprs).
func rewriteExprs(p *ir.Program, f func(ir.Expr) ir.Expr) *ir.Program {
	q := *p
	q.Body = mapExprs(p.Body, f)
	return &q
}

// operandOf reports whether x is a literal of type t or a load from a buffer of
// element type t.
func operandOf(p *ir.Program, t ir.Type, x ir.Expr) bool {
	switch x := x.(type) {
	case ir.Literal:
		return x.Type == t
	case ir.LoadExpr:
		d, ok := p.Buffer(x.Target)
		return ok && d.Type == t
	}
	return false
}

// wrappingCasts rewrites the f32 to i32 casts of the kit's cast table (of an f32
// literal or of a load from an f32 buffer) the way x86's cvttss2si converts: out
// of range and NaN give MIN instead of saturating. A backend that breaks
// docs/design.md's saturating-cast rule.
func wrappingCasts(p *ir.Program) *ir.Program {
	return rewriteExprs(p, func(e ir.Expr) ir.Expr {
		if c, ok := e.(ir.CastExpr); ok && c.To == ir.I32 && operandOf(p, ir.F32, c.X) {
			return ir.Select(ir.Lt(ir.Abs(c.X), ir.LitF32(0x1p31)), c, ir.LitI32(math.MinInt32))
		}
		return e
	})
}

// mapExprs applies f bottom-up to every expression in stmts.
func mapExprs(stmts []ir.Stmt, f func(ir.Expr) ir.Expr) []ir.Stmt {
	var m func(ir.Expr) ir.Expr
	m = func(e ir.Expr) ir.Expr {
		switch x := e.(type) {
		case ir.UnaryExpr:
			e = ir.UnaryExpr{Op: x.Op, X: m(x.X)}
		case ir.BinaryExpr:
			e = ir.BinaryExpr{Op: x.Op, X: m(x.X), Y: m(x.Y)}
		case ir.FmaExpr:
			e = ir.FmaExpr{A: m(x.A), B: m(x.B), C: m(x.C)}
		case ir.SelectExpr:
			e = ir.SelectExpr{Cond: m(x.Cond), A: m(x.A), B: m(x.B)}
		case ir.CastExpr:
			e = ir.CastExpr{To: x.To, X: m(x.X)}
		case ir.LoadExpr:
			e = ir.LoadExpr{Target: x.Target, Index: m(x.Index)}
		case ir.BitcastExpr:
			e = ir.BitcastExpr{To: x.To, X: m(x.X)}
		case ir.SubgroupExpr:
			var lane ir.Expr
			if x.Lane != nil {
				lane = m(x.Lane)
			}
			e = ir.SubgroupExpr{Op: x.Op, X: m(x.X), Lane: lane}
		}
		return f(e)
	}
	out := make([]ir.Stmt, len(stmts))
	for k, s := range stmts {
		switch x := s.(type) {
		case ir.LetStmt:
			s = ir.LetStmt{Name: x.Name, Value: m(x.Value)}
		case ir.VarStmt:
			s = ir.VarStmt{Name: x.Name, Type: x.Type, Value: m(x.Value)}
		case ir.AssignStmt:
			s = ir.AssignStmt{Name: x.Name, Value: m(x.Value)}
		case ir.StoreStmt:
			s = ir.StoreStmt{Target: x.Target, Index: m(x.Index), Value: m(x.Value)}
		case ir.IfStmt:
			s = ir.IfStmt{Cond: m(x.Cond), Then: mapExprs(x.Then, f), Else: mapExprs(x.Else, f)}
		case ir.ForStmt:
			s = ir.ForStmt{Var: x.Var, Type: x.Type, From: m(x.From), To: m(x.To), Step: m(x.Step), Body: mapExprs(x.Body, f)}
		case ir.WhileStmt:
			s = ir.WhileStmt{Cond: m(x.Cond), Body: mapExprs(x.Body, f)}
		case ir.AtomicStmt:
			var compare ir.Expr
			if x.Compare != nil {
				compare = m(x.Compare)
			}
			s = ir.AtomicStmt{Op: x.Op, Target: x.Target, Index: m(x.Index), Value: m(x.Value), Result: x.Result, Compare: compare}
		}
		out[k] = s
	}
	return out
}

// TestRunAcceptsUnfusedFma pins that a backend whose fma is a rounded multiply
// then add passes the kit: docs/design.md allows it. The semantics tables are run
// whole; two float kernels stand for the corpus.
func TestRunAcceptsUnfusedFma(t *testing.T) {
	check(t, &interpBackend{rewrite: unfuse}, Options{Seed: 2, Kernels: []string{"dot", "softmax"}, Sizes: []int{257}})
}

// TestRunAcceptsFlushedDenormals pins that a backend that flushes denormal f32
// operands and results of every f32 operation, and its f32 outputs, to zero
// passes the kit: docs/design.md allows it. The semantics tables are run whole;
// two float kernels stand for the corpus. (TestVerifyAcceptsFlushedDenormals
// pins the variant's values by hand.)
func TestRunAcceptsFlushedDenormals(t *testing.T) {
	check(t, &interpBackend{flush: true}, Options{Seed: 3, Kernels: []string{"dot", "softmax"}, Sizes: []int{257}})
}

// TestRunCatchesWrappingCasts pins that a backend breaking the saturating-cast
// rule (f32 to i32 out of range or NaN gives MIN) fails the kit's cast table,
// on loaded and on literal operands, and nothing else.
func TestRunCatchesWrappingCasts(t *testing.T) {
	out := mustFail(t, "casts", "a backend whose f32 to i32 casts wrap")
	outputHas(t, out,
		"--- FAIL: TestBrokenHelper/semantics/cast/f32.i32 ",
		"--- FAIL: TestBrokenHelper/semantics/cast/f32.i32.const ",
		"differ from the CPU reference",
		"got -2147483648")
	if n := strings.Count(out, "--- FAIL"); n != 5 {
		t.Errorf("%d failures, want 5 (the two cast cases, their table, semantics, the test):\n%s", n, out)
	}
}

// TestRunSkipsSubgroupsTheProfileDoesNotClaim pins that a backend without
// subgroups, whose profile says so, passes the kit: its rejections are skips.
func TestRunSkipsSubgroupsTheProfileDoesNotClaim(t *testing.T) {
	check(t, &interpBackend{noSubgroups: true}, Options{Kernels: []string{"subgroup_sum"}, Sizes: []int{64}})
}

// TestRunCatchesAFalseSubgroupClaim pins that a backend whose profile claims
// subgroups but whose compiler rejects them fails the kit, in the subgroup table
// and on the subgroup corpus kernel, and only there.
func TestRunCatchesAFalseSubgroupClaim(t *testing.T) {
	out := mustFail(t, "subgroup_claim", "a backend that claims subgroups and rejects them")
	outputHas(t, out,
		"--- FAIL: TestBrokenHelper/semantics/subgroup/subgroup_add.u32.any ",
		"--- FAIL: TestBrokenHelper/semantics/subgroup/shuffle.f32.size32 ",
		"--- FAIL: TestBrokenHelper/subgroup_sum/size=64 ",
		"--- SKIP: TestBrokenHelper/semantics/subgroup/builtins.size8 ",
		"uses subgroups, which this backend does not run")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "--- FAIL") && !strings.Contains(line, "subgroup") && !strings.Contains(line, "TestBrokenHelper (") && !strings.Contains(line, "/semantics (") {
			t.Errorf("a failure outside the subgroup cases: %s", line)
		}
	}
}

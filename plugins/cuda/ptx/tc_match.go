package ptx

import (
	"fmt"
	"reflect"

	"github.com/kiln-dev/kiln/ir"
)

// tcNames are the names a matmul_tc program gives its parts.
type tcNames struct {
	row0, col0, k0 string
	acc, ma, mb    string
	a, b, c        string
	m, n, k        string
}

// tcBody is the body of a matmul_tc program (the shape matchTensorCoreMatmul
// recognises), with its names and k step:
//
//	let row0 = workgroup_id(1)·TileM; let col0 = workgroup_id(0)·TileN
//	matrix_fill acc 0
//	for k0 in 0..k step TileK {
//	  matrix_load A from a, offset row0·k + k0, stride k, row, bound [m - row0, k - k0]
//	  matrix_load B from b, offset k0·n + col0, stride n, row, bound [k - k0, n - col0]
//	  matrix_mma acc += A·B (precision)
//	}
//	matrix_store acc to c, offset row0·n + col0, stride n, row, bound [m - row0, n - col0]
func tcBody(nm tcNames, tileM, tileN, tileK uint32, prec ir.MatrixPrecision) []ir.Stmt {
	u := ir.Uniform
	row0, col0, k0 := ir.Local(nm.row0), ir.Local(nm.col0), ir.Local(nm.k0)
	return []ir.Stmt{
		ir.LetStmt{Name: nm.row0, Value: ir.Mul(ir.WorkgroupID(1), ir.LitU32(tileM))},
		ir.LetStmt{Name: nm.col0, Value: ir.Mul(ir.WorkgroupID(0), ir.LitU32(tileN))},
		ir.MatrixFillStmt{Matrix: nm.acc, Value: ir.LitF32(0)},
		ir.ForStmt{Var: nm.k0, Type: ir.U32, From: ir.LitU32(0), To: u(nm.k), Step: ir.LitU32(tileK), Body: []ir.Stmt{
			ir.MatrixLoadStmt{Matrix: nm.ma, From: nm.a, Offset: ir.Add(ir.Mul(row0, u(nm.k)), k0), Stride: u(nm.k),
				Layout: ir.RowMajor, Bound: &ir.MatrixBound{Rows: ir.Sub(u(nm.m), row0), Cols: ir.Sub(u(nm.k), k0)}},
			ir.MatrixLoadStmt{Matrix: nm.mb, From: nm.b, Offset: ir.Add(ir.Mul(k0, u(nm.n)), col0), Stride: u(nm.n),
				Layout: ir.RowMajor, Bound: &ir.MatrixBound{Rows: ir.Sub(u(nm.k), k0), Cols: ir.Sub(u(nm.n), col0)}},
			ir.MatrixMMAStmt{Acc: nm.acc, A: nm.ma, B: nm.mb, Precision: prec},
		}},
		ir.MatrixStoreStmt{Matrix: nm.acc, To: nm.c, Offset: ir.Add(ir.Mul(row0, u(nm.n)), col0), Stride: u(nm.n),
			Layout: ir.RowMajor, Bound: &ir.MatrixBound{Rows: ir.Sub(u(nm.m), row0), Cols: ir.Sub(u(nm.n), col0)}},
	}
}

// matchTensorCoreMatmul recognises a program of the matmul_tc shape (tcBody, up
// to lets: a body whose lets, substituted into their uses, give tcBody's, as
// the corpus kernel's named bounds do) and returns the tensor-core configuration that runs it on target: tiles from
// its matrices, warps from its workgroup size (x only, a multiple of 32), the
// interface from its buffers and uniforms. On sm_90 a program (bf16, f16, or
// f32 at tf32 precision) whose workgroup has one warpgroup (128 invocations)
// per 64 rows of its tile takes the wgmma path, 4 stages with one wgmma group in flight where
// they fit (the fastest on an H200), workgroups in groups of tcGroupRows tile rows; everything else takes mma.sync with 3
// stages (fewer where they do not fit). Rings over 48 KiB are used only when
// maxDynamicShared is the most dynamic shared memory the backend can launch with
// (see TCConfig.DynamicShared; 0 for none). ok is false, with the reason, for any other program
// or configuration: the emitter then takes the scalar matrix path.
func matchTensorCoreMatmul(p *ir.Program, target Target, maxDynamicShared uint32) (cfg TCConfig, ok bool, reason string) {
	body := tcInline(p.Body, nil)
	nm, why := tcNamesOf(body)
	if why != "" {
		return TCConfig{}, false, "not the matmul_tc shape: " + why
	}
	acc, okAcc := p.Matrix(nm.acc)
	ma, okA := p.Matrix(nm.ma)
	mb, okB := p.Matrix(nm.mb)
	if !okAcc || !okA || !okB {
		return TCConfig{}, false, "not the matmul_tc shape: a matrix is not declared"
	}
	mma, _ := body[1].(ir.ForStmt).Body[2].(ir.MatrixMMAStmt)
	want := tcInline(tcBody(nm, acc.Rows, acc.Cols, ma.Cols, mma.Precision), nil)
	if !reflect.DeepEqual(body, want) {
		return TCConfig{}, false, "not the matmul_tc shape: the body differs from the canonical tiled loop"
	}
	switch {
	case acc.Type != ir.F32 || ma.Type != mb.Type || ma.Rows != acc.Rows || mb.Cols != acc.Cols || mb.Rows != ma.Cols:
		return TCConfig{}, false, "matrix shapes or types do not form acc(f32) += A·B"
	case ma.Type == ir.F32 && mma.Precision != ir.PrecisionTF32:
		return TCConfig{}, false, "f32 operands without precision tf32 need full f32 products, which tensor cores do not give"
	}
	bufs := map[string]ir.BufferDecl{}
	for _, b := range p.Buffers {
		bufs[b.Name] = b
	}
	a, aok := bufs[nm.a]
	b, bok := bufs[nm.b]
	c, cok := bufs[nm.c]
	switch {
	case !aok || !bok || !cok:
		return TCConfig{}, false, "a, b or c is not a buffer (shared operands take the scalar path)"
	case a.Type != ma.Type || b.Type != mb.Type || c.Type != ir.F32:
		return TCConfig{}, false, "buffer types differ from the matrices'"
	case nm.c == nm.a || nm.c == nm.b:
		return TCConfig{}, false, "c is also an operand buffer"
	}
	uni := map[string]uint32{}
	for i, d := range p.Uniforms {
		if d.Type == ir.U32 {
			uni[d.Name] = uint32(i)
		}
	}
	m, mok := uni[nm.m]
	n, nok := uni[nm.n]
	k, kok := uni[nm.k]
	if !mok || !nok || !kok {
		return TCConfig{}, false, "m, n or k is not a u32 uniform"
	}
	wg := p.WorkgroupSize
	if wg[1] != 1 || wg[2] != 1 || wg[0]%32 != 0 || wg[0] == 0 {
		return TCConfig{}, false, fmt.Sprintf("workgroup %dx%dx%d is not a row of whole warps", wg[0], wg[1], wg[2])
	}
	warps := wg[0] / 32
	wm := uint32(1)
	for wm*wm*4 <= warps && warps%(wm*2) == 0 {
		wm *= 2
	}
	cfg = TCConfig{
		Operand: ma.Type, TileM: acc.Rows, TileN: acc.Cols, TileK: ma.Cols,
		WarpsM: wm, WarpsN: warps / wm, Target: target,
		Buffers: uint32(len(p.Buffers)), Uniforms: uint32(len(p.Uniforms)),
		A: a.Binding, B: b.Binding, C: c.Binding, M: m, N: n, K: k,
	}
	if target.SM >= 90 && warps == 4*acc.Rows/64 && acc.Rows%64 == 0 {
		wgc := cfg
		wgc.WarpsM, wgc.WarpsN, wgc.Wgmma, wgc.GroupRows = warps, 1, true, tcGroupRows
		wgc.TMA = wgc.Operand != ir.F32 && tcDefaultTMA
		if c, ok := tcStages(wgc, []uint32{4, 3, 2}, maxDynamicShared); ok {
			return c, true, ""
		}
	}
	if c, ok := tcStages(cfg, []uint32{3, 2}, maxDynamicShared); ok {
		return c, true, ""
	}
	cfg.Stages = 2
	return TCConfig{}, false, cfg.check()
}

// tcGroupRows is the wgmma path's workgroup order (TCConfig.GroupRows): on an
// H200 groups of 8 tile rows ran 8192³ bf16 2-4% faster than the plain order
// with 128×256×64 tiles (6% with 256×128×64), 4096³ within the noise.
const tcGroupRows = 8

// tcDefaultTMA makes the wgmma path's bf16 and f16 kernels stage their
// operands with the bulk tensor copy engine (TCConfig.TMA).
const tcDefaultTMA = true

// tcStages returns cfg with the first of stages that it can be emitted with
// (with one wgmma group in flight from 4 stages on), in dynamic shared memory
// where that is needed and maxDynamicShared allows it; with cfg.TMA, the
// cp.async staging where the TMA path's mbarriers do not fit beside a ring
// that does (a static ring of exactly 48 KiB).
func tcStages(cfg TCConfig, stages []uint32, maxDynamicShared uint32) (TCConfig, bool) {
	for _, s := range stages {
		for _, tma := range []bool{cfg.TMA, false} {
			c := cfg
			c.Stages, c.TMA = s, tma
			c.Overlap = c.Wgmma && s >= 4
			c.DynamicShared = c.SharedBytes() > tcMaxStaticShared
			if c.check() == "" && (!c.DynamicShared || c.SharedBytes() <= maxDynamicShared) {
				return c, true
			}
		}
	}
	return cfg, false
}

// tcNamesOf reads the names off a body that looks like tcBody with its lets
// substituted (see tcInline), or says what does not.
func tcNamesOf(body []ir.Stmt) (tcNames, string) {
	nm := tcNames{row0: "row0", col0: "col0"}
	if len(body) != 3 {
		return nm, fmt.Sprintf("%d top-level statements besides lets, not 3", len(body))
	}
	fill, ok1 := body[0].(ir.MatrixFillStmt)
	loop, ok2 := body[1].(ir.ForStmt)
	st, ok3 := body[2].(ir.MatrixStoreStmt)
	if !ok1 || !ok2 || !ok3 || len(loop.Body) != 3 {
		return nm, "statements besides lets are not matrix_fill, for (3 statements), matrix_store"
	}
	la, ok1 := loop.Body[0].(ir.MatrixLoadStmt)
	lb, ok2 := loop.Body[1].(ir.MatrixLoadStmt)
	_, ok3 = loop.Body[2].(ir.MatrixMMAStmt)
	if !ok1 || !ok2 || !ok3 || st.Bound == nil {
		return nm, "the loop is not matrix_load, matrix_load, matrix_mma, or the store has no bound"
	}
	rows, ok1 := st.Bound.Rows.(ir.BinaryExpr)
	cols, ok2 := st.Bound.Cols.(ir.BinaryExpr)
	kx, ok3 := loop.To.(ir.UniformRef)
	if !ok1 || !ok2 || !ok3 {
		return nm, "the loop or the store bound is not over uniforms"
	}
	mx, ok1 := rows.X.(ir.UniformRef)
	nx, ok2 := cols.X.(ir.UniformRef)
	if !ok1 || !ok2 {
		return nm, "the store bound is not [m - row0, n - col0]"
	}
	nm.k0 = loop.Var
	nm.acc, nm.ma, nm.mb = fill.Matrix, la.Matrix, lb.Matrix
	nm.a, nm.b, nm.c = la.From, lb.From, st.To
	nm.m, nm.n, nm.k = mx.Name, nx.Name, kx.Name
	return nm, ""
}

// tcInline returns body without its lets, each let's value (with the lets
// before it substituted) put in place of its uses, in the statements a matmul_tc
// body has (matrix statements and for loops, whose variable hides an outer let
// of its name); env holds the lets in scope. Lets bind once and expressions have
// no effects, so the result computes what body does wherever it keeps the
// meaning: every other statement, and any expression but a local, a binary
// operation and a leaf, is left as it is (and then matches nothing).
func tcInline(body []ir.Stmt, env map[string]ir.Expr) []ir.Stmt {
	scope := make(map[string]ir.Expr, len(env))
	for k, v := range env {
		scope[k] = v
	}
	x := func(e ir.Expr) ir.Expr { return tcInlineExpr(e, scope) }
	bound := func(b *ir.MatrixBound) *ir.MatrixBound {
		if b == nil {
			return nil
		}
		return &ir.MatrixBound{Rows: x(b.Rows), Cols: x(b.Cols)}
	}
	var out []ir.Stmt
	for _, s := range body {
		switch s := s.(type) {
		case ir.LetStmt:
			scope[s.Name] = x(s.Value)
			continue
		case ir.MatrixFillStmt:
			s.Value = x(s.Value)
			out = append(out, s)
		case ir.MatrixLoadStmt:
			s.Offset, s.Stride, s.Bound = x(s.Offset), x(s.Stride), bound(s.Bound)
			out = append(out, s)
		case ir.MatrixStoreStmt:
			s.Offset, s.Stride, s.Bound = x(s.Offset), x(s.Stride), bound(s.Bound)
			out = append(out, s)
		case ir.ForStmt:
			s.From, s.To, s.Step = x(s.From), x(s.To), x(s.Step)
			inner := make(map[string]ir.Expr, len(scope))
			for k, v := range scope {
				inner[k] = v
			}
			delete(inner, s.Var)
			s.Body = tcInline(s.Body, inner)
			out = append(out, s)
		default:
			out = append(out, s)
		}
	}
	return out
}

// tcInlineExpr is e with the locals of env replaced by their values.
func tcInlineExpr(e ir.Expr, env map[string]ir.Expr) ir.Expr {
	switch e := e.(type) {
	case ir.LocalRef:
		if v, ok := env[e.Name]; ok {
			return v
		}
	case ir.BinaryExpr:
		e.X, e.Y = tcInlineExpr(e.X, env), tcInlineExpr(e.Y, env)
		return e
	}
	return e
}

// tensorCoreModule is the tensor-core module for p when p has the matmul_tc
// shape and opts' target has tensor cores (sm_80 and later; wgmma on sm_90),
// with Emit's interface: the same kernel name, parameters in Emit's order, the
// workgroup size (opts' override or the program's) as .reqntid. A ring over
// 48 KiB is dynamic shared memory, up to opts.MaxDynamicSharedBytes: then
// m.DynamicSharedBytes is what the launch must pass (after raising the
// function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to it) and
// m.SharedBytes is 0. ok is false, with the reason, when p takes another path.
// The caller validates p first, as Emit does.
func tensorCoreModule(p *ir.Program, opts Options) (m *Module, ok bool, reason string) {
	if opts.Target.SM < 80 {
		return nil, false, fmt.Sprintf("target %s has no tensor cores kiln uses (sm_80 and later)", opts.Target)
	}
	q := *p
	if opts.WorkgroupSize != ([3]uint32{}) {
		q.WorkgroupSize = opts.WorkgroupSize
	}
	cfg, ok, why := matchTensorCoreMatmul(&q, opts.Target, opts.MaxDynamicSharedBytes)
	if !ok {
		return nil, false, why
	}
	text, ok, why := emitTensorCoreMatmul(cfg)
	if !ok {
		return nil, false, why
	}
	target := opts.Target.scalar()
	if cfg.Wgmma {
		target = opts.Target
	}
	m = &Module{Text: text, Entry: EntryPoint, Target: target, WorkgroupSize: q.WorkgroupSize, Params: kernelParams(&q)}
	if cfg.TMA {
		m.TensorMaps = cfg.tensorMaps(len(m.Params))
		m.Params = append(m.Params, cfg.tmaParams()...)
	}
	if cfg.DynamicShared {
		m.DynamicSharedBytes = cfg.SharedBytes()
	} else {
		m.SharedBytes = cfg.SharedBytes()
	}
	return m, true, ""
}

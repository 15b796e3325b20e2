package ir

import "fmt"

// checkCollective rejects, where it is statically visible, a matrix statement that
// not every invocation of the workgroup reaches with the same operands (IR v1.2):
// one whose operands are varying, one under an if, while or for whose condition or
// bounds are varying, or one after a return, break or continue under a varying
// condition. An expression is varying when it reads local_id or global_id (on an
// axis of more than one invocation), subgroup_invocation_id, an atomic result, a
// load at a varying index, or a local bound (let, var, assign) from a varying
// expression or assigned under varying control flow. It runs on a program the rest
// of Validate accepted, and iterates to a fixed point, so an assignment later in a
// loop body makes the local varying at its earlier uses too.
func checkCollective(p *Program) error {
	u := &uniformity{prog: p, varying: map[string]string{}, divergent: map[string]string{}}
	for {
		u.changed, u.err, u.diverged = false, nil, ""
		u.walk(p.Body, "body", "")
		if !u.changed {
			return u.err
		}
	}
}

// uniformity is the state of one walk of checkCollective. varying and divergent
// persist across walks (they only grow); the rest is reset for each walk.
type uniformity struct {
	prog *Program
	// varying maps a local's declaring path to why it is varying.
	varying map[string]string
	// divergent maps a loop's path to why its invocations leave it at different
	// iterations (a break, continue or return under a varying condition).
	divergent map[string]string
	scopes    []map[string]string // local name -> declaring path
	loops     []string            // paths of the enclosing loops, innermost last
	diverged  string              // why the rest of the program runs non-uniformly (a varying return)
	changed   bool
	err       error
}

const collectiveFix = "every invocation of the workgroup must reach a matrix statement with the same operands, as for barrier: " +
	"compute its operands and the conditions around it from values the whole workgroup shares (workgroup_id, uniforms, params, len, uniform loop counters), not from local_id or global_id"

func (u *uniformity) mark(m map[string]string, key, why string) {
	if m[key] == "" {
		m[key] = why
		u.changed = true
	}
}

func (u *uniformity) fail(path, format string, args ...any) {
	if u.err == nil {
		u.err = verr(path, collectiveFix, format, args...)
	}
}

func (u *uniformity) declare(name, path, why string) {
	u.scopes[len(u.scopes)-1][name] = path
	if why != "" {
		u.mark(u.varying, path, why)
	}
}

func (u *uniformity) lookup(name string) string {
	for i := len(u.scopes) - 1; i >= 0; i-- {
		if p, ok := u.scopes[i][name]; ok {
			return p
		}
	}
	return ""
}

// vary returns why x is varying, or "" when every invocation of the workgroup
// computes the same value.
func (u *uniformity) vary(x Expr) string {
	switch x := x.(type) {
	case LocalRef:
		if decl := u.lookup(x.Name); u.varying[decl] != "" {
			return fmt.Sprintf("reads the local %q (declared at %s), which is varying", x.Name, decl)
		}
	case BuiltinRef:
		switch x.Kind {
		case LocalIDBuiltin, GlobalIDBuiltin:
			if x.Axis < 3 && u.prog.WorkgroupSize[x.Axis] > 1 {
				return fmt.Sprintf("reads %s", x.Kind)
			}
		case SubgroupInvocationIDBuiltin:
			return fmt.Sprintf("reads %s", x.Kind)
		}
	case LoadExpr:
		if why := u.vary(x.Index); why != "" {
			return fmt.Sprintf("loads %q at an index that %s", x.Target, why)
		}
	case UnaryExpr:
		return u.vary(x.X)
	case BinaryExpr:
		return u.varyAny(x.X, x.Y)
	case FmaExpr:
		return u.varyAny(x.A, x.B, x.C)
	case SelectExpr:
		return u.varyAny(x.Cond, x.A, x.B)
	case CastExpr:
		return u.vary(x.X)
	case BitcastExpr:
		return u.vary(x.X)
	case SubgroupExpr:
		return u.varyAny(x.X, x.Lane)
	}
	return ""
}

func (u *uniformity) varyAny(xs ...Expr) string {
	for _, x := range xs {
		if x == nil {
			continue
		}
		if why := u.vary(x); why != "" {
			return why
		}
	}
	return ""
}

func (u *uniformity) walk(stmts []Stmt, path, ctx string) {
	u.scopes = append(u.scopes, map[string]string{})
	defer func() { u.scopes = u.scopes[:len(u.scopes)-1] }()
	for i, s := range stmts {
		at := fmt.Sprintf("%s[%d]", path, i)
		here := ctx
		if here == "" {
			here = u.diverged
		}
		u.stmt(s, at, here)
	}
}

func (u *uniformity) stmt(s Stmt, path, ctx string) {
	switch s := s.(type) {
	case LetStmt:
		u.declare(s.Name, path, u.vary(s.Value))
	case VarStmt:
		u.declare(s.Name, path, u.vary(s.Value))
	case AssignStmt:
		decl := u.lookup(s.Name)
		if why := u.vary(s.Value); why != "" {
			u.mark(u.varying, decl, "is assigned a value that "+why+" at "+path)
		} else if ctx != "" {
			u.mark(u.varying, decl, "is assigned at "+path+" under "+ctx)
		}
	case AtomicStmt:
		if s.Result != "" {
			u.declare(s.Result, path, "is an atomic result")
		}
	case IfStmt:
		inner := ctx
		if inner == "" {
			if why := u.vary(s.Cond); why != "" {
				inner = fmt.Sprintf("the condition at %s.cond, which %s", path, why)
			}
		}
		// A return in one branch does not reach the other: each starts with what
		// came before, and the code after the if sees either.
		before := u.diverged
		u.walk(s.Then, path+".then", inner)
		afterThen := u.diverged
		u.diverged = before
		u.walk(s.Else, path+".else", inner)
		if u.diverged == "" {
			u.diverged = afterThen
		}
	case WhileStmt:
		inner := ctx
		if inner == "" {
			if why := u.vary(s.Cond); why != "" {
				inner = fmt.Sprintf("the condition at %s.cond, which %s", path, why)
			}
		}
		u.loop(s.Body, path, inner)
	case ForStmt:
		inner := ctx
		if inner == "" {
			for _, part := range []struct {
				x    Expr
				name string
			}{{s.From, "from"}, {s.To, "to"}, {s.Step, "step"}} {
				if why := u.vary(part.x); why != "" {
					inner = fmt.Sprintf("the loop bound at %s.%s, which %s", path, part.name, why)
					break
				}
			}
		}
		u.scopes = append(u.scopes, map[string]string{})
		u.declare(s.Var, path, "")
		u.loop(s.Body, path, inner)
		u.scopes = u.scopes[:len(u.scopes)-1]
	case BreakStmt, ContinueStmt:
		if ctx != "" && len(u.loops) > 0 {
			u.mark(u.divergent, u.loops[len(u.loops)-1], fmt.Sprintf("the loop is left at %s under %s", path, ctx))
		}
	case ReturnStmt:
		if ctx != "" {
			why := fmt.Sprintf("the return at %s under %s", path, ctx)
			for _, l := range u.loops {
				u.mark(u.divergent, l, why)
			}
			if u.diverged == "" {
				u.diverged = why
			}
		}
	case MatrixFillStmt:
		u.collective("matrix_fill", path, ctx, operand{"value", s.Value})
	case MatrixLoadStmt, MatrixStoreStmt:
		mc, _ := asMatrixCopy(s)
		u.collective(mc.op(), path, ctx, addressOperands(mc.offset, mc.stride, mc.bound)...)
	case MatrixMMAStmt:
		u.collective("matrix_mma", path, ctx)
	case MatrixConvertStmt:
		u.collective("matrix_convert", path, ctx)
	}
}

func (u *uniformity) loop(body []Stmt, path, ctx string) {
	if ctx == "" {
		ctx = u.divergent[path]
	}
	u.loops = append(u.loops, path)
	u.walk(body, path+".body", ctx)
	u.loops = u.loops[:len(u.loops)-1]
}

type operand struct {
	name string
	x    Expr
}

func addressOperands(offset, stride Expr, bound *MatrixBound) []operand {
	ops := []operand{{"offset", offset}, {"stride", stride}}
	if bound != nil {
		ops = append(ops, operand{"bound[0]", bound.Rows}, operand{"bound[1]", bound.Cols})
	}
	return ops
}

func (u *uniformity) collective(op, path, ctx string, ops ...operand) {
	if ctx != "" {
		u.fail(path, "%s: not reached by every invocation of the workgroup: it runs under %s", op, ctx)
		return
	}
	for _, o := range ops {
		if why := u.vary(o.x); why != "" {
			u.fail(path+"."+o.name, "%s: %s differs between invocations: it %s", op, o.name, why)
			return
		}
	}
}

package ir

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Limits of IR v1 that Validate enforces.
const (
	// MaxInvocations is the largest workgroup (x*y*z invocations).
	MaxInvocations = 1024
	// MaxSharedBytes is the total size of a program's shared arrays.
	MaxSharedBytes = 32 << 10
	// MaxNesting bounds the depth of nested statements and expressions, so every
	// recursive consumer (encoders, emitters, interpreters) stays within its stack.
	MaxNesting = 256
	// MaxNameLen bounds identifiers and the program name.
	MaxNameLen = 128
	// MaxBuffers bounds the storage buffers of a program: GPU backends pass every
	// buffer's element count in 128 bytes of push constants. Uniforms (IR v1.1) share
	// those 128 bytes, one word each: buffers and uniforms together are at most
	// MaxBuffers.
	MaxBuffers = 32
	// MaxSubgroupSize is the largest subgroup size a program may require (IR v1.1).
	MaxSubgroupSize = 128
)

// ValidationError describes the first problem Validate found: where (Path, in the
// style body[2].then[0].value), what is wrong (Msg) and what to do about it (Fix).
type ValidationError struct {
	Path string
	Msg  string
	Fix  string
}

func (e *ValidationError) Error() string { return errorText(e.Path, "", e.Msg, e.Fix) }

// errorText is "path: pos: msg. Fix: fix", leaving out the parts that are empty
// (but msg).
func errorText(path, pos, msg, fix string) string {
	var b strings.Builder
	for _, prefix := range []string{path, pos} {
		if prefix != "" {
			b.WriteString(prefix)
			b.WriteString(": ")
		}
	}
	b.WriteString(msg)
	if fix != "" {
		b.WriteString(". Fix: ")
		b.WriteString(fix)
	}
	return b.String()
}

// Validate reports the first problem that makes p ill-formed, as a
// *ValidationError, or nil when every backend can compile p. It checks names,
// declarations, bindings, limits, scoping and the type of every expression.
func Validate(p *Program) error {
	if p == nil {
		return &ValidationError{Msg: "program is nil", Fix: "build a program with ir.NewBuilder or ir.ParseJSON"}
	}
	c := &checker{prog: p, arrays: map[string]arrayInfo{}, params: map[string]Type{}, uniforms: map[string]Type{},
		matrices: map[string]matrixInfo{}}
	if err := c.header(); err != nil {
		return err
	}
	if err := c.matrixDecls(); err != nil {
		return err
	}
	if err := c.block(p.Body, "body", 1); err != nil {
		return err
	}
	if len(p.Matrices) > 0 {
		return checkCollective(p)
	}
	return nil
}

type arrayInfo struct {
	elem   Type
	shared bool
	access Access
	path   string
}

type local struct {
	typ     Type
	mutable bool
	path    string
	kind    string
}

type checker struct {
	prog   *Program
	arrays map[string]arrayInfo
	params map[string]Type
	// uniforms holds the uniforms' types (IR v1.1).
	uniforms map[string]Type
	// matrices holds the workgroup matrices (IR v1.2).
	matrices map[string]matrixInfo
	scopes   []map[string]local
	loops    int
}

func verr(path, fix, format string, args ...any) *ValidationError {
	return &ValidationError{Path: path, Msg: fmt.Sprintf(format, args...), Fix: fix}
}

// checkParamName checks the name of a parameter or uniform (what): an
// identifier that no parameter has; dupFix and dupFormat word the error of one
// that does.
func (c *checker) checkParamName(path, what, name, dupFix, dupFormat string) error {
	if !validIdent(name) {
		return verr(path, identFix, "%s name %q is not a valid identifier", what, name)
	}
	if _, dup := c.params[name]; dup {
		return verr(path, dupFix, dupFormat, name)
	}
	return nil
}

// checkArrayName checks the name of a buffer or shared array (what): an
// identifier that no other array has.
func (c *checker) checkArrayName(path, what, name string) error {
	if !validIdent(name) {
		return verr(path, identFix, "%s name %q is not a valid identifier", what, name)
	}
	if prev, dup := c.arrays[name]; dup {
		return verr(path, "give each buffer and shared array its own name", "%q is already declared at %s", name, prev.path)
	}
	return nil
}

func validIdent(s string) bool {
	return validName(s, func(i int, r rune) bool {
		return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' && i > 0
	})
}

func validOpID(s string) bool {
	return validName(s, func(_ int, r rune) bool {
		return r == '_' || r == '.' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
	})
}

// validName reports whether s is a name of 1 to MaxNameLen bytes whose every
// rune r, at byte index i, is ok.
func validName(s string, ok func(i int, r rune) bool) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i, r := range s {
		if !ok(i, r) {
			return false
		}
	}
	return true
}

const identFix = "use letters, digits and '_' (not starting with a digit), at most 128 characters"

func (c *checker) header() error {
	p := c.prog
	if !validOpID(p.Name) {
		return verr("name", "use a stable op id of letters, digits, '.', '_' and '-', e.g. \"kiln.vector.add.f32\"",
			"program name %q is not a valid op id", p.Name)
	}
	if err := CheckWorkgroupSize(p.WorkgroupSize); err != nil {
		return &ValidationError{Path: "workgroup_size", Msg: err.Msg, Fix: err.Fix}
	}
	if p.SubgroupSize != 0 {
		if err := CheckSubgroupSize(p.WorkgroupSize, p.SubgroupSize); err != nil {
			return &ValidationError{Path: "subgroup_size", Msg: err.Msg, Fix: err.Fix}
		}
	}
	for i, d := range p.Params {
		path := fmt.Sprintf("params[%d]", i)
		if err := c.checkParamName(path, "parameter", d.Name, "give each parameter its own name", "parameter %q is declared twice"); err != nil {
			return err
		}
		if !d.Type.Valid() {
			return verr(path, "use bool, i32, u32 or f32", "parameter %q has invalid type %d", d.Name, d.Type)
		}
		if d.Type.Is16Bit() {
			return verr(path, "declare the parameter as f32 and cast it where an f16 or bf16 is needed",
				"parameter %q has type %s; IR v1.2 has no 16-bit parameters", d.Name, d.Type)
		}
		if d.Default.Type != d.Type {
			return verr(path, "give the default the parameter's type",
				"parameter %q of type %s has a default of type %s", d.Name, d.Type, d.Default.Type)
		}
		if err := checkLiteral(d.Default, path+".default"); err != nil {
			return err
		}
		if err := checkCandidates(d, path); err != nil {
			return err
		}
		c.params[d.Name] = d.Type
	}
	uniforms := map[string]bool{}
	for i, u := range p.Uniforms {
		path := fmt.Sprintf("uniforms[%d]", i)
		if err := c.checkParamName(path, "uniform", u.Name, "give each parameter and uniform its own name", "%q is already declared as a parameter"); err != nil {
			return err
		}
		if uniforms[u.Name] {
			return verr(path, "give each uniform its own name", "uniform %q is declared twice", u.Name)
		}
		if u.Type.Is16Bit() {
			return verr(path, "declare the uniform as f32 and cast it where an f16 or bf16 is needed",
				"uniform %q has type %s; IR v1.2 has no 16-bit uniforms", u.Name, u.Type)
		}
		if u.Type != I32 && u.Type != U32 && u.Type != F32 {
			return verr(path, "use i32, u32 or f32 (pass a flag as a u32 0 or 1)", "uniform %q has type %s", u.Name, u.Type)
		}
		uniforms[u.Name] = true
		c.uniforms[u.Name] = u.Type
	}
	if len(p.Buffers)+len(p.Uniforms) > MaxBuffers {
		return verr("uniforms", fmt.Sprintf("use at most %d buffers and uniforms together (one push-constant word each), e.g. by packing values into a buffer", MaxBuffers),
			"program declares %d buffers and %d uniforms", len(p.Buffers), len(p.Uniforms))
	}
	if len(p.Buffers) > MaxBuffers {
		return verr("buffers", fmt.Sprintf("use at most %d buffers, e.g. by packing inputs into one", MaxBuffers),
			"program declares %d buffers", len(p.Buffers))
	}
	byBinding := make(map[uint32]string, len(p.Buffers))
	for i, b := range p.Buffers {
		path := fmt.Sprintf("buffers[%d]", i)
		if err := c.checkArrayName(path, "buffer", b.Name); err != nil {
			return err
		}
		if other, dup := byBinding[b.Binding]; dup {
			return verr(path, fmt.Sprintf("give the %d buffers the bindings 0..%d, each once", len(p.Buffers), len(p.Buffers)-1),
				"binding %d of %q is already used by %q", b.Binding, b.Name, other)
		}
		if int64(b.Binding) >= int64(len(p.Buffers)) {
			return verr(path, fmt.Sprintf("give the %d buffers the bindings 0..%d, each once", len(p.Buffers), len(p.Buffers)-1),
				"binding %d of %q leaves a gap: bindings must be dense", b.Binding, b.Name)
		}
		byBinding[b.Binding] = b.Name
		switch {
		case b.Type == Bool:
			return verr(path, "store booleans as u32 0/1", "buffer %q has element type bool; buffers cannot hold bool", b.Name)
		case !b.Type.Valid():
			return verr(path, "use i32, u32, f32, f16 or bf16", "buffer %q has invalid element type %d", b.Name, b.Type)
		case !b.Access.Valid():
			return verr(path, "use read, write or read_write", "buffer %q has invalid access %d", b.Name, b.Access)
		}
		c.arrays[b.Name] = arrayInfo{elem: b.Type, access: b.Access, path: path}
	}
	var sharedBytes uint64
	for i, s := range p.Shared {
		path := fmt.Sprintf("shared[%d]", i)
		if err := c.checkArrayName(path, "shared array", s.Name); err != nil {
			return err
		}
		if !s.Type.Valid() {
			return verr(path, "use bool, i32, u32, f32, f16 or bf16", "shared array %q has invalid element type %d", s.Name, s.Type)
		}
		if s.Count == 0 {
			return verr(path, "give the shared array a positive element count", "shared array %q has count 0", s.Name)
		}
		sharedBytes += uint64(s.Type.Size()) * uint64(s.Count)
		if sharedBytes > MaxSharedBytes {
			return verr(path, fmt.Sprintf("keep all shared arrays together within %d bytes (4 bytes per element, 2 for f16 and bf16)", MaxSharedBytes),
				"shared array %q brings shared memory to %d bytes", s.Name, sharedBytes)
		}
		c.arrays[s.Name] = arrayInfo{elem: s.Type, shared: true, path: path}
	}
	return nil
}

// CheckWorkgroupSize reports whether wg is a usable workgroup size: every axis at
// least 1 and at most MaxInvocations invocations in all.
func CheckWorkgroupSize(wg [3]uint32) *ValidationError {
	for _, n := range wg {
		if n == 0 {
			return &ValidationError{Msg: fmt.Sprintf("workgroup size %v has an axis of 0", wg),
				Fix: "give every axis at least 1 invocation"}
		}
	}
	if n := uint64(wg[0]) * uint64(wg[1]) * uint64(wg[2]); n > MaxInvocations {
		return &ValidationError{Msg: fmt.Sprintf("workgroup size %v has %d invocations, more than %d", wg, n, MaxInvocations),
			Fix: fmt.Sprintf("keep x*y*z at or below %d", MaxInvocations)}
	}
	return nil
}

// CheckSubgroupSize reports whether a program with workgroup size wg can run with
// subgroups of size lanes (IR v1.1): size must be a power of two from 1 to
// MaxSubgroupSize that divides the workgroup's invocation count, so every subgroup
// is full. See docs/design.md, "IR v1.1".
func CheckSubgroupSize(wg [3]uint32, size uint32) *ValidationError {
	if size == 0 || size > MaxSubgroupSize || size&(size-1) != 0 {
		return &ValidationError{Msg: fmt.Sprintf("subgroup size %d is not a power of two from 1 to %d", size, MaxSubgroupSize),
			Fix: "use 1, 2, 4, 8, 16, 32, 64 or 128, or 0 to run with any subgroup size"}
	}
	n := uint64(wg[0]) * uint64(wg[1]) * uint64(wg[2])
	if n%uint64(size) != 0 {
		return &ValidationError{Msg: fmt.Sprintf("workgroup size %v has %d invocations, not a multiple of the subgroup size %d", wg, n, size),
			Fix: fmt.Sprintf("make x*y*z a multiple of %d so every subgroup is full", size)}
	}
	return nil
}

func checkLiteral(l Literal, path string) error {
	if !l.Type.Valid() {
		return verr(path, "use bool, i32, u32 or f32", "literal has invalid type %d", l.Type)
	}
	if l.Type == Bool && l.Bits > 1 {
		return verr(path, "use 0 (false) or 1 (true)", "bool literal has bits %#x", l.Bits)
	}
	if l.Type.Is16Bit() && l.Bits > 0xffff {
		return verr(path, "keep the 16 bits of an f16 or bf16 literal in the low half of Bits (build it with ir.LitF16 or ir.LitBF16)",
			"%s literal has bits %#x, more than 16", l.Type, l.Bits)
	}
	return nil
}

func (c *checker) lookup(name string) (local, bool) {
	for i := len(c.scopes) - 1; i >= 0; i-- {
		if l, ok := c.scopes[i][name]; ok {
			return l, true
		}
	}
	return local{}, false
}

func (c *checker) declare(name, path, kind string, t Type, mutable bool) error {
	if !validIdent(name) {
		return verr(path, identFix, "%s name %q is not a valid identifier", kind, name)
	}
	if prev, ok := c.lookup(name); ok {
		return verr(path, "choose another name", "%q is already declared by the %s at %s", name, prev.kind, prev.path)
	}
	if m, ok := c.matrices[name]; ok {
		return verr(path, "choose another name: matrices share the one namespace", "%q is already declared as a matrix at %s", name, m.path)
	}
	c.scopes[len(c.scopes)-1][name] = local{typ: t, mutable: mutable, path: path, kind: kind}
	return nil
}

func (c *checker) block(stmts []Stmt, path string, depth int) error {
	if depth > MaxNesting {
		return verr(path, "split the kernel into shallower blocks", "statements nest deeper than %d levels", MaxNesting)
	}
	c.scopes = append(c.scopes, map[string]local{})
	defer func() { c.scopes = c.scopes[:len(c.scopes)-1] }()
	for i, s := range stmts {
		if err := c.stmt(s, fmt.Sprintf("%s[%d]", path, i), depth); err != nil {
			return err
		}
	}
	return nil
}

// array resolves a buffer or shared array name used by op.
func (c *checker) array(name, path, op string) (arrayInfo, error) {
	a, ok := c.arrays[name]
	if !ok {
		return a, verr(path, "declare it in buffers or shared, or use one of: "+c.arrayNames(),
			"%s: %q is not a buffer or shared array", op, name)
	}
	return a, nil
}

func (c *checker) arrayNames() string {
	if len(c.arrays) == 0 {
		return "(none declared)"
	}
	names := make([]string, 0, len(c.arrays))
	for n := range c.arrays {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// want checks that e has type t.
func (c *checker) want(e Expr, path string, depth int, t Type, what string) error {
	got, err := c.expr(e, path, depth)
	if err != nil {
		return err
	}
	if got != t {
		return verr(path, fmt.Sprintf("make it %s, with a cast if needed", t), "%s must be %s, got %s", what, t, got)
	}
	return nil
}

func (c *checker) stmt(s Stmt, path string, depth int) error {
	switch s := s.(type) {
	case LetStmt:
		t, err := c.expr(s.Value, path+".value", depth+1)
		if err != nil {
			return err
		}
		return c.declare(s.Name, path, "let", t, false)
	case VarStmt:
		if !s.Type.Valid() {
			return verr(path, "use bool, i32, u32 or f32", "var %q has invalid type %d", s.Name, s.Type)
		}
		if err := c.want(s.Value, path+".value", depth+1, s.Type, fmt.Sprintf("initial value of var %q", s.Name)); err != nil {
			return err
		}
		return c.declare(s.Name, path, "var", s.Type, true)
	case AssignStmt:
		l, ok := c.lookup(s.Name)
		if !ok {
			return verr(path, "declare it with var before assigning", "assign: local %q is not declared", s.Name)
		}
		if !l.mutable {
			return verr(path, "declare it with var to make it mutable",
				"assign: %q is declared by the %s at %s and cannot be assigned", s.Name, l.kind, l.path)
		}
		return c.want(s.Value, path+".value", depth+1, l.typ, fmt.Sprintf("value assigned to %q", s.Name))
	case StoreStmt:
		a, err := c.array(s.Target, path, "store")
		if err != nil {
			return err
		}
		if !a.shared && !a.access.Writable() {
			return verr(path, "declare it with access write or read_write",
				"store: buffer %q has access %s", s.Target, a.access)
		}
		if err := c.want(s.Index, path+".index", depth+1, U32, "store index"); err != nil {
			return err
		}
		return c.want(s.Value, path+".value", depth+1, a.elem, fmt.Sprintf("value stored to %q", s.Target))
	case IfStmt:
		if err := c.want(s.Cond, path+".cond", depth+1, Bool, "if condition"); err != nil {
			return err
		}
		if err := c.block(s.Then, path+".then", depth+1); err != nil {
			return err
		}
		return c.block(s.Else, path+".else", depth+1)
	case ForStmt:
		if s.Type != I32 && s.Type != U32 {
			return verr(path, "count with i32 or u32", "for: loop variable %q has type %s", s.Var, s.Type)
		}
		for _, part := range []struct {
			e    Expr
			name string
		}{{s.From, "from"}, {s.To, "to"}, {s.Step, "step"}} {
			if err := c.want(part.e, path+"."+part.name, depth+1, s.Type, "for "+part.name); err != nil {
				return err
			}
		}
		c.scopes = append(c.scopes, map[string]local{})
		defer func() { c.scopes = c.scopes[:len(c.scopes)-1] }()
		if err := c.declare(s.Var, path, "for", s.Type, false); err != nil {
			return err
		}
		c.loops++
		defer func() { c.loops-- }()
		return c.block(s.Body, path+".body", depth+1)
	case WhileStmt:
		if err := c.want(s.Cond, path+".cond", depth+1, Bool, "while condition"); err != nil {
			return err
		}
		c.loops++
		defer func() { c.loops-- }()
		return c.block(s.Body, path+".body", depth+1)
	case BreakStmt:
		if c.loops == 0 {
			return verr(path, "use break only inside for or while; use return to end the invocation",
				"break outside a loop")
		}
		return nil
	case ContinueStmt:
		if c.loops == 0 {
			return verr(path, "use continue only inside for or while", "continue outside a loop")
		}
		return nil
	case BarrierStmt, ReturnStmt:
		return nil
	case MatrixFillStmt, MatrixLoadStmt, MatrixStoreStmt, MatrixMMAStmt, MatrixConvertStmt:
		return c.matrixStmt(s, path, depth)
	case AtomicStmt:
		if !s.Op.Valid() {
			return verr(path, "use add, min, max, and, or, xor, exchange or cas", "atomic: invalid operation %d", s.Op)
		}
		op := "atomic " + s.Op.String()
		a, err := c.array(s.Target, path, op)
		if err != nil {
			return err
		}
		if !a.shared && !a.access.Writable() {
			return verr(path, "declare it with access write or read_write",
				"%s: buffer %q has access %s", op, s.Target, a.access)
		}
		if !a.elem.IsInteger() {
			return verr(path, "atomics need u32 or i32 elements; accumulate f32 in a u32/i32 array or reduce with shared memory",
				"%s: %q has element type %s", op, s.Target, a.elem)
		}
		if err := c.want(s.Index, path+".index", depth+1, U32, op+" index"); err != nil {
			return err
		}
		if s.Op == AtomicCompareExchange {
			if s.Compare == nil {
				return verr(path, "give cas the value to compare with", "atomic cas: compare is missing")
			}
			if err := c.want(s.Compare, path+".compare", depth+1, a.elem, op+" compare"); err != nil {
				return err
			}
		} else if s.Compare != nil {
			return verr(path+".compare", "remove compare, or use the operation cas", "%s takes no compare value", op)
		}
		if err := c.want(s.Value, path+".value", depth+1, a.elem, op+" value"); err != nil {
			return err
		}
		if s.Result != "" {
			return c.declare(s.Result, path, "atomic result", a.elem, false)
		}
		return nil
	case nil:
		return verr(path, "remove the empty statement", "statement is nil")
	default:
		return verr(path, "build statements with the ir package's types", "unknown statement type %T", s)
	}
}

func (c *checker) expr(e Expr, path string, depth int) (Type, error) {
	if depth > MaxNesting {
		return 0, verr(path, "bind parts of the expression to locals with let", "expressions nest deeper than %d levels", MaxNesting)
	}
	switch e := e.(type) {
	case Literal:
		return e.Type, checkLiteral(e, path)
	case LocalRef:
		l, ok := c.lookup(e.Name)
		if !ok {
			return 0, verr(path, "declare it with let or var before this use (locals are block-scoped)",
				"local %q is not declared", e.Name)
		}
		return l.typ, nil
	case ParamRef:
		t, ok := c.params[e.Name]
		if !ok {
			return 0, verr(path, "declare it in params", "parameter %q is not declared", e.Name)
		}
		return t, nil
	case UniformRef:
		t, ok := c.uniforms[e.Name]
		if !ok {
			return 0, verr(path, "declare it in uniforms", "uniform %q is not declared", e.Name)
		}
		return t, nil
	case BuiltinRef:
		if !e.Kind.Valid() {
			return 0, verr(path, "use global_id, local_id, workgroup_id, num_workgroups, workgroup_size, subgroup_size or subgroup_invocation_id",
				"invalid builtin %d", e.Kind)
		}
		if e.Kind.HasAxis() && e.Axis > 2 {
			return 0, verr(path, "use axis 0, 1 or 2", "builtin %s has axis %d", e.Kind, e.Axis)
		}
		if !e.Kind.HasAxis() && e.Axis != 0 {
			return 0, verr(path, "leave the axis out: the builtin is a scalar", "builtin %s has axis %d", e.Kind, e.Axis)
		}
		return U32, nil
	case BitcastExpr:
		from, err := c.expr(e.X, path+".value", depth+1)
		if err != nil {
			return 0, err
		}
		if e.To.Is16Bit() || from.Is16Bit() {
			return 0, verr(path, "bitcast only between i32, u32 and f32; convert f16 and bf16 with cast through f32",
				"bitcast: %s to %s is not allowed: bitcast does not take 16-bit types", from, e.To)
		}
		if !e.To.IsNumeric() {
			return 0, verr(path, "bitcast to i32, u32 or f32", "bitcast: target type %s is not allowed", e.To)
		}
		if !from.IsNumeric() {
			return 0, verr(path, "bitcast an i32, u32 or f32 value; use cast or select for bool", "bitcast: operand type %s is not allowed", from)
		}
		if from == e.To {
			return 0, verr(path, "remove the bitcast", "bitcast: the operand is already %s", from)
		}
		return e.To, nil
	case SubgroupExpr:
		return c.subgroup(e, path, depth)
	case LoadExpr:
		a, err := c.array(e.Target, path, "load")
		if err != nil {
			return 0, err
		}
		if !a.shared && !a.access.Readable() {
			return 0, verr(path, "declare it with access read_write to read it back",
				"load: buffer %q has access write", e.Target)
		}
		if err := c.want(e.Index, path+".index", depth+1, U32, "load index"); err != nil {
			return 0, err
		}
		return a.elem, nil
	case LenExpr:
		a, ok := c.arrays[e.Buffer]
		if !ok || a.shared {
			return 0, verr(path, "use len on a buffer (a shared array's count is fixed in its declaration)",
				"len: %q is not a buffer", e.Buffer)
		}
		return U32, nil
	case UnaryExpr:
		return c.unary(e, path, depth)
	case BinaryExpr:
		return c.binary(e, path, depth)
	case FmaExpr:
		var ts [3]Type
		for i, x := range []Expr{e.A, e.B, e.C} {
			t, err := c.expr(x, fmt.Sprintf("%s.args[%d]", path, i), depth+1)
			if err != nil {
				return 0, err
			}
			ts[i] = t
		}
		want := F32
		if ts[0] == F16 {
			want = F16
		}
		for i, t := range ts {
			if t != want {
				return 0, verr(fmt.Sprintf("%s.args[%d]", path, i), fmt.Sprintf("make it %s, with a cast if needed", want),
					"fma operand must be %s, got %s", want, t)
			}
		}
		return want, nil
	case SelectExpr:
		if err := c.want(e.Cond, path+".args[0]", depth+1, Bool, "select condition"); err != nil {
			return 0, err
		}
		a, err := c.sameTypes(e.A, e.B, path, 1, depth, "select")
		if err != nil {
			return 0, err
		}
		return a, nil
	case CastExpr:
		from, err := c.expr(e.X, path+".value", depth+1)
		if err != nil {
			return 0, err
		}
		if !e.To.Valid() {
			return 0, verr(path, "cast to bool, i32, u32 or f32", "cast: invalid target type %d", e.To)
		}
		if (from == Bool && e.To == F32) || (from == F32 && e.To == Bool) {
			return 0, verr(path, "go through u32, or use select / a comparison with 0.0",
				"cast: %s to %s is not allowed", from, e.To)
		}
		if (from.Is16Bit() || e.To.Is16Bit()) && from != F32 && e.To != F32 {
			return 0, verr(path, "cast through f32: f16 and bf16 convert only to and from f32",
				"cast: %s to %s is not allowed", from, e.To)
		}
		return e.To, nil
	case nil:
		return 0, verr(path, "supply an expression", "expression is missing")
	default:
		return 0, verr(path, "build expressions with the ir package's types", "unknown expression type %T", e)
	}
}

func (c *checker) unary(e UnaryExpr, path string, depth int) (Type, error) {
	if !e.Op.Valid() {
		return 0, verr(path, "use one of the unary operators of IR v1", "invalid unary operator %d", e.Op)
	}
	t, err := c.expr(e.X, path+".args[0]", depth+1)
	if err != nil {
		return 0, err
	}
	ok := false
	switch e.Op {
	case OpNeg:
		ok = t.IsNumeric() || t == F16
	case OpNot:
		ok = t == Bool || t.IsInteger()
	case OpAbs:
		ok = t == I32 || t == F32 || t == F16
	case OpClz, OpPopcount:
		ok = t.IsInteger()
	case OpSqrt:
		ok = t == F32 || t == F16
	default:
		ok = t == F32
	}
	if !ok {
		return 0, unsupported(path, e.Op.String(), t, "cast the operand to a type the operator accepts (see the ir package's UnaryOp docs)")
	}
	return t, nil
}

// unsupported is the error of operator op on an operand of type t; fix is the
// advice for a 32-bit type.
func unsupported(path, op string, t Type, fix string) error {
	if t.Is16Bit() {
		fix = f16Fix(t)
	}
	return verr(path, fix, "%s: operand type %s is not supported", op, t)
}

// sameTypes checks the operands x and y, args[i] and args[i+1] of the
// expression at path, and that their types agree; what names the expression.
func (c *checker) sameTypes(x, y Expr, path string, i, depth int, what string) (Type, error) {
	tx, err := c.expr(x, path+".args["+strconv.Itoa(i)+"]", depth+1)
	if err != nil {
		return 0, err
	}
	ty, err := c.expr(y, path+".args["+strconv.Itoa(i+1)+"]", depth+1)
	if err != nil {
		return 0, err
	}
	if tx != ty {
		return 0, verr(path, "cast one operand", "%s: operand types %s and %s differ", what, tx, ty)
	}
	return tx, nil
}

func (c *checker) binary(e BinaryExpr, path string, depth int) (Type, error) {
	if !e.Op.Valid() {
		return 0, verr(path, "use one of the binary operators of IR v1", "invalid binary operator %d", e.Op)
	}
	x, err := c.sameTypes(e.X, e.Y, path, 0, depth, e.Op.String())
	if err != nil {
		return 0, err
	}
	ok := false
	switch e.Op {
	case OpAdd, OpSub, OpMul, OpDiv, OpMin, OpMax, OpLt, OpLe, OpGt, OpGe:
		ok = x.IsNumeric() || x == F16
	case OpRem, OpAnd, OpOr, OpXor, OpShl, OpShr:
		ok = x.IsInteger()
	case OpEq, OpNe:
		ok = x != BF16
	case OpLAnd, OpLOr:
		ok = x == Bool
	}
	if !ok {
		return 0, unsupported(path, e.Op.String(), x, "cast the operands to a type the operator accepts (see the ir package's BinaryOp docs)")
	}
	if e.Op.IsComparison() {
		return Bool, nil
	}
	return x, nil
}

func (c *checker) subgroup(e SubgroupExpr, path string, depth int) (Type, error) {
	if !e.Op.Valid() {
		return 0, verr(path, "use subgroup_add, subgroup_min, subgroup_max, subgroup_shuffle or subgroup_broadcast",
			"invalid subgroup operation %d", e.Op)
	}
	t, err := c.expr(e.X, path+".args[0]", depth+1)
	if err != nil {
		return 0, err
	}
	if t.Is16Bit() {
		return 0, verr(path, "cast the operand to f32 first: IR v1.2 has no 16-bit subgroup operations",
			"%s: operand type %s is not supported", e.Op, t)
	}
	if e.Op.HasLane() {
		if e.Lane == nil {
			return 0, verr(path, "give the lane as the second operand", "%s: lane is missing", e.Op)
		}
		if err := c.want(e.Lane, path+".args[1]", depth+1, U32, e.Op.String()+" lane"); err != nil {
			return 0, err
		}
		return t, nil
	}
	if e.Lane != nil {
		return 0, verr(path, "remove the lane: the operation reduces over the whole subgroup", "%s takes one operand", e.Op)
	}
	if !t.IsNumeric() {
		return 0, verr(path, "reduce i32, u32 or f32 values (cast bool to u32)", "%s: operand type %s is not supported", e.Op, t)
	}
	return t, nil
}

// checkCandidates checks a parameter's tuning candidates: at most
// MaxCandidates distinct values of the parameter's type, the default among them.
func checkCandidates(d ParamDecl, path string) error {
	if len(d.Candidates) == 0 {
		return nil
	}
	if len(d.Candidates) > MaxCandidates {
		return verr(path+".candidates", fmt.Sprintf("keep at most %d candidates", MaxCandidates),
			"parameter %q has %d candidates", d.Name, len(d.Candidates))
	}
	seen := map[uint32]bool{}
	hasDefault := false
	for j, l := range d.Candidates {
		at := fmt.Sprintf("%s.candidates[%d]", path, j)
		if l.Type != d.Type {
			return verr(at, "give every candidate the parameter's type",
				"candidate of type %s for parameter %q of type %s", l.Type, d.Name, d.Type)
		}
		if err := checkLiteral(l, at); err != nil {
			return err
		}
		if seen[l.Bits] {
			return verr(at, "list each candidate once", "parameter %q lists the candidate %s twice", d.Name, l)
		}
		seen[l.Bits] = true
		hasDefault = hasDefault || l.Bits == d.Default.Bits
	}
	if !hasDefault {
		return verr(path+".candidates", "add the default to the candidates (it is the untuned baseline)",
			"parameter %q has candidates without its default %s", d.Name, d.Default)
	}
	return nil
}

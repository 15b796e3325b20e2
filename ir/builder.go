package ir

// Builder assembles a Program. It embeds the Block of the program's body, so
// statements are added directly on the builder; nested blocks (if, for, while) are
// filled by callbacks. Buffers get dense bindings in the order they are declared.
type Builder struct {
	Block
	prog Program
}

// NewBuilder starts a program with op id name and the given workgroup size.
func NewBuilder(name string, x, y, z uint32) *Builder {
	return &Builder{prog: Program{Name: name, WorkgroupSize: [3]uint32{x, y, z}}}
}

// Param declares a specialization constant and returns an expression reading it.
func (b *Builder) Param(name string, t Type, def Literal) Expr {
	b.prog.Params = append(b.prog.Params, ParamDecl{Name: name, Type: t, Default: def})
	return Param(name)
}

// Tunable declares a specialization constant with the candidate values a tuner
// may try (the default among them) and returns an expression reading it.
func (b *Builder) Tunable(name string, t Type, def Literal, candidates ...Literal) Expr {
	b.prog.Params = append(b.prog.Params, ParamDecl{Name: name, Type: t, Default: def, Candidates: append([]Literal(nil), candidates...)})
	return Param(name)
}

// Uniform declares a uniform of type t (i32, u32 or f32), whose value each dispatch
// supplies, and returns an expression reading it (IR v1.1).
func (b *Builder) Uniform(name string, t Type) Expr {
	b.prog.Uniforms = append(b.prog.Uniforms, UniformDecl{Name: name, Type: t})
	return Uniform(name)
}

// RequireSubgroupSize makes the program require subgroups of n lanes (IR v1.1); 0,
// the default, lets it run with any subgroup size.
func (b *Builder) RequireSubgroupSize(n uint32) { b.prog.SubgroupSize = n }

// Buffer declares a storage buffer whose size the dispatch decides, at the next
// binding, and returns its name for Load, Store, Len and Atomic.
func (b *Builder) Buffer(name string, t Type, access Access) string {
	return b.FixedBuffer(name, t, access, 0)
}

// FixedBuffer declares a storage buffer of exactly count elements at the next binding.
func (b *Builder) FixedBuffer(name string, t Type, access Access, count uint32) string {
	b.prog.Buffers = append(b.prog.Buffers, BufferDecl{
		Name: name, Binding: uint32(len(b.prog.Buffers)), Type: t, Access: access, Count: count,
	})
	return name
}

// Shared declares a workgroup-shared array of count elements and returns its name.
func (b *Builder) Shared(name string, t Type, count uint32) string {
	b.prog.Shared = append(b.prog.Shared, SharedDecl{Name: name, Type: t, Count: count})
	return name
}

// Program returns the program built so far, without validating it.
func (b *Builder) Program() *Program {
	p := b.prog
	p.Params = append([]ParamDecl(nil), b.prog.Params...)
	p.Uniforms = append([]UniformDecl(nil), b.prog.Uniforms...)
	p.Buffers = append([]BufferDecl(nil), b.prog.Buffers...)
	p.Shared = append([]SharedDecl(nil), b.prog.Shared...)
	p.Matrices = append([]MatrixDecl(nil), b.prog.Matrices...)
	p.Body = append([]Stmt(nil), b.stmts...)
	return &p
}

// Build returns the program after Validate accepts it.
func (b *Builder) Build() (*Program, error) {
	p := b.Program()
	if err := Validate(p); err != nil {
		return nil, err
	}
	return p, nil
}

// MustBuild is Build for programs fixed at compile time, such as the kernel corpus;
// it panics if the program is invalid.
func (b *Builder) MustBuild() *Program {
	p, err := b.Build()
	if err != nil {
		panic(err)
	}
	return p
}

// Block is a list of statements under construction.
type Block struct {
	stmts []Stmt
}

// Append adds prebuilt statements.
func (k *Block) Append(s ...Stmt) { k.stmts = append(k.stmts, s...) }

// Let binds an immutable local and returns an expression reading it.
func (k *Block) Let(name string, value Expr) Expr {
	k.stmts = append(k.stmts, LetStmt{Name: name, Value: value})
	return Local(name)
}

// Var declares a mutable local and returns an expression reading it.
func (k *Block) Var(name string, t Type, value Expr) Expr {
	k.stmts = append(k.stmts, VarStmt{Name: name, Type: t, Value: value})
	return Local(name)
}

// Assign sets a var.
func (k *Block) Assign(name string, value Expr) {
	k.stmts = append(k.stmts, AssignStmt{Name: name, Value: value})
}

// Store writes target[index] = value.
func (k *Block) Store(target string, index, value Expr) {
	k.stmts = append(k.stmts, StoreStmt{Target: target, Index: index, Value: value})
}

// If runs then when cond holds.
func (k *Block) If(cond Expr, then func(*Block)) {
	k.IfElse(cond, then, nil)
}

// IfElse runs then when cond holds and otherwise els; either callback may be nil.
func (k *Block) IfElse(cond Expr, then, els func(*Block)) {
	k.stmts = append(k.stmts, IfStmt{Cond: cond, Then: fill(then), Else: fill(els)})
}

// For runs body for name = from, from+step, ... while name < to. The callback gets
// an expression reading the loop variable.
func (k *Block) For(name string, t Type, from, to, step Expr, body func(b *Block, i Expr)) {
	var inner Block
	if body != nil {
		body(&inner, Local(name))
	}
	k.stmts = append(k.stmts, ForStmt{Var: name, Type: t, From: from, To: to, Step: step, Body: inner.stmts})
}

// While runs body while cond holds.
func (k *Block) While(cond Expr, body func(*Block)) {
	k.stmts = append(k.stmts, WhileStmt{Cond: cond, Body: fill(body)})
}

// Break leaves the innermost loop.
func (k *Block) Break() { k.stmts = append(k.stmts, BreakStmt{}) }

// Continue ends the current iteration of the innermost loop (IR v1.1).
func (k *Block) Continue() { k.stmts = append(k.stmts, ContinueStmt{}) }

// Barrier synchronizes the workgroup (execution and memory).
func (k *Block) Barrier() { k.stmts = append(k.stmts, BarrierStmt{}) }

// Return ends this invocation.
func (k *Block) Return() { k.stmts = append(k.stmts, ReturnStmt{}) }

// Atomic applies op to target[index] with value, discarding the old value.
func (k *Block) Atomic(op AtomicOp, target string, index, value Expr) {
	k.stmts = append(k.stmts, AtomicStmt{Op: op, Target: target, Index: index, Value: value})
}

// AtomicResult applies op to target[index] with value and binds the old value to the
// immutable local result, returning an expression reading it.
func (k *Block) AtomicResult(op AtomicOp, target string, index, value Expr, result string) Expr {
	k.stmts = append(k.stmts, AtomicStmt{Op: op, Target: target, Index: index, Value: value, Result: result})
	return Local(result)
}

// AtomicCAS compares target[index] with compare and, when they are equal, stores
// value, atomically; it binds the old value to the immutable local result and
// returns an expression reading it (IR v1.1). The store happened when the old value
// equals compare.
func (k *Block) AtomicCAS(target string, index, compare, value Expr, result string) Expr {
	k.stmts = append(k.stmts, AtomicStmt{Op: AtomicCompareExchange, Target: target, Index: index,
		Value: value, Result: result, Compare: compare})
	return Local(result)
}

func fill(f func(*Block)) []Stmt {
	if f == nil {
		return nil
	}
	var b Block
	f(&b)
	return b.stmts
}

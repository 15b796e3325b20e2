package ir

// Stmt is a statement node. The concrete types are LetStmt, VarStmt, AssignStmt,
// StoreStmt, IfStmt, ForStmt, WhileStmt, BreakStmt, BarrierStmt, AtomicStmt and
// ReturnStmt, since IR v1.1 ContinueStmt, and since IR v1.2 the matrix statements
// MatrixFillStmt, MatrixLoadStmt, MatrixStoreStmt, MatrixMMAStmt and
// MatrixConvertStmt (values, not pointers); no other type implements Stmt.
type Stmt interface{ isStmt() }

// LetStmt binds an immutable local.
type LetStmt struct {
	Name  string
	Value Expr
}

// VarStmt declares a mutable local of type Type.
type VarStmt struct {
	Name  string
	Type  Type
	Value Expr
}

// AssignStmt sets a local declared by var.
type AssignStmt struct {
	Name  string
	Value Expr
}

// StoreStmt writes Value to Target[Index]; out of bounds does nothing.
type StoreStmt struct {
	Target string
	Index  Expr
	Value  Expr
}

// IfStmt runs Then when Cond holds, else Else.
type IfStmt struct {
	Cond Expr
	Then []Stmt
	Else []Stmt
}

// ForStmt is a counted loop. From, To and Step are evaluated once, before the first
// iteration. Var starts at From; before each iteration the loop ends unless Var < To
// (signed for i32, unsigned for u32); after each iteration Var += Step, wrapping.
// Var is read-only in Body. Type is i32 or u32.
type ForStmt struct {
	Var            string
	Type           Type
	From, To, Step Expr
	Body           []Stmt
}

// WhileStmt runs Body while Cond holds.
type WhileStmt struct {
	Cond Expr
	Body []Stmt
}

// BreakStmt leaves the innermost for or while loop.
type BreakStmt struct{}

// ContinueStmt ends the current iteration of the innermost for or while loop (IR
// v1.1): a for loop adds its step and tests its bound, a while loop tests its
// condition.
type ContinueStmt struct{}

// BarrierStmt is a workgroup execution and memory barrier. Every invocation of a
// workgroup must reach the same barriers.
type BarrierStmt struct{}

// AtomicStmt applies Op atomically to Target[Index] (a u32 or i32 buffer or shared
// array) with Value. When Result is set, it declares an immutable local holding the
// old value. Out of bounds does nothing and the result is 0. Compare is set exactly
// when Op is AtomicCompareExchange: the element becomes Value only if it equals
// Compare.
type AtomicStmt struct {
	Op      AtomicOp
	Target  string
	Index   Expr
	Value   Expr
	Result  string
	Compare Expr
}

// ReturnStmt ends this invocation.
type ReturnStmt struct{}

func (LetStmt) isStmt()     {}
func (VarStmt) isStmt()     {}
func (AssignStmt) isStmt()  {}
func (StoreStmt) isStmt()   {}
func (IfStmt) isStmt()      {}
func (ForStmt) isStmt()     {}
func (WhileStmt) isStmt()   {}
func (BreakStmt) isStmt()   {}
func (BarrierStmt) isStmt() {}
func (AtomicStmt) isStmt()  {}
func (ReturnStmt) isStmt()  {}

func (ContinueStmt) isStmt() {}

func (MatrixFillStmt) isStmt()    {}
func (MatrixLoadStmt) isStmt()    {}
func (MatrixStoreStmt) isStmt()   {}
func (MatrixMMAStmt) isStmt()     {}
func (MatrixConvertStmt) isStmt() {}

// AtomicOp is an atomic read-modify-write operation.
type AtomicOp uint8

// The atomic operations, on u32 and i32 (min and max compare with the element's
// signedness). AtomicCompareExchange (IR v1.1, JSON "cas") compares the element
// with the statement's Compare and stores Value only when they are equal; its
// result is the old value either way, so old == compare tells that it stored.
const (
	AtomicAdd AtomicOp = iota + 1
	AtomicMin
	AtomicMax
	AtomicAnd
	AtomicOr
	AtomicXor
	AtomicExchange
	AtomicCompareExchange
	atomicEnd
)

var atomicNames = [...]string{
	AtomicAdd: "add", AtomicMin: "min", AtomicMax: "max", AtomicAnd: "and",
	AtomicOr: "or", AtomicXor: "xor", AtomicExchange: "exchange", AtomicCompareExchange: "cas",
}

// String returns the operation's JSON name.
func (o AtomicOp) String() string { return enumString(atomicNames[:], AtomicAdd, o) }

// Valid reports whether o is a defined atomic operation.
func (o AtomicOp) Valid() bool { return o > 0 && o < atomicEnd }

// AtomicOps lists every atomic operation.
func AtomicOps() []AtomicOp { return enumValues(atomicNames[:], AtomicAdd) }

// ParseAtomicOp turns an operation name into an AtomicOp.
func ParseAtomicOp(name string) (AtomicOp, bool) { return parseEnum(atomicNames[:], AtomicAdd, name) }

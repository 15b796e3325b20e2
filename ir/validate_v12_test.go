package ir

import (
	"testing"
)

// matmulV12 builds a well-formed IR v1.2 program: a 64x64 tile of C = A·B per
// workgroup from bf16 (or, by t, f16 or f32) inputs, K stepping by 16 under a
// uniform loop, with f16 arithmetic on the side.
func matmulV12(t Type) *Builder {
	b := NewBuilder("kiln.test.matmul_v12", 128, 1, 1)
	b.Buffer("a", t, Read)
	b.Buffer("bm", t, Read)
	b.Buffer("c", F32, ReadWrite)
	b.Buffer("h", F16, ReadWrite)
	b.Shared("tile", t, 16*64)
	n := b.Uniform("n", U32)
	b.Matrix("A", t, 64, 16)
	b.Matrix("B", t, 16, 64)
	b.Matrix("acc", F32, 64, 64)
	b.Matrix("half", F16, 64, 64)
	row := b.Let("row", Mul(WorkgroupID(1), LitU32(64)))
	col := b.Let("col", Mul(WorkgroupID(0), LitU32(64)))
	b.MatrixFill("acc", LitF32(0))
	b.For("k", U32, LitU32(0), n, LitU32(16), func(body *Block, k Expr) {
		body.MatrixLoadBounded("A", "a", Add(Mul(row, n), k), n, RowMajor, Sub(n, row), Sub(n, k))
		body.MatrixLoad("B", "bm", Add(Mul(k, n), col), n, ColMajor)
		body.MatrixStore("B", "tile", LitU32(0), LitU32(64), RowMajor)
		body.MatrixLoad("B", "tile", LitU32(0), LitU32(64), RowMajor)
		if t == F32 {
			body.MatrixMMATF32("acc", "A", "B")
		} else {
			body.MatrixMMA("acc", "A", "B")
		}
	})
	b.If(Lt(row, n), func(then *Block) {
		then.MatrixStoreBounded("acc", "c", Add(Mul(row, n), col), n, RowMajor, Sub(n, row), Sub(n, col))
	})
	b.MatrixConvert("half", "acc")
	b.MatrixStore("half", "h", LitU32(0), LitU32(64), ColMajor)
	i := b.Let("i", GlobalID(0))
	x := b.Let("x", Load("h", i))
	b.Var("y", F16, Fma(x, Sqrt(Abs(Neg(x))), LitF16(1.5)))
	b.Assign("y", Min(Max(Local("y"), Div(x, LitF16(2))), Sub(Mul(x, x), Add(x, x))))
	b.Let("lt", LAnd(Lt(x, Local("y")), Ne(x, x)))
	b.Let("bf", Select(Ge(x, x), LitBF16(-2), Cast(BF16, Cast(F32, x))))
	b.Store("h", i, Select(Eq(x, x), Local("y"), x))
	return b
}

func TestValidateAcceptsV12Programs(t *testing.T) {
	for _, typ := range []Type{F16, BF16, F32} {
		if _, err := matmulV12(typ).Build(); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
	// Uniform control flow the analysis must not reject: a varying value that
	// never reaches a matrix statement, a loop whose break is under a uniform
	// condition, a local reassigned from uniform values, y-axis ids of a 1-high
	// workgroup, a varying return in one branch of a uniform if with a matrix
	// statement in the other, and a varying return after the last matrix statement.
	b := NewBuilder("kiln.test.uniform", 64, 1, 1)
	b.Buffer("a", U32, ReadWrite)
	b.Matrix("m", F32, 16, 16)
	b.Buffer("mf", F32, ReadWrite)
	b.Let("lid", LocalID(0))
	v := b.Var("off", U32, LitU32(0))
	b.While(LitBool(true), func(body *Block) {
		body.If(Gt(Local("off"), Uniform("n")), func(then *Block) { then.Break() })
		body.MatrixLoad("m", "mf", Add(v, GlobalID(1)), LitU32(16), RowMajor)
		body.Assign("off", Add(Local("off"), Load("a", LocalID(1))))
	})
	b.Uniform("n", U32)
	b.MatrixStore("m", "mf", Local("off"), LitU32(16), RowMajor)
	b.IfElse(Eq(Uniform("n"), LitU32(0)), func(then *Block) {
		then.If(Lt(Local("lid"), LitU32(3)), func(inner *Block) { inner.Return() })
	}, func(els *Block) {
		els.MatrixFill("m", LitF32(1))
	})
	b.If(Lt(Local("lid"), LitU32(3)), func(then *Block) { then.Return() })
	if _, err := b.Build(); err != nil {
		t.Errorf("uniform program: %v", err)
	}
}

// TestValidateRejectsV12 pins one error per IR v1.2 rule: the path, the message
// and the Fix.
func TestValidateRejectsV12(t *testing.T) {
	mats := func(b *Builder) {
		b.Buffer("a", F16, Read)
		b.Buffer("o", F16, Write)
		b.Buffer("f", F32, ReadWrite)
		b.Matrix("A", F16, 32, 16)
		b.Matrix("B", F16, 16, 48)
		b.Matrix("acc", F32, 32, 48)
	}
	// withMats declares mats before stmt's one statement.
	withMats := func(stmt func(b *Builder)) func(b *Builder) {
		return func(b *Builder) {
			mats(b)
			stmt(b)
		}
	}
	cases := []rejectCase{
		// 16-bit types.
		{"f16 param", func(b *Builder) { b.Param("p", F16, LitF16(1)) }, []string{"params[0]", `parameter "p" has type f16; IR v1.2 has no 16-bit parameters`}},
		{"bf16 uniform", func(b *Builder) { b.Uniform("u", BF16) }, []string{"uniforms[0]", `uniform "u" has type bf16`}},
		{"f16 literal bits", func(b *Builder) { b.Let("x", Literal{Type: F16, Bits: 0x10000}) }, []string{"body[0].value", "f16 literal has bits 0x10000, more than 16"}},
		{"bf16 literal bits", func(b *Builder) { b.Let("x", Literal{Type: BF16, Bits: 1 << 20}) }, []string{"bf16 literal has bits"}},
		{"cast f16 to u32", func(b *Builder) { b.Let("x", Cast(U32, LitF16(1))) }, []string{"body[0].value", "cast: f16 to u32 is not allowed", "Fix: cast through f32"}},
		{"cast i32 to bf16", func(b *Builder) { b.Let("x", Cast(BF16, LitI32(1))) }, []string{"cast: i32 to bf16 is not allowed"}},
		{"cast f16 to bf16", func(b *Builder) { b.Let("x", Cast(BF16, LitF16(1))) }, []string{"cast: f16 to bf16 is not allowed"}},
		{"cast bool to f16", func(b *Builder) { b.Let("x", Cast(F16, LitBool(true))) }, []string{"cast: bool to f16 is not allowed"}},
		{"bitcast f16", func(b *Builder) { b.Let("x", Bitcast(U32, LitF16(1))) }, []string{"bitcast: f16 to u32 is not allowed: bitcast does not take 16-bit types"}},
		{"bitcast to bf16", func(b *Builder) { b.Let("x", Bitcast(BF16, LitF32(1))) }, []string{"bitcast: f32 to bf16 is not allowed"}},
		{"exp of f16", func(b *Builder) { b.Let("x", Exp(LitF16(1))) }, []string{"exp: operand type f16 is not supported", "Fix: f16 takes neg"}},
		{"floor of f16", func(b *Builder) { b.Let("x", Floor(LitF16(1))) }, []string{"floor: operand type f16 is not supported"}},
		{"rem of f16", func(b *Builder) { b.Let("x", Rem(LitF16(1), LitF16(2))) }, []string{"rem: operand type f16 is not supported"}},
		{"add of bf16", func(b *Builder) { b.Let("x", Add(LitBF16(1), LitBF16(2))) }, []string{"add: operand type bf16 is not supported", "Fix: bf16 is a storage and matrix type"}},
		{"eq of bf16", func(b *Builder) { b.Let("x", Eq(LitBF16(1), LitBF16(2))) }, []string{"eq: operand type bf16 is not supported"}},
		{"neg of bf16", func(b *Builder) { b.Let("x", Neg(LitBF16(1))) }, []string{"neg: operand type bf16 is not supported"}},
		{"sqrt of bf16", func(b *Builder) { b.Let("x", Sqrt(LitBF16(1))) }, []string{"sqrt: operand type bf16"}},
		{"fma of bf16", func(b *Builder) { b.Let("x", Fma(LitBF16(1), LitBF16(1), LitBF16(1))) }, []string{"body[0].value.args[0]", "fma operand must be f32, got bf16"}},
		{"fma mixed", func(b *Builder) { b.Let("x", Fma(LitF16(1), LitF16(1), LitF32(1))) }, []string{"body[0].value.args[2]", "fma operand must be f16, got f32"}},
		{"f16 and f32 mixed", func(b *Builder) { b.Let("x", Add(LitF16(1), LitF32(1))) }, []string{"add: operand types f16 and f32 differ"}},
		{"f16 atomic", func(b *Builder) {
			b.Buffer("h", F16, ReadWrite)
			b.Atomic(AtomicAdd, "h", LitU32(0), LitF16(1))
		}, []string{"atomic add", `"h" has element type f16`}},
		{"f16 subgroup add", func(b *Builder) { b.Let("x", SubgroupAdd(LitF16(1))) }, []string{"subgroup_add: operand type f16 is not supported", "no 16-bit subgroup operations"}},
		{"bf16 shuffle", func(b *Builder) { b.Let("x", SubgroupShuffle(LitBF16(1), LitU32(0))) }, []string{"subgroup_shuffle: operand type bf16"}},
		{"f16 shared bytes", func(b *Builder) {
			b.Shared("s", F16, 16384)
			b.Shared("t", F16, 1)
		}, []string{"shared[1]", "32770 bytes"}},
		{"f16 store type", func(b *Builder) {
			b.Buffer("o", F16, Write)
			b.Store("o", LitU32(0), LitF32(1))
		}, []string{`value stored to "o" must be f16, got f32`}},

		// Matrix declarations.
		{"matrix type", func(b *Builder) { b.Matrix("m", U32, 16, 16) }, []string{"matrices[0]", `matrix "m" has element type u32`, "Fix: use f16, bf16 or f32"}},
		{"matrix rows not multiple", func(b *Builder) { b.Matrix("m", F16, 24, 16) }, []string{"matrices[0]", `matrix "m" has rows 24`, "multiple of 16"}},
		{"matrix cols zero", func(b *Builder) { b.Matrix("m", F16, 16, 0) }, []string{`matrix "m" has cols 0`}},
		{"matrix too big", func(b *Builder) { b.Matrix("m", F16, 272, 16) }, []string{`matrix "m" has rows 272`}},
		{"matrices over 192 KiB", func(b *Builder) {
			b.Matrix("m", F32, 256, 192)
			b.Matrix("n", F16, 16, 16)
		}, []string{"matrices[1]", `matrix "n" brings the matrices to 197120 bytes`}},
		{"matrix name", func(b *Builder) { b.Matrix("9m", F16, 16, 16) }, []string{`matrix name "9m" is not a valid identifier`}},
		{"matrix twice", func(b *Builder) {
			b.Matrix("m", F16, 16, 16)
			b.Matrix("m", F16, 16, 16)
		}, []string{"matrices[1]", `matrix "m" is already declared at matrices[0]`}},
		{"matrix named like a buffer", func(b *Builder) {
			b.Buffer("m", F16, Read)
			b.Matrix("m", F16, 16, 16)
		}, []string{"matrices[0]", `matrix "m" is already declared at buffers[0]`}},
		{"matrix named like a param", func(b *Builder) {
			b.Param("m", U32, LitU32(1))
			b.Matrix("m", F16, 16, 16)
		}, []string{`matrix "m" is already declared as a parameter`}},
		{"matrix named like a uniform", func(b *Builder) {
			b.Uniform("m", U32)
			b.Matrix("m", F16, 16, 16)
		}, []string{`matrix "m" is already declared as a uniform`}},
		{"local named like a matrix", func(b *Builder) {
			b.Matrix("m", F16, 16, 16)
			b.Let("m", LitU32(1))
		}, []string{"body[0]", `"m" is already declared as a matrix at matrices[0]`}},

		// Matrix statements.
		{"fill unknown matrix", func(b *Builder) { b.MatrixFill("nope", LitF32(0)) }, []string{"body[0]", `matrix_fill: "nope" is not a matrix`, "Fix: declare it in matrices"}},
		{"fill value type", withMats(func(b *Builder) { b.MatrixFill("A", LitF32(0)) }), []string{"body[0].value", `matrix_fill value for "A" must be f16, got f32`}},
		{"load from unknown", withMats(func(b *Builder) { b.MatrixLoad("A", "zz", LitU32(0), LitU32(16), RowMajor) }), []string{"body[0].from", `matrix_load: "zz" is not a buffer or shared array`}},
		{"load from write buffer", withMats(func(b *Builder) { b.MatrixLoad("A", "o", LitU32(0), LitU32(16), RowMajor) }), []string{"body[0].from", `matrix_load: buffer "o" has access write`}},
		{"load element type", withMats(func(b *Builder) { b.MatrixLoad("acc", "a", LitU32(0), LitU32(16), RowMajor) }), []string{"body[0].from", `matrix_load: "a" has element type f16 but matrix "acc" has f32`}},
		{"store to read buffer", withMats(func(b *Builder) { b.MatrixStore("A", "a", LitU32(0), LitU32(16), RowMajor) }), []string{"body[0].to", `matrix_store: buffer "a" has access read`}},
		{"store element type", withMats(func(b *Builder) { b.MatrixStore("A", "f", LitU32(0), LitU32(16), RowMajor) }), []string{"body[0].to", `matrix_store: "f" has element type f32 but matrix "A" has f16`}},
		{"store unknown matrix", withMats(func(b *Builder) { b.MatrixStore("Z", "o", LitU32(0), LitU32(16), RowMajor) }), []string{`matrix_store: "Z" is not a matrix`}},
		{"offset type", withMats(func(b *Builder) { b.MatrixLoad("A", "a", LitI32(0), LitU32(16), RowMajor) }), []string{"body[0].offset", "matrix_load offset must be u32, got i32"}},
		{"stride type", withMats(func(b *Builder) { b.MatrixStore("A", "o", LitU32(0), LitF32(16), RowMajor) }), []string{"body[0].stride", "matrix_store stride must be u32, got f32"}},
		{"bound type", withMats(func(b *Builder) { b.MatrixLoadBounded("A", "a", LitU32(0), LitU32(16), RowMajor, LitU32(1), LitI32(1)) }), []string{"body[0].bound[1]", "matrix_load bound cols must be u32, got i32"}},
		{"bad layout", withMats(func(b *Builder) { b.MatrixLoad("A", "a", LitU32(0), LitU32(16), 0) }), []string{"body[0].layout", "matrix_load: invalid layout 0", `Fix: use "row" or "col"`}},
		{"mma acc not f32", func(b *Builder) {
			mats(b)
			b.Matrix("hacc", F16, 32, 48)
			b.MatrixMMA("hacc", "A", "B")
		}, []string{"body[0]", `matrix_mma: accumulator "hacc" has element type f16`}},
		{"mma operand types", func(b *Builder) {
			mats(b)
			b.Matrix("Bb", BF16, 16, 48)
			b.MatrixMMA("acc", "A", "Bb")
		}, []string{`matrix_mma: a "A" is f16 but b "Bb" is bf16`}},
		{"mma tf32 with f16", withMats(func(b *Builder) { b.MatrixMMATF32("acc", "A", "B") }), []string{"body[0].precision", "matrix_mma: precision tf32 with f16 operands"}},
		{"mma bad precision", withMats(func(b *Builder) { b.Append(MatrixMMAStmt{Acc: "acc", A: "A", B: "B", Precision: 7}) }), []string{"body[0].precision", "invalid precision 7"}},
		{"mma acc is operand", func(b *Builder) {
			b.Matrix("s", F32, 16, 16)
			b.Matrix("t", F32, 16, 16)
			b.MatrixMMA("s", "s", "t")
		}, []string{`matrix_mma: accumulator "s" is also an operand`}},
		{"mma inner shape", func(b *Builder) {
			mats(b)
			b.Matrix("B2", F16, 32, 48)
			b.MatrixMMA("acc", "A", "B2")
		}, []string{"matrix_mma: shapes do not match", `a "A" is 32x16, b "B2" is 32x48`}},
		{"mma acc shape", func(b *Builder) {
			mats(b)
			b.Matrix("acc2", F32, 32, 32)
			b.MatrixMMA("acc2", "A", "B")
		}, []string{"matrix_mma: shapes do not match", `acc "acc2" is 32x32`}},
		{"mma unknown b", withMats(func(b *Builder) { b.MatrixMMA("acc", "A", "nope") }), []string{"body[0].b", `matrix_mma: "nope" is not a matrix`}},
		{"convert to itself", withMats(func(b *Builder) { b.MatrixConvert("acc", "acc") }), []string{`matrix_convert: "acc" is both destination and source`}},
		{"convert shape", withMats(func(b *Builder) { b.MatrixConvert("A", "acc") }), []string{`matrix_convert: "A" is 32x16 but "acc" is 32x48`}},
		{"convert unknown source", withMats(func(b *Builder) { b.MatrixConvert("A", "nope") }), []string{"body[0].from", `matrix_convert: "nope" is not a matrix`}},

		// Collective statements.
		{"varying offset", withMats(func(b *Builder) { b.MatrixLoad("A", "a", LocalID(0), LitU32(16), RowMajor) }), []string{"body[0].offset", "matrix_load: offset differs between invocations: it reads local_id", "Fix: every invocation"}},
		{"varying stride via let", func(b *Builder) {
			mats(b)
			b.Let("g", Add(GlobalID(0), LitU32(1)))
			b.MatrixStore("A", "o", LitU32(0), Local("g"), RowMajor)
		}, []string{"body[1].stride", `reads the local "g" (declared at body[0]), which is varying`}},
		{"varying bound", withMats(func(b *Builder) {
			b.MatrixLoadBounded("A", "a", LitU32(0), LitU32(16), RowMajor, LitU32(4), SubgroupInvocationID())
		}), []string{"body[0].bound[1]", "reads subgroup_invocation_id"}},
		{"varying fill value", withMats(func(b *Builder) { b.MatrixFill("A", Load("a", LocalID(0))) }), []string{"body[0].value", `loads "a" at an index that reads local_id`}},
		{"atomic result operand", func(b *Builder) {
			mats(b)
			b.Buffer("cnt", U32, ReadWrite)
			old := b.AtomicResult(AtomicAdd, "cnt", LitU32(0), LitU32(1), "old")
			b.MatrixLoad("A", "a", old, LitU32(16), RowMajor)
		}, []string{"body[1].offset", `reads the local "old"`}},
		{"varying if", withMats(func(b *Builder) {
			b.If(Lt(LocalID(0), LitU32(4)), func(then *Block) { then.MatrixMMA("acc", "A", "B") })
		}), []string{"body[0].then[0]", "matrix_mma: not reached by every invocation of the workgroup: it runs under the condition at body[0].cond, which reads local_id"}},
		{"varying while", withMats(func(b *Builder) {
			b.While(Lt(GlobalID(0), LitU32(4)), func(body *Block) { body.MatrixFill("acc", LitF32(0)) })
		}), []string{"body[0].body[0]", "not reached by every invocation"}},
		{"varying for bound", withMats(func(b *Builder) {
			b.For("k", U32, LitU32(0), LocalID(0), LitU32(1), func(body *Block, _ Expr) { body.MatrixFill("acc", LitF32(0)) })
		}), []string{"body[0].body[0]", "the loop bound at body[0].to, which reads local_id"}},
		{"var assigned under varying if", func(b *Builder) {
			mats(b)
			b.Var("off", U32, LitU32(0))
			b.If(Eq(LocalID(0), LitU32(0)), func(then *Block) { then.Assign("off", LitU32(16)) })
			b.MatrixLoad("A", "a", Local("off"), LitU32(16), RowMajor)
		}, []string{"body[2].offset", `reads the local "off" (declared at body[0]), which is varying`}},
		{"var made varying later in the loop", func(b *Builder) {
			mats(b)
			b.Var("off", U32, LitU32(0))
			b.For("k", U32, LitU32(0), LitU32(4), LitU32(1), func(body *Block, _ Expr) {
				body.MatrixLoad("A", "a", Local("off"), LitU32(16), RowMajor)
				body.Assign("off", LocalID(0))
			})
		}, []string{"body[1].body[0].offset", `reads the local "off"`}},
		{"after varying return", func(b *Builder) {
			mats(b)
			b.If(Gt(LocalID(0), LitU32(31)), func(then *Block) { then.Return() })
			b.MatrixFill("acc", LitF32(0))
		}, []string{"body[1]", "matrix_fill: not reached by every invocation", "the return at body[0].then[0] under the condition at body[0].cond"}},
		{"after varying break", func(b *Builder) {
			mats(b)
			b.While(LitBool(true), func(body *Block) {
				body.MatrixFill("acc", LitF32(0))
				body.If(Gt(LocalID(0), LitU32(31)), func(then *Block) { then.Break() })
			})
		}, []string{"body[0].body[0]", "the loop is left at body[0].body[1].then[0]"}},
		{"after varying continue", func(b *Builder) {
			mats(b)
			b.For("k", U32, LitU32(0), LitU32(4), LitU32(1), func(body *Block, _ Expr) {
				body.If(Gt(LocalID(0), LitU32(31)), func(then *Block) { then.Continue() })
				body.MatrixFill("acc", LitF32(0))
			})
		}, []string{"body[0].body[1]", "not reached by every invocation"}},
		{"varying return inside a loop", func(b *Builder) {
			mats(b)
			b.For("k", U32, LitU32(0), LitU32(4), LitU32(1), func(body *Block, _ Expr) {
				body.MatrixFill("acc", LitF32(0))
				body.If(Gt(LocalID(0), LitU32(31)), func(then *Block) { then.Return() })
			})
		}, []string{"body[0].body[0]", "the return at body[0].body[1].then[0]"}},
	}
	checkRejects(t, cases)
}

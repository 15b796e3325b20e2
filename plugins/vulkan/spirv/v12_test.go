package spirv

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// v12Programs are the table's IR v1.2 programs: every f16 operator and cast,
// bf16 through buffers, shared arrays, vars and select, and every matrix
// statement in each of its forms (bounds, layouts, buffer and shared sources
// and destinations, every mma operand type, tf32, convert between every pair
// of types). They join the semantic table, so every module test (spirv-val,
// determinism, addressed buffers, grids) covers them.
func v12Programs(tb testing.TB) []namedProgram {
	var out []namedProgram
	add := func(name string, build func(b *ir.Builder)) {
		b := ir.NewBuilder(name, 64, 1, 1)
		build(b)
		p, err := b.Build()
		if err != nil {
			tb.Fatalf("v1.2 program %q: %v", name, err)
		}
		out = append(out, namedProgram{name, p})
	}
	add("v12.f16_ops", func(b *ir.Builder) {
		b.Buffer("x", ir.F16, ir.Read)
		b.Buffer("y", ir.F16, ir.Write)
		b.Buffer("flags", ir.U32, ir.Write)
		b.Shared("s", ir.F16, 64)
		i := b.Let("i", ir.GlobalID(0))
		x := b.Let("v", ir.Load("x", i))
		one := ir.LitF16(1.5)
		b.Store("s", ir.LocalID(0), ir.Neg(x))
		acc := b.Var("acc", ir.F16, ir.Abs(x))
		for _, f := range []func(a, c ir.Expr) ir.Expr{ir.Add, ir.Sub, ir.Mul, ir.Div, ir.Min, ir.Max} {
			b.Assign("acc", f(acc, one))
		}
		b.Assign("acc", ir.Fma(acc, x, ir.Sqrt(acc)))
		b.Assign("acc", ir.Select(ir.Lt(acc, x), acc, ir.Load("s", ir.LocalID(0))))
		b.Store("y", i, acc)
		flags := ir.Expr(ir.LitU32(0))
		for k, cmp := range []func(a, c ir.Expr) ir.Expr{ir.Eq, ir.Ne, ir.Lt, ir.Le, ir.Gt, ir.Ge} {
			flags = ir.Or(flags, ir.Select(cmp(acc, x), ir.LitU32(1<<k), ir.LitU32(0)))
		}
		b.Store("flags", i, flags)
	})
	add("v12.casts", func(b *ir.Builder) {
		b.Buffer("x", ir.F32, ir.Read)
		b.Buffer("h", ir.F16, ir.ReadWrite)
		b.Buffer("bf", ir.BF16, ir.ReadWrite)
		b.Buffer("back", ir.F32, ir.Write)
		b.Shared("sb", ir.BF16, 64)
		i := b.Let("i", ir.GlobalID(0))
		v := b.Let("v", ir.Load("x", i))
		b.Store("h", i, ir.Cast(ir.F16, v))
		b.Store("sb", ir.LocalID(0), ir.Cast(ir.BF16, v))
		bv := b.Var("bv", ir.BF16, ir.Load("sb", ir.LocalID(0)))
		b.If(ir.Gt(v, ir.LitF32(0)), func(k *ir.Block) { k.Assign("bv", ir.LitBF16(-2)) })
		b.Store("bf", i, ir.Select(ir.Lt(i, ir.LitU32(5)), bv, ir.Load("bf", ir.Add(i, ir.LitU32(1)))))
		b.Store("back", i, ir.Add(ir.Cast(ir.F32, ir.Load("h", i)), ir.Cast(ir.F32, ir.Load("bf", i))))
	})
	lit := ir.LitU32
	for _, t := range []ir.Type{ir.F16, ir.BF16, ir.F32} {
		for _, tf32 := range []bool{false, true} {
			if tf32 && t != ir.F32 {
				continue
			}
			name := "v12.matrix_mma_" + t.String()
			if tf32 {
				name += "_tf32"
			}
			add(name, func(b *ir.Builder) {
				b.Buffer("A", t, ir.Read)
				b.Buffer("B", t, ir.Read)
				b.Buffer("C", ir.F32, ir.ReadWrite)
				a, m, acc := b.Matrix("a", t, 32, 16), b.Matrix("b", t, 16, 48), b.Matrix("acc", ir.F32, 32, 48)
				b.MatrixLoad(a, "A", lit(0), lit(16), ir.RowMajor)
				b.MatrixLoad(m, "B", ir.Mul(ir.WorkgroupID(0), lit(7)), lit(48), ir.ColMajor)
				b.MatrixLoad(acc, "C", lit(0), lit(48), ir.RowMajor)
				if tf32 {
					b.MatrixMMATF32(acc, a, m)
				} else {
					b.MatrixMMA(acc, a, m)
				}
				b.MatrixMMA(acc, a, m)
				b.MatrixStore(acc, "C", lit(0), lit(48), ir.RowMajor)
			})
		}
	}
	add("v12.matrix_bounds_and_shared", func(b *ir.Builder) {
		b.Buffer("S", ir.F16, ir.Read)
		b.Buffer("D", ir.F16, ir.Write)
		b.Buffer("O", ir.BF16, ir.Write)
		b.Shared("sh", ir.F16, 600)
		b.Shared("sb", ir.BF16, 300)
		b.Uniform("rows", ir.U32)
		h, f, g := b.Matrix("h", ir.F16, 16, 32), b.Matrix("f", ir.F32, 16, 32), b.Matrix("g", ir.BF16, 16, 32)
		b.MatrixFill(h, ir.LitF16(0.25))
		b.MatrixLoadBounded(h, "S", lit(3), lit(35), ir.RowMajor, ir.Uniform("rows"), lit(17))
		b.MatrixStoreBounded(h, "sh", lit(1), lit(17), ir.ColMajor, lit(13), ir.Uniform("rows"))
		b.MatrixLoad(h, "sh", lit(0), lit(5), ir.ColMajor)
		b.MatrixStore(h, "D", lit(0xFFFFFFF0), lit(32), ir.RowMajor)
		b.MatrixConvert(f, h)
		b.MatrixConvert(g, f)
		b.MatrixConvert(h, g)
		b.MatrixFill(g, ir.LitBF16(3))
		b.MatrixStore(g, "sb", lit(0), lit(32), ir.RowMajor)
		b.Barrier()
		b.Store("O", ir.LocalID(0), ir.Load("sb", ir.LocalID(0)))
	})
	return out
}

// TestV12OnTheInterpreter runs the IR v1.2 checks on emitted SPIR-V,
// interpreted, with spirv-val on every module: specialized and folded, and
// with bf16 shared arrays in 16-bit integers (Int16) and in u32 words.
func TestV12OnTheInterpreter(t *testing.T) {
	val, err := exec.LookPath("spirv-val")
	if err != nil {
		val = spirvVal(t)
	}
	for _, fold := range []bool{false, true} {
		b := &simBackend{t: t, val: val, fold: fold, wide16: fold}
		for _, c := range gputest.V12Checks() {
			t.Run(c.Name, func(t *testing.T) {
				b.t = t
				c.Check(t, b)
			})
		}
	}
}

// TestV12DeviceFeatures pins what a module declares for 16-bit types and that
// a target without them is an error naming the feature.
func TestV12DeviceFeatures(t *testing.T) {
	progs := map[string]*ir.Program{}
	for _, np := range v12Programs(t) {
		progs[np.name] = np.prog
	}
	f16, casts, shared := progs["v12.f16_ops"], progs["v12.casts"], progs["v12.matrix_mma_bf16"]
	for _, c := range []struct {
		p        *ir.Program
		t        Target
		want     string // the error, "" for none
		declares []string
	}{
		{f16, fullTarget, "", []string{"OpCapability Float16", "OpCapability StorageBuffer16BitAccess", "SPV_KHR_16bit_storage", "SignedZeroInfNanPreserve 16"}},
		{f16, Target{Storage16: true}, "shaderFloat16", nil},
		{f16, Target{Float16: true}, "storageBuffer16BitAccess", nil},
		{casts, Target{Float16: true}, "storageBuffer16BitAccess", nil},
		// bf16 alone needs no f16 arithmetic; its tiles are 16-bit integers
		// with Int16, u32 words without.
		{shared, Target{Storage16: true}, "", []string{"OpCapability StorageBuffer16BitAccess", "OpTypeArray %uint %uint_512"}},
		{shared, Target{Storage16: true, Int16: true}, "", []string{"OpCapability Int16", "OpTypeArray %ushort %uint_512"}},
	} {
		m, err := EmitFor(c.p, c.t)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s for %+v: %v", c.p.Name, c.t, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Fix:")):
			t.Errorf("%s for %+v: error %v, want one naming %s with a Fix", c.p.Name, c.t, err, c.want)
		}
		if err != nil {
			continue
		}
		text := disassemble(t, m)
		for _, d := range c.declares {
			if !strings.Contains(text, d) {
				t.Errorf("%s: the module does not declare %q", c.p.Name, d)
			}
		}
		if c.t.Float16 != strings.Contains(text, "Float16") && c.p == shared {
			t.Errorf("%s: Float16 declared without f16", c.p.Name)
		}
	}
	if m, err := EmitFor(progs["v12.matrix_mma_f32"], fullTarget); err != nil || !strings.Contains(disassemble(t, m), `"kiln_matrix_acc"`) {
		t.Errorf("the scalar matrix path's arrays are not named kiln_matrix_<name> (err %v)", err)
	}
	limited := fullTarget
	// The mma's a and b are Workgroup arrays (32×16 + 16×48 f32: 5120 bytes);
	// its accumulator is private.
	limited.MaxSharedBytes = 5120 - 4
	if _, err := EmitFor(progs["v12.matrix_mma_f32"], limited); err == nil || !strings.Contains(err.Error(), "maxComputeSharedMemorySize") {
		t.Errorf("matrices beyond the workgroup memory: %v, want an error naming maxComputeSharedMemorySize", err)
	}
}

// disassemble returns spirv-dis's text of m, skipping the test without it.
func disassemble(t *testing.T, m *Module) string {
	t.Helper()
	dis, err := exec.LookPath("spirv-dis")
	if err != nil {
		spirvVal(t)
		t.Skip("spirv-dis is not on PATH")
	}
	cmd := exec.Command(dis, "-")
	cmd.Stdin = strings.NewReader(string(m.Bytes()))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("spirv-dis: %v", err)
	}
	return string(out)
}

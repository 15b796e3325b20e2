package ptx

import (
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi/conformance/kit"
	"github.com/kiln-dev/kiln/plugins/cuda/internal/edgetest"
)

// TestEveryModuleAssembles runs ptxas on every corpus kernel and edge-table
// program, emitted for sm_90 (an H200 on a CUDA 12+ driver: tensor-core
// modules take wgmma, .target sm_90a), sm_80 and sm_70 (each plain and with
// non-coherent reads), and assembled for sm_90a, the H200's sm_90 and
// for the oldest architecture each target runs on that CUDA 13's ptxas still
// knows (sm_80; sm_75, since CUDA 13 dropped sm_70).
func TestEveryModuleAssembles(t *testing.T) {
	ptxas := tool(t, "ptxas")
	for _, np := range allPrograms() {
		t.Run(np.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range []struct {
				target Target
				arch   string
			}{{Target{SM: 90}, ""}, {Target{SM: 80}, ptxasArch}, {Target{SM: 80}, "sm_80"}, {Target{SM: 70}, ptxasArch}, {Target{SM: 70}, "sm_75"}} {
				opts := np.opts
				opts.Target = c.target
				for _, nc := range []bool{false, true} {
					// The backend's primary module reads through the non-coherent path.
					opts.NonCoherentReads = nc
					name := np.name
					if nc {
						name += ".nc"
					}
					m := mustEmit(t, np.name, np.prog, opts)
					arch := c.arch
					if arch == "" {
						// sm_90: sm_90a for a wgmma module, the H200's sm_90 for the others
						arch = ptxasArch
						if strings.Contains(m.Text, ".target sm_90a\n") {
							arch = "sm_90a"
						}
					}
					assemble(t, ptxas, name, m, arch)
				}
			}
		})
	}
}

// fArith matches an f32 add, sub or mul instruction; every one must carry .rn.
var fArith = regexp.MustCompile(`(?m)^\t(?:@!?%p\d+ )?(add|sub|mul)(\.[a-z]+)*\.f32 `)

// TestNoContraction checks that every f32 add, sub and mul has an explicit
// rounding mode (which PTX never fuses) and, when ptxas and cuobjdump are at hand,
// that the machine code of programs without fma has no FFMA: matmul's
// acc + a*b and saxpy's a*x + y stay two rounded operations.
func TestNoContraction(t *testing.T) {
	for _, np := range allPrograms() {
		m := mustEmit(t, np.name, np.prog, np.opts)
		for _, match := range fArith.FindAllStringSubmatch(m.Text, -1) {
			if !strings.Contains(match[0], ".rn.") {
				t.Errorf("%s: %q has no .rn rounding mode, so ptxas may fuse it", np.name, strings.TrimSpace(match[0]))
			}
		}
	}
	ptxas, cuobjdump := tool(t, "ptxas"), tool(t, "cuobjdump")
	for _, name := range []string{"saxpy", "dot", "matmul", "reduce_sum"} {
		k, _ := kernels.Lookup(name)
		m := mustEmit(t, name, k.Program(), Options{Target: Target{SM: 80}})
		cubin := assemble(t, ptxas, name, m, ptxasArch)
		sass, err := exec.Command(cuobjdump, "-sass", cubin).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: cuobjdump: %v\n%s", name, err, sass)
		}
		if !strings.Contains(string(sass), "FMUL") && !strings.Contains(string(sass), "FADD") {
			t.Errorf("%s: the machine code has neither FMUL nor FADD; the check sees nothing", name)
		}
		if strings.Contains(string(sass), "FFMA") {
			t.Errorf("%s: the machine code fuses a multiply and an add (FFMA):\n%s", name, sass)
		}
	}
}

func TestEmitIsDeterministic(t *testing.T) {
	for _, np := range allPrograms() {
		a := mustEmit(t, np.name, np.prog, np.opts)
		b := mustEmit(t, np.name, np.prog, np.opts)
		if a.Text != b.Text {
			t.Errorf("%s: two emits differ", np.name)
		}
	}
}

func TestEmitRejectsBadInput(t *testing.T) {
	if _, err := Emit(nil, Options{}); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Errorf("Emit(nil) = %v, want an error with a Fix", err)
	}
	b := ir.NewBuilder("bad", 64, 1, 1)
	b.Store("nowhere", ir.LitU32(0), ir.LitU32(1))
	var verr *ir.ValidationError
	if _, err := Emit(b.Program(), Options{}); !errors.As(err, &verr) {
		t.Errorf("Emit of an invalid program: %v, want a wrapped *ir.ValidationError", err)
	}
	k, _ := kernels.Lookup("saxpy")
	var wrongType, unknown ir.SpecMap
	wrongType.Set("a", ir.SpecU32(2))
	unknown.Set("nope", ir.SpecF32(2))
	for name, opts := range map[string]Options{
		"spec of the wrong type":       {Spec: wrongType},
		"spec of an unknown parameter": {Spec: unknown},
		"workgroup axis of 0":          {WorkgroupSize: [3]uint32{0, 1, 1}},
		"workgroup of 2048":            {WorkgroupSize: [3]uint32{2048, 1, 1}},
	} {
		if _, err := Emit(k.Program(), opts); err == nil || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s: Emit = %v, want an error with a Fix", name, err)
		}
	}
}

// TestModuleInterface checks what the backend relies on: the kernel's name, the
// parameters (a pointer per binding, then a count per binding), .reqntid equal to
// the workgroup size (the override when there is one), the target, and the shared
// memory size.
func TestModuleInterface(t *testing.T) {
	for _, np := range allPrograms() {
		for _, target := range []Target{{SM: 70}, {SM: 80}} {
			opts := np.opts
			opts.Target = target
			m := mustEmit(t, np.name, np.prog, opts)
			p := np.prog
			wg := p.WorkgroupSize
			if opts.WorkgroupSize != ([3]uint32{}) {
				wg = opts.WorkgroupSize
			}
			if m.Entry != EntryPoint || m.Target != target || m.WorkgroupSize != wg {
				t.Errorf("%s: module %s %v %v", np.name, m.Entry, m.Target, m.WorkgroupSize)
			}
			n, u := len(p.Buffers), len(p.Uniforms)
			if len(m.Params) != 2*n+u {
				t.Fatalf("%s: %d params for %d buffers and %d uniforms", np.name, len(m.Params), n, u)
			}
			for i, prm := range m.Params {
				want := Param{Kind: BufferPointer, Binding: uint32(i), Name: bufParam(uint32(i))}
				switch {
				case i >= 2*n:
					want = Param{Kind: UniformValue, Binding: uint32(i - 2*n), Name: uniformParam(uint32(i - 2*n))}
				case i >= n:
					want = Param{Kind: ElementCount, Binding: uint32(i - n), Name: lenParam(uint32(i - n))}
				}
				if prm != want {
					t.Errorf("%s: param %d = %+v, want %+v", np.name, i, prm, want)
				}
			}
			var shared uint32
			for _, s := range p.Shared {
				shared += arrayBytes(s.Type, s.Count)
			}
			// Matrices add the scalar path's staging buffer to the arrays, or
			// the tensor-core path's ring.
			if m.SharedBytes != shared && (len(p.Matrices) == 0 || m.SharedBytes < shared || m.SharedBytes > 48<<10) {
				t.Errorf("%s: SharedBytes %d, want %d", np.name, m.SharedBytes, shared)
			}
			if isTensorCoreModule(m) {
				// the tensor-core matmul: its own instructions, run by tcEmu
				// (tc_test.go pins its text's interface)
				if _, err := newTCEmu(m.Text); err != nil {
					t.Errorf("%s: %v", np.name, err)
				}
				continue
			}
			mod, err := parseModule(m.Text)
			if err != nil {
				t.Fatalf("%s: %v", np.name, err)
			}
			if mod.reqntid != wg || mod.target != target.String() || mod.sharedSize != m.SharedBytes || len(mod.paramKinds) != 2*n+u {
				t.Errorf("%s: text declares reqntid %v target %s shared %d, %d params", np.name, mod.reqntid, mod.target, mod.sharedSize, len(mod.paramKinds))
			}
			for i, prm := range m.Params {
				kind := map[ParamKind]string{BufferPointer: ".u64", ElementCount: ".u32", UniformValue: ".b32"}[prm.Kind]
				if mod.params[prm.Name] != i || mod.paramKinds[i] != kind || prm.Bytes() != map[string]int{".u64": 8, ".u32": 4, ".b32": 4}[kind] {
					t.Errorf("%s: param %s is not %s at position %d", np.name, prm.Name, kind, i)
				}
			}
		}
	}
}

func TestSubgroupSizeFor(t *testing.T) {
	prog := func(wg [3]uint32, size uint32) *ir.Program {
		b := ir.NewBuilder("sg", wg[0], wg[1], wg[2])
		b.RequireSubgroupSize(size)
		out := b.Buffer("out", ir.U32, ir.Write)
		b.Store(out, ir.GlobalID(0), ir.SubgroupAdd(ir.LitU32(1)))
		return b.Program()
	}
	for _, c := range []struct {
		wg         [3]uint32
		size, want uint32
	}{{[3]uint32{64, 1, 1}, 0, 32}, {[3]uint32{48, 1, 1}, 0, 16}, {[3]uint32{8, 3, 1}, 0, 8}, {[3]uint32{7, 1, 1}, 0, 1},
		{[3]uint32{1024, 1, 1}, 0, 32}, {[3]uint32{64, 1, 1}, 8, 8}, {[3]uint32{32, 2, 1}, 32, 32}} {
		got, err := SubgroupSizeFor(prog(c.wg, c.size), c.wg)
		if err != nil || got != c.want {
			t.Errorf("workgroup %v, required %d: %d, %v; want %d", c.wg, c.size, got, err, c.want)
		}
		m, err := Emit(prog(c.wg, c.size), Options{})
		if err != nil || m.SubgroupSize != c.want {
			t.Errorf("workgroup %v, required %d: module runs %v lanes (%v)", c.wg, c.size, m, err)
		}
	}
	for _, size := range []uint32{64, 128} {
		p := prog([3]uint32{256, 1, 1}, size)
		if _, err := Emit(p, Options{}); err == nil || !strings.Contains(err.Error(), "at most 32") || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("a program requiring %d lanes: %v, want a rejection with a Fix", size, err)
		}
	}
	if _, err := Emit(prog([3]uint32{64, 1, 1}, 16), Options{WorkgroupSize: [3]uint32{8, 1, 1}}); err == nil {
		t.Error("a workgroup override of 8 invocations for a program requiring 16 lanes was accepted")
	}
	k, _ := kernels.Lookup("saxpy")
	if m := mustEmit(t, "saxpy", k.Program(), Options{}); m.SubgroupSize != 0 || strings.Contains(m.Text, "%laneid") {
		t.Errorf("a program without subgroups runs %d lanes", m.SubgroupSize)
	}
}

func TestTargetFor(t *testing.T) {
	for _, c := range []struct {
		major, minor, sm int
	}{{7, 0, 70}, {7, 5, 70}, {8, 0, 80}, {8, 9, 80}, {9, 0, 80}, {10, 0, 80}, {12, 0, 80}} {
		got, err := TargetFor(c.major, c.minor)
		if err != nil || got.SM != c.sm {
			t.Errorf("TargetFor(%d, %d) = %v, %v; want sm_%d", c.major, c.minor, got, err, c.sm)
		}
	}
	for _, c := range [][2]int{{6, 1}, {5, 0}, {3, 5}} {
		if _, err := TargetFor(c[0], c[1]); err == nil || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("TargetFor(%d, %d) = %v, want an error with a Fix", c[0], c[1], err)
		}
	}
	for _, c := range []struct {
		major, minor, driver, sm int
	}{{9, 0, 12000, 90}, {9, 0, 13000, 90}, {9, 0, 11080, 80}, {8, 0, 13000, 80}, {8, 9, 12000, 80}, {10, 0, 13000, 80}, {12, 0, 13000, 80}, {7, 5, 13000, 70}} {
		got, err := TargetForDriver(c.major, c.minor, c.driver)
		if err != nil || got.SM != c.sm {
			t.Errorf("TargetForDriver(%d, %d, %d) = %v, %v; want sm_%d", c.major, c.minor, c.driver, got, err, c.sm)
		}
	}
	if _, err := TargetForDriver(6, 1, 13000); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Errorf("TargetForDriver(6, 1) = %v, want an error with a Fix", err)
	}
	if s := (Target{SM: 80}).String(); s != "sm_80" {
		t.Errorf("String = %q", s)
	}
}

// TestSpecializationIsFolded checks that parameter values and the workgroup size
// are constants of the module: another value gives other text.
func TestSpecializationIsFolded(t *testing.T) {
	k, _ := kernels.Lookup("saxpy")
	p := k.Program()
	base := mustEmit(t, "saxpy", p, Options{})
	var spec ir.SpecMap
	spec.Set("a", ir.SpecF32(-0.5))
	other := mustEmit(t, "saxpy", p, Options{Spec: spec})
	if base.Text == other.Text || !strings.Contains(other.Text, "0xBF000000") {
		t.Errorf("specializing a = -0.5 does not put 0xBF000000 into the module")
	}
	wg := mustEmit(t, "saxpy", p, Options{WorkgroupSize: [3]uint32{32, 2, 1}})
	if !strings.Contains(wg.Text, ".reqntid 32, 2, 1") || !strings.Contains(wg.Text, ", 32, %r") {
		t.Errorf("the workgroup override is not folded:\n%s", wg.Text)
	}
}

// TestTwoBlocksPerSMUpTo256Threads: a workgroup of up to 256 threads asks for
// two resident blocks per SM (.minnctapersm 2, after .reqntid, which it
// requires); a larger one asks for nothing, so that its registers stay
// uncapped.
func TestTwoBlocksPerSMUpTo256Threads(t *testing.T) {
	k, _ := kernels.Lookup("saxpy")
	p := k.Program()
	for _, c := range []struct {
		wg   [3]uint32
		want bool
	}{{[3]uint32{256, 1, 1}, true}, {[3]uint32{16, 16, 1}, true}, {[3]uint32{64, 1, 1}, true}, {[3]uint32{512, 1, 1}, false}, {[3]uint32{32, 32, 1}, false}} {
		m := mustEmit(t, "saxpy", p, Options{WorkgroupSize: c.wg})
		mod, err := parseModule(m.Text)
		if err != nil {
			t.Fatal(err)
		}
		at := strings.Index(m.Text, ".minnctapersm 2\n")
		if (mod.minBlocks == 2) != c.want || (c.want && at < strings.Index(m.Text, ".reqntid")) {
			t.Errorf("workgroup %v: .minnctapersm %d at %d (want 2 after .reqntid: %v)", c.wg, mod.minBlocks, at, c.want)
		}
	}
}

// TestEdgeTableCoversEveryOperation fails when an operator, cast, atomic or
// statement kind of the ir package appears in no program of the edge table nor
// of the conformance kit's semantics tables (which the PTX interpreter runs in
// TestConformanceOnTheInterpreter): then nothing pins its PTX.
func TestEdgeTableCoversEveryOperation(t *testing.T) {
	seen := map[string]bool{}
	note := func(n any) bool {
		switch x := n.(type) {
		case ir.UnaryExpr:
			seen["unary "+x.Op.String()] = true
		case ir.BinaryExpr:
			seen["binary "+x.Op.String()] = true
		case ir.CastExpr:
			seen["cast "+x.To.String()] = true
		case ir.FmaExpr:
			seen["fma"] = true
		case ir.SelectExpr:
			seen["select"] = true
		case ir.BuiltinRef:
			seen["builtin "+x.Kind.String()] = true
		case ir.BitcastExpr:
			seen["bitcast "+x.To.String()] = true
		case ir.UniformRef:
			seen["uniform"] = true
		case ir.SubgroupExpr:
			seen[x.Op.String()] = true
		case ir.IfStmt:
			seen["if"] = true
		case ir.ForStmt:
			seen["for "+x.Type.String()] = true
		case ir.WhileStmt:
			seen["while"] = true
		case ir.BreakStmt:
			seen["break"] = true
		case ir.ContinueStmt:
			seen["continue"] = true
		case ir.BarrierStmt:
			seen["barrier"] = true
		case ir.AtomicStmt:
			seen["atomic "+x.Op.String()] = true
		case ir.ReturnStmt:
			seen["return"] = true
		}
		return true
	}
	for _, c := range edgetest.Table() {
		ir.Inspect(c.Prog.Body, note)
	}
	for _, p := range kit.SemanticPrograms() {
		ir.Inspect(p.Program.Body, note)
	}
	var want []string
	for _, op := range ir.UnaryOps() {
		want = append(want, "unary "+op.String())
	}
	for _, op := range ir.BinaryOps() {
		want = append(want, "binary "+op.String())
	}
	for _, op := range ir.AtomicOps() {
		want = append(want, "atomic "+op.String())
	}
	for _, ty := range ir.Types() {
		want = append(want, "cast "+ty.String())
	}
	for _, k := range ir.Builtins() {
		want = append(want, "builtin "+k.String())
	}
	for _, op := range ir.SubgroupOps() {
		want = append(want, op.String())
	}
	want = append(want, "fma", "select", "if", "for i32", "for u32", "while", "break", "continue", "barrier", "return",
		"bitcast i32", "bitcast u32", "bitcast f32", "uniform")
	for _, w := range want {
		if !seen[w] {
			t.Errorf("%s: no program of the edge table or of the conformance kit's semantics tables uses it", w)
		}
	}
}

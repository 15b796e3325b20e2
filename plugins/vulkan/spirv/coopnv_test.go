package spirv

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// nvTarget is coopTarget with the H200's VK_NV_cooperative_matrix2 list
// (driver 580): f16 and bf16 with f32 accumulators at workgroup scope,
// 16×16×16 at 32 and 64 invocations, 32×16×16 at 128, 32×32×16 at 256;
// dimensions up to 1024, 8 KiB reserved, 48 KiB of workgroup memory.
func nvTarget(loads NVLoads) Target {
	t := coopTarget
	t.MaxSharedBytes = 48 << 10
	var shapes []CoopFlexShape
	for _, typ := range []ir.Type{ir.F16, ir.BF16} {
		for _, g := range []struct{ m, n, inv uint32 }{{16, 16, 32}, {16, 16, 64}, {32, 16, 128}, {32, 32, 256}} {
			shapes = append(shapes, CoopFlexShape{CoopShape: CoopShape{M: g.m, N: g.n, K: 16, A: typ, B: typ, C: ir.F32, Result: ir.F32}, Workgroup: true, Invocations: g.inv})
		}
	}
	t.Coop.NV = SelectCoopNV(shapes, true, true, true, 1024, 8192, t.Coop)
	t.Coop.NV.Loads = loads
	return t
}

// TestSelectCoopNV: the NV path's combinations need all three features, a
// workgroup scope, f32 accumulators and an operand type the KHR target runs.
func TestSelectCoopNV(t *testing.T) {
	wg := CoopFlexShape{CoopShape: CoopShape{M: 32, N: 32, K: 16, A: ir.BF16, B: ir.BF16, C: ir.F32, Result: ir.F32}, Workgroup: true, Invocations: 256}
	sub := wg
	sub.Workgroup = false
	f16acc := wg
	f16acc.C, f16acc.Result = ir.F16, ir.F16
	khr := CoopTarget{F16: true, BF16: true, SubgroupSize: 32}
	noBF16 := khr
	noBF16.BF16 = false
	for _, tc := range []struct {
		name                string
		shapes              []CoopFlexShape
		scope, flex, tensor bool
		khr                 CoopTarget
		want                bool
	}{
		{"all", []CoopFlexShape{wg}, true, true, true, khr, true},
		{"no workgroup scope", []CoopFlexShape{wg}, false, true, true, khr, false},
		{"no flexible dimensions", []CoopFlexShape{wg}, true, false, true, khr, false},
		{"no tensor addressing", []CoopFlexShape{wg}, true, true, false, khr, false},
		{"subgroup scope", []CoopFlexShape{sub}, true, true, true, khr, false},
		{"f16 accumulators", []CoopFlexShape{f16acc}, true, true, true, khr, false},
		{"no bf16 on the KHR path", []CoopFlexShape{wg}, true, true, true, noBF16, false},
	} {
		n := SelectCoopNV(tc.shapes, tc.scope, tc.flex, tc.tensor, 1024, 8192, tc.khr)
		if n.Usable() != tc.want {
			t.Errorf("%s: usable %v, want %v (%+v)", tc.name, n.Usable(), tc.want, n)
		}
	}
}

// TestPlanNV pins which programs take the NV path and why the others keep
// the KHR path, in the module's path line.
func TestPlanNV(t *testing.T) {
	for _, tc := range []struct {
		typ             ir.Type
		tm, tn, tk, inv uint32
		nv              bool
		why             string
	}{
		{ir.BF16, 128, 256, 32, 256, true, ""},
		{ir.F16, 128, 128, 64, 256, true, ""},
		{ir.BF16, 64, 128, 32, 128, true, ""},
		{ir.F16, 64, 64, 32, 128, true, ""},
		{ir.BF16, 64, 48, 32, 256, false, "lists no workgroup-scope bf16 64x48x32 at 256 invocations"},
		{ir.F16, 64, 64, 32, 512, false, "at 512 invocations"},
		{ir.F16, 160, 128, 64, 256, false, "with the driver's reserve"},
	} {
		for _, loads := range []NVLoads{NVStaged, NVDirect, NVTensor} {
			m, err := EmitFor(gputest.TCProgram(tc.typ, false, tc.tm, tc.tn, tc.tk, tc.inv), nvTarget(loads))
			if err != nil {
				t.Fatalf("%v %dx%dx%d/%d: %v", tc.typ, tc.tm, tc.tn, tc.tk, tc.inv, err)
			}
			line := pathLine(t, m)
			nv := strings.Contains(line, "VK_NV_cooperative_matrix2 workgroup scope")
			if m.MatrixPath != MatrixPathCooperative || nv != tc.nv || (!tc.nv && !strings.Contains(line, tc.why)) {
				t.Errorf("%v %dx%dx%d/%d %s: path %q, want NV %v (%s)", tc.typ, tc.tm, tc.tn, tc.tk, tc.inv, loads, line, tc.nv, tc.why)
			}
		}
	}
}

// pathLine is the module's OpSourceExtension after the path prefix.
func pathLine(t *testing.T, m *Module) string {
	_, insts := decode(t, m.Words)
	for _, in := range insts {
		if in.op == opSourceExtension {
			if s := wordsString(in.args); strings.HasPrefix(s, matrixPathPrefix) {
				return strings.TrimPrefix(s, matrixPathPrefix)
			}
		}
	}
	t.Fatal("no matrix path line")
	return ""
}

// nvRun is coopRun on the NV path with loads: the module must say it took
// it.
func nvRun(t *testing.T, p *ir.Program, loads NVLoads, c kernels.Case) {
	t.Helper()
	target := nvTarget(loads)
	target.WorkgroupSize = c.WorkgroupSize
	m, err := EmitFor(p, target)
	if err != nil {
		t.Fatal(err)
	}
	if line := pathLine(t, m); !strings.Contains(line, "VK_NV_cooperative_matrix2 workgroup scope ("+loads.String()+" loads)") {
		t.Fatalf("not the NV path: %s", line)
	}
	coopRun(t, p, target, MatrixPathCooperative, c)
}

// TestNVMatmulOnTheInterpreter runs matmul_tc on the NV path (staged and
// direct loads), interpreted, bit for bit against the scalar path: whole
// workgroup matrices, ragged edges (operands through the scalar rule, the
// accumulator's store through the clipped tensor stores into the band),
// workgroups of 32 to 256 invocations.
func TestNVMatmulOnTheInterpreter(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		typ        ir.Type
		tm, tn, tk uint32
		inv        uint32
		m, n, k    int
		small      bool
	}{
		{ir.BF16, 64, 64, 32, 128, 64, 64, 64, true},
		{ir.F16, 64, 64, 32, 128, 100, 72, 40, false},
		{ir.F16, 32, 32, 16, 64, 33, 17, 24, false},
		{ir.BF16, 32, 32, 32, 32, 32, 32, 64, false},
		{ir.BF16, 64, 64, 32, 256, 70, 64, 32, false},
	} {
		for _, loads := range []NVLoads{NVStaged, NVDirect, NVTensor} {
			name := fmt.Sprintf("%s/%s/tile%dx%dx%d/wg%d/%dx%dx%d", loads, tc.typ, tc.tm, tc.tn, tc.tk, tc.inv, tc.m, tc.n, tc.k)
			t.Run(name, func(t *testing.T) {
				c := kernels.Case{
					WorkgroupSize: [3]uint32{tc.inv, 1, 1},
					Grid:          [3]uint32{(uint32(tc.n) + tc.tn - 1) / tc.tn, (uint32(tc.m) + tc.tm - 1) / tc.tm, 1},
					Inputs:        [][]byte{halfInputs(rng, tc.typ, tc.m*tc.k, tc.small), halfInputs(rng, tc.typ, tc.k*tc.n, tc.small), nil},
					OutputCounts:  []uint32{0, 0, uint32(tc.m * tc.n)},
					Uniforms:      kernels.U32Bytes([]uint32{uint32(tc.m), uint32(tc.n), uint32(tc.k)}),
				}
				nvRun(t, gputest.TCProgram(tc.typ, false, tc.tm, tc.tn, tc.tk, tc.inv), loads, c)
			})
		}
	}
}

// TestNVVarietyOnTheInterpreter runs coopVariety on the NV path against the
// scalar path: a workgroup accumulator loaded column-major and bounded,
// spilled and reloaded around converts and a scalar f32 mma, stored directly
// and through the band (bounded, misaligned, short buffers, overlapping and
// wrapping stores).
func TestNVVarietyOnTheInterpreter(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	f32s := func(n int) []byte {
		out := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(rng.IntN(9)-4)/4))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		yCount int
		oCount uint32
		u      [8]uint32
	}{
		{"direct", 4096, 4096, [8]uint32{64, 40, 32, 32, 0, 32, 32, 32}},
		{"misaligned", 4096, 4096, [8]uint32{3, 37, 32, 32, 5, 33, 32, 32}},
		{"bounded", 4096, 4096, [8]uint32{0, 32, 17, 30, 0, 32, 20, 9}},
		{"short buffers", 700, 1500, [8]uint32{4, 32, 32, 32, 8, 40, 32, 32}},
		{"overlapping store", 4096, 4096, [8]uint32{0, 32, 32, 32, 16, 8, 32, 32}},
		{"wrapping store", 4096, 4096, [8]uint32{0, 32, 32, 32, 100, 0x80000000, 32, 32}},
	} {
		for _, inv := range []uint32{64, 128} {
			t.Run(fmt.Sprintf("%s/wg%d", tc.name, inv), func(t *testing.T) {
				c := kernels.Case{
					WorkgroupSize: [3]uint32{inv, 1, 1},
					Grid:          [3]uint32{1, 1, 1},
					Inputs:        [][]byte{halfInputs(rng, ir.F16, 8+31*24+16, true), f32s(tc.yCount), nil, nil},
					OutputCounts:  []uint32{0, 0, tc.oCount, 32 * 32},
					Uniforms:      kernels.U32Bytes(tc.u[:]),
				}
				nvRun(t, coopVariety(inv), NVStaged, c)
			})
		}
	}
}

// TestNVModuleStructure checks the NV path's module where no validator
// knows it: the extensions and capabilities, the accumulator and operands as
// Workgroup-scope matrices of their whole size (128×256 f32, 128×32 and
// 32×256 of the operand type), one MulAdd a fused statement, the edge
// store's OpCooperativeMatrixStoreTensorNV through a clipped view of a
// layout with a clamp mode that discards (never Undefined), with
// NonPrivatePointer, and nv-tensor's layout loads.
func TestNVModuleStructure(t *testing.T) {
	for _, loads := range []NVLoads{NVStaged, NVDirect, NVTensor} {
		for _, typ := range []ir.Type{ir.BF16, ir.F16} {
			m, err := EmitFor(gputest.TCProgram(typ, false, 128, 256, 32, 256), nvTarget(loads))
			if err != nil {
				t.Fatal(err)
			}
			_, insts := decode(t, m.Words)
			byID := resultIDs(insts)
			constant := func(id uint32) uint32 { return byID[id].args[2] }
			caps, exts, n := map[uint32]bool{}, map[string]bool{}, map[uint32]int{}
			wgTypes := map[[3]uint32]bool{} // rows, cols, use of Workgroup-scope types
			var clamps []uint32
			for _, in := range insts {
				n[in.op]++
				switch in.op {
				case opCapability:
					caps[in.args[0]] = true
				case opExtension:
					exts[wordsString(in.args)] = true
				case opTypeCooperativeMatrixKHR:
					if constant(in.args[2]) == scopeWorkgroup {
						wgTypes[[3]uint32{constant(in.args[3]), constant(in.args[4]), constant(in.args[5])}] = true
					}
				case opTypeTensorLayoutNV:
					clamps = append(clamps, constant(in.args[2]))
				case opCooperativeMatrixStoreTensorNV:
					if len(in.args) != 6 || in.args[3] != memoryAccessNonPrivatePointer || in.args[4] != tensorAddressingView {
						t.Errorf("%s %v: tensor store operands %v", loads, typ, in.args)
					}
				case opCooperativeMatrixLoadTensorNV:
					if len(in.args) != 7 || in.args[5] != memoryAccessNonPrivatePointer || in.args[6] != 0 {
						t.Errorf("%s %v: tensor load operands %v", loads, typ, in.args)
					}
				}
			}
			for _, c := range []uint32{capabilityCooperativeMatrixKHR, capabilityTensorAddressingNV, capabilityCooperativeMatrixTensorAddressing} {
				if !caps[c] {
					t.Errorf("%s %v: no capability %d", loads, typ, c)
				}
			}
			for _, x := range []string{extCooperativeMatrix, extCooperativeMatrix2, extTensorAddressing} {
				if !exts[x] {
					t.Errorf("%s %v: no extension %s", loads, typ, x)
				}
			}
			for _, k := range [][3]uint32{{128, 256, coopUseAcc}, {128, 32, coopUseA}, {32, 256, coopUseB}} {
				if !wgTypes[k] {
					t.Errorf("%s %v: no Workgroup-scope %dx%d matrix of use %d (have %v)", loads, typ, k[0], k[1], k[2], wgTypes)
				}
			}
			for _, c := range clamps {
				if c == 0 {
					t.Errorf("%s %v: a tensor layout with clamp mode Undefined", loads, typ)
				}
			}
			tensorLoads := 0
			if loads == NVTensor {
				tensorLoads = 2
			}
			// one MulAdd (the fused statement), 128/8 band stores
			if n[opCooperativeMatrixMulAddKHR] != 1 || n[opCooperativeMatrixStoreTensorNV] != 128/nvBandRows || n[opCooperativeMatrixLoadTensorNV] != tensorLoads {
				t.Errorf("%s %v: %d MulAdds, %d tensor stores, %d tensor loads", loads, typ,
					n[opCooperativeMatrixMulAddKHR], n[opCooperativeMatrixStoreTensorNV], n[opCooperativeMatrixLoadTensorNV])
			}
		}
	}
}

package pluginapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

func TestCheckCompile(t *testing.T) {
	p := checksProgram()
	spec := func(name string, v ir.SpecValue) ir.SpecMap {
		var m ir.SpecMap
		m.Set(name, v)
		return m
	}
	for _, tc := range []struct {
		name string
		req  *CompileRequest
		want string
	}{
		{"nil request", nil, "compile request without a program. Fix: set CompileRequest.Program"},
		{"no program", &CompileRequest{}, "compile request without a program. Fix: set CompileRequest.Program"},
		{"invalid program", &CompileRequest{Program: &ir.Program{Name: "empty"}}, `program "empty" is invalid: `},
		{"unknown parameter", &CompileRequest{Program: p, Spec: spec("nope", ir.SpecU32(1))},
			`specialization map sets "nope", which program "p" does not declare. Fix: set only the program's parameters`},
		{"parameter of another type", &CompileRequest{Program: p, Spec: spec("k", ir.SpecF32(1))},
			`specialization value "k" is f32 1 but the parameter is u32. Fix: pass a u32 value`},
		{"override zero on one axis", &CompileRequest{Program: p, WorkgroupSize: [3]uint32{64, 0, 1}},
			"workgroup size override [64 0 1] is zero on some axes only. Fix: give all three axes, or all zero to keep the program's size"},
		{"override too large", &CompileRequest{Program: p, WorkgroupSize: [3]uint32{1024, 1024, 1}},
			`program "p": bad workgroup size override: `},
	} {
		err := CheckCompile(tc.req)
		if !isRejected(err) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a RejectedError starting %q", tc.name, err, tc.want)
		}
	}
	if err := CheckCompile(&CompileRequest{Program: p, Spec: spec("k", ir.SpecU32(3)), WorkgroupSize: [3]uint32{32, 2, 1}}); err != nil {
		t.Errorf("a good request: %v", err)
	}
}

func TestCheckLaunch(t *testing.T) {
	p := checksProgram()
	wg := [3]uint32{64, 1, 1}
	four, uniforms := []byte{1, 2, 3, 4}, []byte{0, 0, 0, 0}
	good := DispatchRequest{Grid: [3]uint32{1 << 26, 1, 1}, Inputs: [][]byte{four, nil, four}, OutputCounts: []uint32{0, 3}, Uniforms: uniforms}
	if err := CheckLaunch(p, wg, &good); err != nil {
		t.Fatalf("a good launch with exactly 2^32 invocations on axis 0: %v", err)
	}
	for _, tc := range []struct {
		name string
		req  *DispatchRequest
		want string
	}{
		{"nil request", nil, "dispatch without a request. Fix: pass a DispatchRequest"},
		{"too many inputs", &DispatchRequest{Inputs: [][]byte{nil, nil, nil, nil}, Uniforms: uniforms},
			`program "p" has 3 buffers but the dispatch gives 4 inputs. Fix: pass one input per binding (nil for write buffers)`},
		{"input for a write buffer", &DispatchRequest{Inputs: [][]byte{nil, four, four}, Uniforms: uniforms},
			`program "p": buffer "out" (binding 1) is write-only but got 4 input bytes. Fix: pass nil for write buffers and size them with OutputCounts`},
		{"partial element", &DispatchRequest{Inputs: [][]byte{{1, 2, 3}, nil, four}, Uniforms: uniforms},
			`program "p": input of buffer "in" (binding 0) is 3 bytes, not a multiple of 4. Fix: pass whole 4-byte u32 elements`},
		{"partial f16 element", &DispatchRequest{Inputs: [][]byte{nil, nil, {1, 2, 3}}, Uniforms: uniforms},
			`program "p": input of buffer "h" (binding 2) is 3 bytes, not a multiple of 2. Fix: pass whole 2-byte f16 elements`},
		{"fixed count", &DispatchRequest{Inputs: [][]byte{nil, nil, {1, 2}}, Uniforms: uniforms},
			`program "p": buffer "h" (binding 2) holds exactly 2 elements but its input is 2 bytes. Fix: pass 4 bytes`},
		{"no uniforms", &DispatchRequest{Inputs: [][]byte{nil, nil, four}},
			"ir: p takes 4 bytes of uniforms (1 uniforms of 4 bytes), got 0."},
		{"grid", &DispatchRequest{Grid: [3]uint32{1, 1<<26 + 1, 1}, Inputs: [][]byte{nil, nil, four}, Uniforms: uniforms},
			`program "p": grid [1 67108865 1] with workgroup size [1 64 1] gives more than 2^32 invocations on axis 1, beyond a u32 global_id. Fix: use a smaller grid`},
	} {
		w := wg
		if tc.name == "grid" {
			w = [3]uint32{1, 64, 1}
		}
		err := CheckLaunch(p, w, tc.req)
		if !isRejected(err) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a RejectedError starting %q", tc.name, err, tc.want)
		}
	}
}

// TestCheckedChecksBeforeTheBackend pins the layer Serve and the conformance kit
// put in front of a backend: rejected requests never reach it, launches are
// checked against the program and workgroup size the pipeline was compiled
// with, and a handle it does not know goes to the backend.
func TestCheckedChecksBeforeTheBackend(t *testing.T) {
	ctx := context.Background()
	f := &fakeBackend{}
	b := Checked(f)
	if Checked(b) != b {
		t.Error("Checked of a Checked backend wraps it again")
	}
	if _, err := b.Compile(ctx, &CompileRequest{Program: &ir.Program{Name: "empty"}}); !isRejected(err) || f.compileCalls() != 0 {
		t.Fatalf("an invalid program: %v, %d compiles reached the backend", err, f.compileCalls())
	}
	p := checksProgram()
	res, err := b.Compile(ctx, &CompileRequest{Program: p, WorkgroupSize: [3]uint32{1, 64, 1}})
	if err != nil {
		t.Fatal(err)
	}
	four := []byte{1, 2, 3, 4}
	bad := &DispatchRequest{Pipeline: res.Pipeline, Grid: [3]uint32{1, 1<<26 + 1, 1}, Inputs: [][]byte{nil, nil, four}, Uniforms: four}
	if _, err := b.Dispatch(ctx, bad); !isRejected(err) || !strings.Contains(err.Error(), "2^32") {
		t.Errorf("a grid too large for the override's workgroup: %v", err)
	}
	if _, err := b.Dispatch(ctx, nil); !isRejected(err) {
		t.Errorf("a nil request: %v", err)
	}
	if len(f.dispatches) != 0 {
		t.Fatalf("%d rejected dispatches reached the backend", len(f.dispatches))
	}
	ok := &DispatchRequest{Pipeline: res.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{nil, nil, four}, Uniforms: four}
	if _, err := b.Dispatch(ctx, ok); err != nil || len(f.dispatches) != 1 {
		t.Fatalf("a good dispatch: %v, %d reached the backend", err, len(f.dispatches))
	}
	unknown := &DispatchRequest{Pipeline: res.Pipeline + 100, Inputs: [][]byte{{1}}}
	if _, err := b.Dispatch(ctx, unknown); err != nil || len(f.dispatches) != 2 {
		t.Errorf("an unknown handle: %v, %d dispatches reached the backend; want it passed on", err, len(f.dispatches))
	}
	if err := b.Release(ctx, res.Pipeline); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Dispatch(ctx, bad); err != nil || len(f.dispatches) != 3 {
		t.Errorf("a released handle: %v, %d dispatches reached the backend; want it passed on", err, len(f.dispatches))
	}
	f.err = errors.New("boom")
	if _, err := b.Compile(ctx, &CompileRequest{Program: p}); err != f.err {
		t.Errorf("the backend's error: %v", err)
	}
}

// TestServeChecksLaunches pins that Serve runs the launch checks: a dispatch
// the program cannot take never reaches the backend.
func TestServeChecksLaunches(t *testing.T) {
	ctx := context.Background()
	f := &fakeBackend{}
	conn := serveV2(t, f)
	res, err := conn.Compile(ctx, &CompileRequest{Program: checksProgram()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Dispatch(ctx, &DispatchRequest{Pipeline: res.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{{1, 2, 3}, nil, {1, 2, 3, 4}}, Uniforms: make([]byte, 4)})
	if !isRejected(err) || !strings.Contains(err.Error(), "not a multiple of 4") {
		t.Errorf("a partial element: %v, want a RejectedError", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.dispatches) != 0 {
		t.Errorf("%d rejected dispatches reached the backend", len(f.dispatches))
	}
}

// checksProgram has a read buffer, a write buffer, a fixed read_write buffer of
// two f16 elements, a parameter and a uniform.
func checksProgram() *ir.Program {
	b := ir.NewBuilder("p", 64, 1, 1)
	u, k, i := b.Uniform("u", ir.U32), ir.Param("k"), ir.GlobalID(0)
	b.Param("k", ir.U32, ir.LitU32(1))
	in, out := b.Buffer("in", ir.U32, ir.Read), b.Buffer("out", ir.U32, ir.Write)
	b.FixedBuffer("h", ir.F16, ir.ReadWrite, 2)
	b.If(ir.Lt(i, ir.Len(in)), func(then *ir.Block) { then.Store(out, i, ir.Add(ir.Load(in, i), ir.Add(k, u))) })
	return b.MustBuild()
}

package pluginapi

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
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

// recorder is a Backend that counts what reaches it and fails with err when
// set.
type recorder struct {
	mu         sync.Mutex
	compiles   int
	dispatches int
	err        error
}

func (r *recorder) Describe(context.Context) (*Description, error) {
	return &Description{ID: "rec"}, nil
}
func (r *recorder) Open(context.Context, int) error       { return nil }
func (r *recorder) Release(context.Context, uint64) error { return nil }
func (r *recorder) Close(context.Context) error           { return nil }

func (r *recorder) Compile(context.Context, *CompileRequest) (*CompileResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.compiles++
	return &CompileResult{Pipeline: uint64(r.compiles)}, r.err
}

func (r *recorder) Dispatch(context.Context, *DispatchRequest) (*DispatchResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dispatches++
	return &DispatchResult{}, r.err
}

func (r *recorder) counts() (compiles, dispatches int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.compiles, r.dispatches
}

// TestCheckedChecksBeforeTheBackend pins the layer Serve and the conformance kit
// put in front of a backend: rejected requests never reach it, launches are
// checked against the program and workgroup size the pipeline was compiled
// with, and a handle it does not know goes to the backend.
func TestCheckedChecksBeforeTheBackend(t *testing.T) {
	ctx := context.Background()
	r := &recorder{}
	b := Checked(r)
	if Checked(b) != b {
		t.Error("Checked of a Checked backend wraps it again")
	}
	if _, err := b.Compile(ctx, &CompileRequest{Program: &ir.Program{Name: "empty"}}); !isRejected(err) || r.compiles != 0 {
		t.Fatalf("an invalid program: %v, %d compiles reached the backend", err, r.compiles)
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
	if r.dispatches != 0 {
		t.Fatalf("%d rejected dispatches reached the backend", r.dispatches)
	}
	ok := &DispatchRequest{Pipeline: res.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{nil, nil, four}, Uniforms: four}
	if _, err := b.Dispatch(ctx, ok); err != nil || r.dispatches != 1 {
		t.Fatalf("a good dispatch: %v, %d reached the backend", err, r.dispatches)
	}
	unknown := &DispatchRequest{Pipeline: res.Pipeline + 100, Inputs: [][]byte{{1}}}
	if _, err := b.Dispatch(ctx, unknown); err != nil || r.dispatches != 2 {
		t.Errorf("an unknown handle: %v, %d dispatches reached the backend; want it passed on", err, r.dispatches)
	}
	if err := b.Release(ctx, res.Pipeline); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Dispatch(ctx, bad); err != nil || r.dispatches != 3 {
		t.Errorf("a released handle: %v, %d dispatches reached the backend; want it passed on", err, r.dispatches)
	}
	r.err = errors.New("boom")
	if _, err := b.Compile(ctx, &CompileRequest{Program: p}); err != r.err {
		t.Errorf("the backend's error: %v", err)
	}
}

// TestServeChecksLaunches pins that Serve's server runs the SDK's checks on
// both services: a program the Backend service compiles is known to the
// Device service's dispatches (the data plane's), and a launch the program
// cannot take reaches the backend through neither.
func TestServeChecksLaunches(t *testing.T) {
	ctx := context.Background()
	r := &recorder{}
	srv := newServer(r, ProtocolV2)
	prog, err := ir.Encode(checksProgram())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Compile(ctx, &kilnpb.CompileRequest{Program: prog, WorkgroupX: 64, WorkgroupY: 0, WorkgroupZ: 1}); err == nil || !strings.Contains(err.Error(), "zero on some axes only") {
		t.Errorf("a partial workgroup override: %v, want a rejection", err)
	}
	res, err := srv.Compile(ctx, &kilnpb.CompileRequest{Program: prog})
	if err != nil {
		t.Fatal(err)
	}
	partial := [][]byte{{1, 2, 3}, nil, {1, 2, 3, 4}}
	_, err = srv.Dispatch(ctx, &kilnpb.DispatchRequest{Pipeline: res.Pipeline, GridX: 1, GridY: 1, GridZ: 1, Inputs: []*kilnpb.Buffer{{Data: partial[0]}, {}, {Data: partial[2]}}, Uniforms: make([]byte, 4)})
	if err == nil || !strings.Contains(err.Error(), "not a multiple of 4") {
		t.Errorf("a partial element through the Backend service: %v, want a rejection", err)
	}
	_, err = srv.device.dev.dispatch(ctx, &DispatchRequest{Pipeline: res.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: partial, Uniforms: make([]byte, 4)})
	if !isRejected(err) || !strings.Contains(err.Error(), "not a multiple of 4") {
		t.Errorf("a partial element through the data plane: %v, want a RejectedError", err)
	}
	if compiles, dispatches := r.counts(); compiles != 1 || dispatches != 0 {
		t.Errorf("%d compiles and %d dispatches reached the backend, want 1 and 0", compiles, dispatches)
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

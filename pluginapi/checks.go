package pluginapi

import (
	"context"
	"math"
	"sync"

	"github.com/kiln-dev/kiln/ir"
)

// The SDK's checks, in one place. Serve runs every Compile and Dispatch through
// [Checked] (and the data plane's dispatches too), and the conformance kit wraps
// the backend it checks in the same layer, so a backend sees only requests that
// passed them: a valid program with a matching specialization map and a
// well-formed workgroup override, and launches whose inputs, output counts,
// uniform block and grid fit the program. What depends on the device (its
// workgroup, shared-memory, binding and grid limits) stays with the backend. See
// docs/design.md, "Checks in one place".

// CheckCompile checks a compile request as the SDK does before a backend sees
// it: a program that passes ir.Validate, a specialization map that sets only
// declared parameters with values of their types, and a workgroup override that
// is all zero or a valid workgroup size. Its errors are RejectedErrors.
func CheckCompile(req *CompileRequest) error {
	if req == nil || req.Program == nil {
		return Rejected("compile request without a program. Fix: set CompileRequest.Program")
	}
	return checkProgram(req.Program, req.Spec, req.WorkgroupSize)
}

// checkProgram is CheckCompile's check of the program, the specialization map
// and the workgroup override (Artifact requests carry them too).
func checkProgram(p *ir.Program, spec ir.SpecMap, override [3]uint32) error {
	if err := ir.Validate(p); err != nil {
		return Rejected("program %q is invalid: %w", p.Name, err)
	}
	if err := checkSpec(p, spec); err != nil {
		return err
	}
	if err := checkWorkgroupOverride(override); err != nil {
		return err
	}
	if override != ([3]uint32{}) {
		if err := ir.CheckWorkgroupSize(override); err != nil {
			return Rejected("program %q: bad workgroup size override: %w", p.Name, err)
		}
	}
	return nil
}

// errNoDispatchRequest rejects a nil DispatchRequest.
var errNoDispatchRequest = Rejected("dispatch without a request. Fix: pass a DispatchRequest")

// CheckLaunch checks a dispatch of program p, compiled to run with workgroup
// size wg, as the SDK does before a backend sees it, the way the CPU reference
// does: at most one input per buffer, no input for a write buffer, whole
// elements that fit a u32 count, exactly a fixed count's bytes, the uniform
// block's size, and no more than 2^32 invocations on a grid axis (global_id is
// a u32). Its errors are RejectedErrors.
func CheckLaunch(p *ir.Program, wg [3]uint32, req *DispatchRequest) error {
	if req == nil {
		return errNoDispatchRequest
	}
	if len(req.Inputs) > len(p.Buffers) {
		return Rejected("program %q has %d buffers but the dispatch gives %d inputs. Fix: pass one input per binding (nil for write buffers)",
			p.Name, len(p.Buffers), len(req.Inputs))
	}
	for i, decl := range p.Buffers {
		var in []byte
		if i < len(req.Inputs) {
			in = req.Inputs[i]
		}
		size := uint64(decl.Type.Size()) // 2 for IR v1.2's f16 and bf16
		switch {
		case decl.Access == ir.Write && len(in) != 0:
			return Rejected("program %q: buffer %q (binding %d) is write-only but got %d input bytes. Fix: pass nil for write buffers and size them with OutputCounts",
				p.Name, decl.Name, decl.Binding, len(in))
		case decl.Access == ir.Write:
		case uint64(len(in))%size != 0:
			return Rejected("program %q: input of buffer %q (binding %d) is %d bytes, not a multiple of %d. Fix: pass whole %d-byte %s elements",
				p.Name, decl.Name, decl.Binding, len(in), size, size, decl.Type)
		case decl.Count != 0 && uint64(len(in)) != uint64(decl.Count)*size:
			return Rejected("program %q: buffer %q (binding %d) holds exactly %d elements but its input is %d bytes. Fix: pass %d bytes",
				p.Name, decl.Name, decl.Binding, decl.Count, len(in), uint64(decl.Count)*size)
		case uint64(len(in))/size > math.MaxUint32:
			return Rejected("program %q: input of buffer %q (binding %d) has %d elements, more than a u32 len. Fix: split the work into smaller buffers",
				p.Name, decl.Name, decl.Binding, uint64(len(in))/size)
		}
	}
	if err := ir.CheckUniforms(p, req.Uniforms); err != nil {
		return Rejected("%w", err)
	}
	for axis, g := range req.Grid {
		if uint64(g)*uint64(wg[axis]) > math.MaxUint32+1 {
			return Rejected("program %q: grid %v with workgroup size %v gives more than 2^32 invocations on axis %d, beyond a u32 global_id. Fix: use a smaller grid",
				p.Name, req.Grid, wg, axis)
		}
	}
	return nil
}

// Checked returns b behind the SDK's checks: Compile runs [CheckCompile] first,
// and Dispatch runs [CheckLaunch] against the program and workgroup size each
// pipeline was compiled with; the other methods are b's. A dispatch of a
// pipeline it did not compile goes to b unchecked, so b's own answer for an
// unknown handle stands. Serve serves every backend through it and the
// conformance kit checks a backend through it; a backend's test that calls the
// backend with requests the SDK would reject calls it through Checked, the path
// real callers take. Wrapping a Checked backend again returns it unchanged. The
// result implements only Backend: Serve finds the optional interfaces on the
// backend itself.
func Checked(b Backend) Backend {
	if c, ok := b.(*checked); ok {
		return c
	}
	return &checked{Backend: b, pipelines: map[uint64]compiled{}}
}

// checked is the layer of Checked.
type checked struct {
	Backend

	mu sync.Mutex
	// pipelines are the compiled pipelines by handle, until released.
	pipelines map[uint64]compiled
}

// compiled is what CheckLaunch needs of a pipeline, and the adapter it was
// compiled on (for the data plane's queues).
type compiled struct {
	prog    *ir.Program
	wg      [3]uint32
	adapter int
}

func (c *checked) Compile(ctx context.Context, req *CompileRequest) (*CompileResult, error) {
	if err := CheckCompile(req); err != nil {
		return nil, err
	}
	res, err := c.Backend.Compile(ctx, req)
	if err != nil || res == nil {
		return res, err
	}
	wg := req.WorkgroupSize
	if wg == ([3]uint32{}) {
		wg = req.Program.WorkgroupSize
	}
	c.mu.Lock()
	c.pipelines[res.Pipeline] = compiled{prog: req.Program, wg: wg, adapter: req.Adapter}
	c.mu.Unlock()
	return res, nil
}

func (c *checked) Dispatch(ctx context.Context, req *DispatchRequest) (*DispatchResult, error) {
	if err := c.checkLaunch(req); err != nil {
		return nil, err
	}
	return c.Backend.Dispatch(ctx, req)
}

// checkLaunch runs CheckLaunch on req when c compiled its pipeline.
func (c *checked) checkLaunch(req *DispatchRequest) error {
	if req == nil {
		return errNoDispatchRequest
	}
	c.mu.Lock()
	pl, ok := c.pipelines[req.Pipeline]
	c.mu.Unlock()
	if ok {
		return CheckLaunch(pl.prog, pl.wg, req)
	}
	return nil
}

// adapterOf returns the adapter pipeline was compiled on, when c compiled it.
func (c *checked) adapterOf(pipeline uint64) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pl, ok := c.pipelines[pipeline]
	return pl.adapter, ok
}

func (c *checked) Release(ctx context.Context, pipeline uint64) error {
	if err := c.Backend.Release(ctx, pipeline); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.pipelines, pipeline)
	c.mu.Unlock()
	return nil
}

func (c *checked) Close(ctx context.Context) error {
	err := c.Backend.Close(ctx)
	c.mu.Lock()
	clear(c.pipelines)
	c.mu.Unlock()
	return err
}

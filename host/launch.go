package host

import (
	"context"
	"fmt"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// elementBytes is the size of a 32-bit element (every buffer element of IR v1
// and v1.1, and one push-constant word); IR v1.2's f16 and bf16 elements take
// 2 (ir.Type.Size).
const elementBytes = 4

// plan checks w against prog (with the workgroup-size override wg) and returns
// the dispatch request (without its pipeline handle) and the byte size every
// output must have, in output order.
func plan(prog *ir.Program, wg [3]uint32, w Work) (*pluginapi.DispatchRequest, []int, error) {
	bad := func(format string, args ...any) (*pluginapi.DispatchRequest, []int, error) {
		return nil, nil, &LaunchError{Program: prog.Name, Detail: fmt.Sprintf(format, args...)}
	}
	n := len(prog.Buffers)
	if len(w.Inputs) > n {
		return bad("%d inputs for %d buffers. Fix: pass one entry per binding (nil for write buffers)", len(w.Inputs), n)
	}
	if len(w.OutputCounts) > n {
		return bad("%d output counts for %d buffers. Fix: pass one entry per binding", len(w.OutputCounts), n)
	}
	if err := ir.CheckUniforms(prog, w.Uniforms); err != nil {
		return bad("%v", err)
	}
	req := &pluginapi.DispatchRequest{
		Grid:         w.Grid,
		Inputs:       make([][]byte, n),
		OutputCounts: make([]uint32, n),
		Uniforms:     w.Uniforms,
	}
	copy(req.Inputs, w.Inputs)
	if err := placeNamed(prog, w.Named, req.Inputs); err != nil {
		return bad("%v", err)
	}
	copy(req.OutputCounts, w.OutputCounts)
	sizes := make([]int, n)
	for _, d := range prog.Buffers {
		if int(d.Binding) >= n {
			return bad("buffer %s has binding %d outside 0..%d. Fix: validate the program", d.Name, d.Binding, n-1)
		}
		in := req.Inputs[d.Binding]
		size := int(d.Type.Size())
		switch {
		case d.Access.Readable():
			if len(in)%size != 0 {
				return bad("input for buffer %s (binding %d, %s) is %d bytes, not a whole number of %d-byte elements. Fix: pass little-endian %d-byte elements", d.Name, d.Binding, d.Type, len(in), size, size)
			}
			if d.Count > 0 && len(in) != int(d.Count)*size {
				return bad("buffer %s (binding %d) has a fixed count of %d elements but its input has %d bytes. Fix: pass exactly %d bytes", d.Name, d.Binding, d.Count, len(in), int(d.Count)*size)
			}
			sizes[d.Binding] = len(in)
		default:
			if len(in) != 0 {
				return bad("buffer %s (binding %d) is write-only but got %d input bytes. Fix: pass nil for write buffers", d.Name, d.Binding, len(in))
			}
			count := req.OutputCounts[d.Binding]
			switch {
			case d.Count > 0 && count != 0 && count != d.Count:
				return bad("buffer %s (binding %d) has a fixed count of %d but the launch asks for %d. Fix: leave its output count 0", d.Name, d.Binding, d.Count, count)
			case d.Count > 0:
				count = d.Count
			case int(d.Binding) >= len(w.OutputCounts):
				return bad("write buffer %s (binding %d) has no fixed count and the launch gives none. Fix: set OutputCounts[%d] to its element count", d.Name, d.Binding, d.Binding)
			}
			req.OutputCounts[d.Binding] = count
			sizes[d.Binding] = int(count) * size
		}
	}
	if w.Invocations != [3]uint32{} {
		if w.Grid != [3]uint32{} {
			return bad("both Grid %v and Invocations %v are set. Fix: set one of them", w.Grid, w.Invocations)
		}
		size := prog.WorkgroupSize
		if wg != [3]uint32{} {
			size = wg
		}
		req.Grid = ir.GridFor(w.Invocations, size)
	}
	var out []int
	for _, b := range prog.Outputs() {
		out = append(out, sizes[b])
	}
	return req, out, nil
}

// checkResult checks a plugin's dispatch result against the sizes plan expects
// (checkOutputs) and the host-measured wall time of the call (checkTimes).
func checkResult(backend string, prog *ir.Program, sizes []int, res *pluginapi.DispatchResult, wall time.Duration) error {
	if err := checkOutputs(backend, prog, sizes, res.Outputs); err != nil {
		return err
	}
	return checkTimes(backend, "dispatch", res.HostNanos, res.DeviceNanos, wall)
}

// checkTimes refuses the times a plugin reports for op (its own wall time and
// the device time) unless both lie in [0, wall], the host-measured time of the
// call they were measured inside: a negative time, or one longer than the
// call, is broken or forged, and tune, certify and bench would rank by it.
func checkTimes(backend, op string, hostNanos, deviceNanos int64, wall time.Duration) error {
	for _, t := range []struct {
		what  string
		nanos int64
	}{{"plugin time", hostNanos}, {"device time", deviceNanos}} {
		if t.nanos < 0 || t.nanos > wall.Nanoseconds() {
			return &BadResultError{Backend: backend, Detail: fmt.Sprintf("its %s reports a %s of %d ns, outside [0, %d ns], the host-measured time of the call", op, t.what, t.nanos, wall.Nanoseconds())}
		}
	}
	return nil
}

// checkOutputs compares a plugin's outputs with the sizes plan expects.
func checkOutputs(backend string, prog *ir.Program, sizes []int, outputs [][]byte) error {
	if len(outputs) != len(sizes) {
		return &BadResultError{Backend: backend, Detail: fmt.Sprintf("%d outputs for program %s, which has %d output buffers", len(outputs), prog.Name, len(sizes))}
	}
	bindings := prog.Outputs()
	for i, want := range sizes {
		if got := len(outputs[i]); got != want {
			name := ""
			for _, d := range prog.Buffers {
				if d.Binding == bindings[i] {
					name = d.Name
				}
			}
			return &BadResultError{Backend: backend, Detail: fmt.Sprintf("output %d (buffer %s) is %d bytes, the launch makes it %d", i, name, got, want)}
		}
	}
	return nil
}

// Launch is everything Host.Dispatch needs besides the program.
type Launch struct {
	// Backend names the backend ("cpu-ref", "vulkan:1"). Empty follows the
	// program's PGO route when it is fresh and its backend healthy, else picks
	// AcquirePreferred's choice.
	Backend string
	// Fallback lets a launch that names its Backend fail over too. A launch
	// that names none always fails over: when its backend crashes, hangs, loses
	// its device, becomes unavailable or does not start, it runs on the next
	// backend in selection order (never a reference oracle), and
	// Result.Selection and Result.Failover say so (docs/design.md, "Failover").
	Fallback bool
	CompileOptions
	Work
}

// Dispatch is the one-call path: choose the backend, compile prog, dispatch it
// and release the pipeline. The backend is the one l names; else, when the PGO
// table has a fresh route for prog's name (its op id) whose backend is healthy
// (running, dispatching, no reference oracle, adapter opens), that one; else the
// preferred one. Result.Selection says which rule chose it. A launch that names
// no backend (or sets Fallback) fails over to the next backend in selection
// order when its backend fails; when every one fails the error is a
// *FailoverError. For repeated dispatches of one program, use Backend.Compile
// once and Backend.Dispatch many times.
func (h *Host) Dispatch(ctx context.Context, prog *ir.Program, l Launch) (*Result, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	if prog == nil {
		return nil, &LaunchError{Program: "<nil>", Detail: "no program. Fix: pass the *ir.Program to dispatch"}
	}
	failover := l.Backend == "" || l.Fallback
	b, why, err := h.choose(ctx, prog, l.Backend, launchBytes(l.Work))
	if err != nil {
		if !failover || l.Backend == "" || !failsOver(ctx, err) {
			return nil, err
		}
		return h.failover(ctx, prog, l, []Attempt{{Backend: l.Backend, Err: err}})
	}
	res, err := h.launchOn(ctx, b, prog, l)
	if err != nil {
		if !failover || !failsOver(ctx, err) {
			return nil, err
		}
		return h.failover(ctx, prog, l, []Attempt{{Backend: b.Name(), Err: err}})
	}
	res.Selection = why
	return res, nil
}

// launchOn compiles prog on b, dispatches it once and releases the pipeline.
func (h *Host) launchOn(ctx context.Context, b *Backend, prog *ir.Program, l Launch) (*Result, error) {
	opts := l.CompileOptions
	// A launch by Grid never follows an autotune record: skip the lookup and
	// the tuned compile it would not run.
	opts.byGrid = l.Invocations == ([3]uint32{})
	pl, err := b.Compile(ctx, prog, opts)
	if err != nil {
		return nil, err
	}
	compileTime := pl.CompileTime()
	res, err := b.Dispatch(ctx, pl, l.Work)
	if rerr := b.Release(ctx, pl); rerr != nil {
		h.log.Warn("releasing pipeline failed", "backend", b.Name(), "program", prog.Name, "error", rerr)
	}
	if err != nil {
		return nil, err
	}
	res.Compile += compileTime
	return res, nil
}

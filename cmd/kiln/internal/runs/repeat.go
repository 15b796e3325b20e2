package runs

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/pluginapi"
)

// RepeatOptions say how Repeat times a job.
type RepeatOptions struct {
	// Runs is the number of timed submits (at least 1).
	Runs int
	// Warmup is the least time the untimed submits before them take; they go
	// on (up to four times as long) until the last five agree within 10%.
	Warmup time.Duration
}

// Timing is what Repeat measured: the medians and minimums of the timed
// submits' device time (zero when the backend cannot time its device) and
// host-measured submit time, and the work one run does.
type Timing struct {
	Backend                 string
	Runs, WarmupRuns        int
	Warmup                  time.Duration
	DeviceMedian, DeviceMin time.Duration
	SubmitMedian, SubmitMin time.Duration
	// Flops is the kernel's floating-point operations per run (corpus kernels
	// that count them); Bytes the bytes its buffers bind, read ones and
	// written ones (a read_write buffer counts twice).
	Flops float64
	Bytes int64
}

// Best is the median time throughput figures use: the device's when it
// was timed, else the submit's.
func (t *Timing) Best() time.Duration {
	if t.DeviceMedian > 0 {
		return t.DeviceMedian
	}
	return t.SubmitMedian
}

// GFlops is the kernel's throughput at the median (0 without Flops).
func (t *Timing) GFlops() float64 {
	if t.Flops <= 0 || t.Best() <= 0 {
		return 0
	}
	return t.Flops / float64(t.Best().Nanoseconds())
}

// GBps is the bytes bound per second at the median, in GB/s.
func (t *Timing) GBps() float64 {
	if t.Bytes <= 0 || t.Best() <= 0 {
		return 0
	}
	return float64(t.Bytes) / float64(t.Best().Nanoseconds())
}

// Repeat times job on backend the way a kernel benchmark does (triton's
// do_bench): its buffers are allocated on the backend and written once, a
// batch of one dispatch is submitted untimed for opts.Warmup (so that a GPU
// leaves its idle clock), then opts.Runs times, timed.
func Repeat(ctx context.Context, h *host.Host, j Job, backend string, opts RepeatOptions) (*Timing, error) {
	if opts.Runs < 1 {
		return nil, fmt.Errorf("--repeat %d: want at least 1 timed run. Fix: pass --repeat 20", opts.Runs)
	}
	j.Launch.Backend = backend
	j, _, err := applyTuning(ctx, h, j)
	if err != nil {
		return nil, err
	}
	b, err := h.Acquire(ctx, backend)
	if err != nil {
		return nil, err
	}
	pl, err := b.Compile(ctx, j.Program, j.Launch.CompileOptions)
	if err != nil {
		return nil, err
	}
	defer b.Release(context.WithoutCancel(ctx), pl)
	w := j.Launch.Work
	if len(w.Named) > 0 {
		return nil, fmt.Errorf("--repeat runs inputs by binding, not by name. Fix: report this: the CLI never names inputs")
	}
	t := &Timing{Backend: b.Name()}
	if j.Kernel != nil && j.Kernel.Flops != nil {
		t.Flops = j.Kernel.Flops(j.Case)
	}
	bound := boundOf(w)
	for _, d := range j.Program.Buffers {
		elem := int64(d.Type.Size()) // 2 for f16 and bf16 (IR v1.2)
		size := int64(d.Count) * elem
		switch {
		case d.Count > 0:
		case d.Access.Readable() && int(d.Binding) < len(w.Inputs):
			size = int64(len(w.Inputs[d.Binding]))
		case int(d.Binding) < len(w.OutputCounts):
			size = int64(w.OutputCounts[d.Binding]) * elem
		}
		buf, err := b.Alloc(ctx, max(size, pluginapi.ElementBytes), 0)
		if err != nil {
			return nil, err
		}
		defer buf.Free(context.WithoutCancel(ctx))
		if d.Access.Readable() && int(d.Binding) < len(w.Inputs) && len(w.Inputs[d.Binding]) > 0 {
			if err := buf.Write(ctx, 0, w.Inputs[d.Binding]); err != nil {
				return nil, err
			}
		}
		bound.Bindings = append(bound.Bindings, host.Binding{Buffer: buf, Size: max(size, elem)})
		if d.Access.Readable() {
			t.Bytes += size
		}
		if d.Access.Writable() {
			t.Bytes += size
		}
	}
	var batch host.Batch
	batch.Dispatch(pl, bound)
	began := time.Now()
	var warm []time.Duration
	for {
		res, err := b.Submit(ctx, &batch)
		if err != nil {
			return nil, err
		}
		warm = append(warm, timeOf(res))
		took := time.Since(began)
		if took >= opts.Warmup && len(warm) >= 3 && (steady(warm) || took >= 4*opts.Warmup) {
			break
		}
	}
	t.WarmupRuns, t.Warmup = len(warm), time.Since(began)
	device := make([]time.Duration, 0, opts.Runs)
	submit := make([]time.Duration, 0, opts.Runs)
	for range opts.Runs {
		res, err := b.Submit(ctx, &batch)
		if err != nil {
			return nil, err
		}
		device, submit = append(device, res.DeviceTime), append(submit, res.Submit)
	}
	t.Runs = opts.Runs
	t.DeviceMedian, t.DeviceMin = medianMin(device)
	t.SubmitMedian, t.SubmitMin = medianMin(submit)
	return t, nil
}

// boundOf is w's geometry and uniforms as a batch dispatch, without
// bindings.
func boundOf(w host.Work) host.BoundWork {
	return host.BoundWork{Grid: w.Grid, Invocations: w.Invocations, Uniforms: w.Uniforms}
}

// timeOf is the time a warm-up submit is judged by: the device's, else the
// submit's.
func timeOf(r *host.SubmitResult) time.Duration {
	if r.DeviceTime > 0 {
		return r.DeviceTime
	}
	return r.Submit
}

// steady reports whether the last five times agree within 10%.
func steady(times []time.Duration) bool {
	if len(times) < 5 {
		return false
	}
	last := times[len(times)-5:]
	lo, hi := slices.Min(last), slices.Max(last)
	return lo > 0 && float64(hi) <= 1.1*float64(lo)
}

// medianMin returns the median and the minimum of times.
func medianMin(times []time.Duration) (time.Duration, time.Duration) {
	s := slices.Clone(times)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], s[0]
	}
	return (s[n/2-1] + s[n/2]) / 2, s[0]
}

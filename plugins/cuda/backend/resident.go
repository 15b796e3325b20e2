package backend

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
)

// Protocol 2 (docs/design.md, "Backends/CUDA"): buffers live in device memory
// until freed, and a submit enqueues all its commands on the adapter's stream back
// to back, between the two timing events, with one wait at the end; the stream
// orders them, so each command sees the writes of those before it.
var (
	_ pluginapi.Buffers       = (*Backend)(nil)
	_ pluginapi.Submitter     = (*Backend)(nil)
	_ pluginapi.Artifacts     = (*Backend)(nil)
	_ pluginapi.HealthChecker = (*Backend)(nil)
)

// resident is a buffer of protocol 2: device memory of one adapter.
type resident struct {
	d    *device
	ptr  driver.DevicePtr
	size uint64
}

// residentBytes is the allocation of a buffer of size bytes: whole 4-byte words,
// at least one, so a fill of whole words reaches every byte.
func residentBytes(size uint64) uint64 { return max((size+3)&^3, 4) }

// AllocBuffer allocates req.Size bytes of device memory on the adapter and zeroes
// them. The shared memory the SDK offers for a mapped buffer is not used: a
// kernel reading host memory over the bus would be slower than the copies, so
// the buffer is never Mapped and the host writes and reads it through calls.
func (b *Backend) AllocBuffer(ctx context.Context, req *pluginapi.AllocRequest) (*pluginapi.AllocResult, error) {
	b.life.RLock()
	defer b.life.RUnlock()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cuda: alloc: %w", err)
	}
	a, err := b.adapterAt(req.Adapter)
	if err != nil {
		return nil, err
	}
	if req.Size > a.lim.maxBufferBytes() {
		return nil, pluginapi.Rejected("cuda: a buffer of %d bytes is larger than adapter %d's %d. Fix: split the data into smaller buffers", req.Size, a.index, a.lim.maxBufferBytes())
	}
	d, err := a.Open()
	if err != nil {
		return nil, err
	}
	if err := d.acquire(ctx); err != nil {
		return nil, err
	}
	defer d.release()
	if err := d.checkLost(); err != nil {
		return nil, err
	}
	r := &resident{d: d, size: req.Size}
	err = d.ctx.Do(func() error {
		n := residentBytes(req.Size)
		var err error
		if r.ptr, err = d.ctx.MemAlloc(n); err != nil {
			return d.fail(fmt.Sprintf("allocating a buffer of %d bytes", req.Size), err)
		}
		if err := d.ctx.MemsetD32Async(r.ptr, 0, n/4, d.stream); err != nil {
			_ = d.ctx.MemFree(r.ptr)
			return d.fail("zeroing a new buffer", err)
		}
		if err := d.ctx.StreamSynchronize(d.stream); err != nil {
			_ = d.ctx.MemFree(r.ptr)
			return d.fail("zeroing a new buffer", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.adapters.Closed() {
		_ = d.ctx.Do(func() error { return d.ctx.MemFree(r.ptr) })
		return nil, errClosed
	}
	return &pluginapi.AllocResult{Buffer: b.buffers.Add(r)}, nil
}

// buffer returns a live buffer; the SDK has checked that the handle is one.
func (b *Backend) buffer(handle uint64) (*resident, error) {
	return gpukit.Buffer(ID, &b.buffers, handle)
}

// FreeBuffer frees a buffer once the adapter's stream is idle (no submit runs
// then: the device is held by the one that does).
func (b *Backend) FreeBuffer(ctx context.Context, handle uint64) error {
	b.life.RLock()
	defer b.life.RUnlock()
	r, err := gpukit.FreeBuffer(ID, &b.buffers, handle)
	if err != nil {
		return err
	}
	if err := r.d.acquire(ctx); err != nil {
		// Keep the memory rather than free it under a running kernel.
		return err
	}
	defer r.d.release()
	return r.d.ctx.Do(func() error { return r.d.ctx.MemFree(r.ptr) })
}

// WriteBuffer copies src into the buffer at offset, in stream order after every
// earlier submit; from a shared-memory segment the copy is DMA (see
// segments.go).
func (b *Backend) WriteBuffer(ctx context.Context, handle, offset uint64, src []byte) error {
	return b.transfer(ctx, handle, offset, src, true)
}

// ReadBuffer copies the buffer at offset into dst, in stream order after every
// earlier submit.
func (b *Backend) ReadBuffer(ctx context.Context, handle, offset uint64, dst []byte) error {
	return b.transfer(ctx, handle, offset, dst, false)
}

func (b *Backend) transfer(ctx context.Context, handle, offset uint64, host []byte, write bool) error {
	b.life.RLock()
	defer b.life.RUnlock()
	r, err := b.buffer(handle)
	if err != nil {
		return err
	}
	if offset+uint64(len(host)) > r.size || offset+uint64(len(host)) < offset {
		return pluginapi.Rejected("cuda: bytes [%d, %d+%d) lie outside buffer %d of %d bytes. Fix: keep ranges within the buffer", offset, offset, len(host), handle, r.size)
	}
	d := r.d
	if err := d.acquire(ctx); err != nil {
		return err
	}
	defer d.release()
	if err := d.checkLost(); err != nil {
		return err
	}
	return d.ctx.Do(func() error {
		b.pin(d, host)
		dev := r.ptr + driver.DevicePtr(offset)
		var err error
		if write {
			err = d.ctx.MemcpyHtoDAsync(dev, host, d.stream)
		} else {
			err = d.ctx.MemcpyDtoHAsync(host, dev, d.stream)
		}
		if err == nil {
			err = d.ctx.StreamSynchronize(d.stream)
		}
		if err != nil {
			return d.fail(fmt.Sprintf("copying %d bytes of buffer %d", len(host), handle), err)
		}
		return nil
	})
}

// submitScratch is what a submit of the device works with, kept between submits
// so a submit allocates nothing but its result: the resolved launches, their
// kernel parameters, and the pipelines read-locked until the commands are done.
// It is guarded by the device's stream (device.sem).
type submitScratch struct {
	launches  []launch
	args      []uint64
	pipelines []*pipeline
}

// reset empties the scratch for the next submit, keeping its memory.
func (s *submitScratch) reset() {
	s.launches, s.args = s.launches[:0], s.args[:0]
	clear(s.pipelines)
	s.pipelines = s.pipelines[:0]
}

// unlock lets go of the pipelines a submit used.
func (s *submitScratch) unlock() {
	for _, p := range s.pipelines {
		p.use.RUnlock()
	}
	clear(s.pipelines)
	s.pipelines = s.pipelines[:0]
}

// Submit enqueues the commands on the adapter's stream in order — dispatches with
// their bound ranges' addresses and element counts as parameters, copies with
// cuMemcpyDtoDAsync, fills with cuMemsetD32Async — between the timing events, and
// waits once. It all runs on the calling goroutine, with the context current on
// its thread (see docs/design.md, "CUDA"): the wait polls the end event for
// spinFor and only then blocks on another goroutine (device.block). When the caller's context
// ends first, the commands finish in the background and the device stays busy
// until they do.
func (b *Backend) Submit(ctx context.Context, req *pluginapi.SubmitRequest) (*pluginapi.SubmitResult, error) {
	start := time.Now()
	b.life.RLock()
	handedOff := false
	defer func() {
		if !handedOff {
			b.life.RUnlock()
		}
	}()
	_, d, err := b.deviceAt(req.Adapter)
	if err != nil {
		return nil, err
	}
	if err := d.acquire(ctx); err != nil {
		return nil, err
	}
	s := &d.scratch
	s.reset()
	defer func() {
		if !handedOff {
			s.unlock()
			d.release()
		}
	}()
	if err := b.prepare(d, req.Commands, s); err != nil {
		return nil, err
	}
	if err := d.checkLost(); err != nil {
		return nil, err
	}
	finished, ms, err := d.run(ctx, s)
	if err != nil {
		return nil, err
	}
	if !finished {
		if err := d.block(ctx, d.end); err != nil {
			if ab, ok := isAbandoned(err); ok {
				handedOff = true
				go func() {
					<-ab.done
					s.unlock()
					d.release()
					b.life.RUnlock()
				}()
				return nil, fmt.Errorf("cuda: submit of %d commands: %w", len(req.Commands), err)
			}
			return nil, d.fail(fmt.Sprintf("running a submit of %d commands", len(req.Commands)), err)
		}
		if ms, err = d.elapsed(); err != nil {
			return nil, err
		}
	}
	return &pluginapi.SubmitResult{HostNanos: max(time.Since(start).Nanoseconds(), 1), DeviceNanos: int64(float64(ms) * 1e6)}, nil
}

// run enqueues the scratch's launches and polls the end event for spinFor, all
// with the context current on this goroutine's thread; when the work is done by
// then it also reads the device time. A failure to enqueue waits for whatever was
// enqueued before returning.
func (d *device) run(ctx context.Context, s *submitScratch) (finished bool, ms float32, err error) {
	err = d.ctx.Do(func() error {
		for _, l := range s.launches {
			if l.safe {
				if err := l.p.loadSafe(); err != nil {
					return err
				}
			}
		}
		if err := d.enqueue(s, d.start, d.end); err != nil {
			_ = d.ctx.StreamSynchronize(d.stream)
			return err
		}
		pluginapi.MarkLaunched(ctx) // a trace's launch ends here, its completion wait begins
		var err error
		if finished, err = d.poll(ctx, d.end); err != nil || !finished {
			if err != nil {
				return d.fail("waiting for a submit", err)
			}
			return nil
		}
		if ms, err = d.ctx.EventElapsed(d.start, d.end); err != nil {
			return d.fail("reading the timing events", err)
		}
		return nil
	})
	return finished, ms, err
}

// elapsed reads the device time between the timing events, both complete.
func (d *device) elapsed() (float32, error) {
	var ms float32
	err := d.ctx.Do(func() error {
		var err error
		if ms, err = d.ctx.EventElapsed(d.start, d.end); err != nil {
			return d.fail("reading the timing events", err)
		}
		return nil
	})
	return ms, err
}

// The kinds of launch.
const (
	launchDispatch = iota + 1
	launchCopy
	launchFill
)

// launch is one command of a submit, resolved to device addresses.
type launch struct {
	kind int
	// A dispatch: its pipeline, grid and kernel parameters (args[argOff:] of the
	// scratch, as many as the pipeline's module has); safe when a read binding
	// aliases a writable one, so the kernel must not read non-coherently.
	p      *pipeline
	grid   [3]uint32
	argOff int
	safe   bool
	// A copy of n bytes from src to dst, or a fill of n words at dst with value.
	src, dst driver.DevicePtr
	n        uint64
	value    uint32
}

// prepare checks every command against the pipelines and buffers of the adapter
// and resolves it into s; s collects the pipelines, read-locked until the submit
// ends.
func (b *Backend) prepare(d *device, cmds []pluginapi.SubmitCommand, s *submitScratch) error {
	for i, c := range cmds {
		var err error
		switch c := c.(type) {
		case pluginapi.DispatchCommand:
			err = b.prepareDispatch(d, c, s)
		case pluginapi.CopyCommand:
			var src, dst driver.DevicePtr
			if src, err = b.deviceRange(d, c.Src); err == nil {
				if dst, err = b.deviceRange(d, c.Dst); err == nil {
					s.launches = append(s.launches, launch{kind: launchCopy, src: src, dst: dst, n: c.Dst.Size})
				}
			}
		case pluginapi.FillCommand:
			var dst driver.DevicePtr
			if dst, err = b.deviceRange(d, c.Dst); err == nil {
				s.launches = append(s.launches, launch{kind: launchFill, dst: dst, n: c.Dst.Size / 4, value: c.Value})
			}
		default:
			err = fmt.Errorf("unknown command %T. Fix: send dispatch, copy or fill commands", c)
		}
		if err != nil {
			return pluginapi.Rejected("cuda: command %d: %w", i, err)
		}
	}
	return nil
}

// prepareDispatch finds a dispatch's pipeline, read-locks it into s and resolves
// the dispatch.
func (b *Backend) prepareDispatch(d *device, c pluginapi.DispatchCommand, s *submitScratch) error {
	p, ok := b.pipelines.GetHeld(c.Pipeline, (*pipeline).hold)
	if ok {
		s.pipelines = append(s.pipelines, p)
	}
	if !ok {
		return fmt.Errorf("no pipeline %d (never compiled or already released). Fix: dispatch a handle returned by Compile", c.Pipeline)
	}
	if p.d != d {
		return fmt.Errorf("pipeline %d was compiled for adapter %d, not %d. Fix: compile it on the adapter the batch runs on", c.Pipeline, p.d.a.index, d.a.index)
	}
	return b.resolveDispatch(d, p, c, s)
}

// deviceRange returns the device address of a range of a buffer of adapter d.
func (b *Backend) deviceRange(d *device, r pluginapi.BufferRange) (driver.DevicePtr, error) {
	res, err := b.buffer(r.Buffer)
	if err != nil {
		return 0, err
	}
	if res.d != d {
		return 0, fmt.Errorf("buffer %d lives on adapter %d, not %d. Fix: allocate it on the adapter the batch runs on", r.Buffer, res.d.a.index, d.a.index)
	}
	if r.Offset+r.Size > res.size || r.Offset+r.Size < r.Offset {
		return 0, fmt.Errorf("bytes [%d, %d+%d) lie outside buffer %d of %d bytes. Fix: keep ranges within the buffer", r.Offset, r.Offset, r.Size, r.Buffer, res.size)
	}
	return res.ptr + driver.DevicePtr(r.Offset), nil
}

// resolveDispatch checks a dispatch against its program (one range per buffer, a
// fixed count's size, the uniform block, the grid) and appends its launch and
// parameters to s.
func (b *Backend) resolveDispatch(d *device, p *pipeline, c pluginapi.DispatchCommand, s *submitScratch) error {
	prog := p.prog
	if len(c.Bindings) != len(prog.Buffers) {
		return fmt.Errorf("program %q has %d buffers but the dispatch binds %d. Fix: bind one range per buffer", prog.Name, len(prog.Buffers), len(c.Bindings))
	}
	if err := ir.CheckUniforms(prog, c.Uniforms); err != nil {
		return err
	}
	if err := p.checkGrid(c.Grid); err != nil {
		return err
	}
	for i, r := range c.Bindings {
		decl := prog.Buffers[i]
		size := uint64(decl.Type.Size())
		if r.Size%size != 0 || r.Size/size > 0xFFFFFFFF {
			return fmt.Errorf("buffer %q is bound to %d bytes, not a whole number of at most 2^32-1 elements. Fix: bind whole %d-byte elements", decl.Name, r.Size, size)
		}
		if decl.Count != 0 && r.Size != size*uint64(decl.Count) {
			return fmt.Errorf("buffer %q holds exactly %d elements but is bound to %d bytes. Fix: bind %d bytes", decl.Name, decl.Count, r.Size, size*uint64(decl.Count))
		}
	}
	off := len(s.args)
	safe := p.nc && aliased(prog.Buffers, c.Bindings, b, d)
	for _, prm := range p.mod.Params {
		var v uint64
		switch prm.Kind {
		case ptx.BufferPointer:
			addr, err := b.deviceRange(d, c.Bindings[prm.Binding])
			if err != nil {
				return err
			}
			v = uint64(addr)
		case ptx.ElementCount:
			v = c.Bindings[prm.Binding].Size / uint64(prog.Buffers[prm.Binding].Type.Size())
		case ptx.UniformValue:
			v = uint64(binary.LittleEndian.Uint32(c.Uniforms[4*prm.Binding:]))
		}
		s.args = append(s.args, v)
	}
	s.launches = append(s.launches, launch{kind: launchDispatch, p: p, grid: c.Grid, argOff: off, safe: safe})
	return nil
}

// aliased reports whether a read binding of a dispatch overlaps (in device
// memory) one of its write or read_write bindings: the same buffer bound twice
// over overlapping bytes. The bindings have been checked to lie in buffers of
// d.
func aliased(decls []ir.BufferDecl, binds []pluginapi.BufferRange, b *Backend, d *device) bool {
	for i, r := range binds {
		if decls[i].Access != ir.Read || r.Size == 0 {
			continue
		}
		ra, err := b.deviceRange(d, r)
		if err != nil {
			continue
		}
		for j, w := range binds {
			if decls[j].Access == ir.Read || w.Size == 0 {
				continue
			}
			wa, err := b.deviceRange(d, w)
			if err == nil && ra < wa+driver.DevicePtr(w.Size) && wa < ra+driver.DevicePtr(r.Size) {
				return true
			}
		}
	}
	return false
}

// enqueue puts the scratch's launches on the stream between the timing events
// start and end. It must run inside d.ctx.Do with the stream held.
func (d *device) enqueue(s *submitScratch, start, end driver.Event) error {
	c := d.ctx
	if err := c.EventRecord(start, d.stream); err != nil {
		return d.fail("recording the start event", err)
	}
	for i, l := range s.launches {
		var err error
		switch l.kind {
		case launchDispatch:
			if l.grid[0] == 0 || l.grid[1] == 0 || l.grid[2] == 0 {
				continue
			}
			for k, v := range s.args[l.argOff : l.argOff+l.p.args.Len()] {
				l.p.args.Set(k, v)
			}
			l.p.tmaps.fill(l.p.mod, l.p.args, c.EncodeTensorMap)
			fn := l.p.fn
			if l.safe {
				fn = l.p.safe
			}
			err = c.Launch(fn, l.grid, l.p.mod.WorkgroupSize, l.p.mod.DynamicSharedBytes, d.stream, l.p.args)
		case launchCopy:
			err = c.MemcpyDtoDAsync(l.dst, l.src, l.n, d.stream)
		case launchFill:
			err = c.MemsetD32Async(l.dst, l.value, l.n, d.stream)
		}
		if err != nil {
			return d.fail("enqueuing command "+strconv.Itoa(i), err)
		}
	}
	if err := c.EventRecord(end, d.stream); err != nil {
		return d.fail("recording the end event", err)
	}
	return nil
}

// Artifact returns a program's device code as the adapter compiles it: "ptx" (the
// module's text) or "cubin" (the driver's JIT image; needs a usable adapter).
func (b *Backend) Artifact(ctx context.Context, req *pluginapi.ArtifactRequest) (*pluginapi.Artifact, error) {
	var cubin bool
	switch req.Kind {
	case "ptx":
	case "cubin":
		cubin = true
	default:
		return nil, pluginapi.Rejected("cuda emits ptx or cubin, not %q. Fix: ask for ptx or cubin", req.Kind)
	}
	art, err := b.Artifacts(ctx, req.Adapter, req.Program, req.Spec, req.WorkgroupSize, cubin)
	if err != nil {
		return nil, err
	}
	wg := art.WorkgroupSize
	info := map[string]string{"entry_point": ptx.EntryPoint, "target": art.Target.String(), "isa": ptx.ISAVersion,
		"workgroup_size": fmt.Sprintf("%d,%d,%d", wg[0], wg[1], wg[2])}
	if cubin {
		return &pluginapi.Artifact{Data: art.Cubin, Info: info}, nil
	}
	return &pluginapi.Artifact{Data: []byte(art.PTX), Info: info}, nil
}

// Health reports the first opened adapter whose context failed, or nil.
func (b *Backend) Health(ctx context.Context) error {
	b.mu.Lock()
	adapters, err := b.adapters.Live()
	b.mu.Unlock()
	if err != nil {
		return err
	}
	return gpukit.FirstLost(ctx, adapters, (*adapter).lost)
}

package backend

import (
	"context"
	"errors"
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
)

// bandwidthBytes is the size of the buffer measureBandwidth copies: large enough
// that the copy streams far past a 60 MB L2 cache and its launch and tail are a
// small part of its time (on an H200, 256 MiB copies measured 2600 GB/s where
// 1 GiB vector adds run at 3400); a device with less than 16 times that memory
// copies a sixteenth of its memory instead.
const bandwidthBytes = 1 << 30

// bandwidthRuns is how many copies measureBandwidth times after one warm-up copy;
// the fastest counts.
const bandwidthRuns = 3

// copyProgram is the kernel measureBandwidth times: dst[i] = src[i] over u32, one
// element per invocation.
func copyProgram() *ir.Program {
	b := ir.NewBuilder("kiln.cuda.bandwidth.copy.u32", 256, 1, 1)
	src := b.Buffer("src", ir.U32, ir.Read)
	dst := b.Buffer("dst", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(dst)), func(then *ir.Block) {
		then.Store(dst, i, ir.Load(src, i))
	})
	return b.Program()
}

// measureBandwidth runs copyProgram over bandwidthBytes of device memory once to
// warm up and bandwidthRuns more times, each timed by CUDA events, and returns
// the fastest as GB/s (10^9 bytes) of bytes read plus bytes written: the
// bandwidth a kiln kernel gets, which can be below the memory's peak.
func (d *device) measureBandwidth(ctx context.Context) (float64, error) {
	p := copyProgram()
	m, err := ptx.Emit(p, ptx.Options{Target: d.a.target, NonCoherentReads: true})
	if err != nil {
		return 0, err
	}
	pl, _, err := d.load(p, m, nil)
	if err != nil {
		return 0, err
	}
	defer pl.destroy()
	if err := d.acquire(ctx); err != nil {
		return 0, err
	}
	defer d.release()
	size := uint64(bandwidthBytes)
	if limit := d.a.lim.totalMem / 16; size > limit {
		size = limit &^ 1023
	}
	count := size / 4
	best := math.Inf(1)
	err = d.ctx.Do(func() error {
		c := d.ctx
		// Allocated outside the pool: the pool would keep 2 GiB for nothing.
		srcPtr, err := c.MemAlloc(size)
		if err != nil {
			return err
		}
		defer c.MemFree(srcPtr)
		dstPtr, err := c.MemAlloc(size)
		if err != nil {
			return err
		}
		defer c.MemFree(dstPtr)
		src, dst := &buffer{ptr: srcPtr, class: size}, &buffer{ptr: dstPtr, class: size}
		if err := c.MemsetD32Async(src.ptr, 0x3F800000, count, d.stream); err != nil {
			return err
		}
		pl.setArgs([]*binding{{Binding: gpukit.Binding{Decl: p.Buffers[0], Count: uint32(count)}, dev: src}, {Binding: gpukit.Binding{Decl: p.Buffers[1], Count: uint32(count)}, dev: dst}}, nil)
		grid := [3]uint32{uint32((count + 255) / 256), 1, 1}
		for r := range bandwidthRuns + 1 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := c.EventRecord(d.start, d.stream); err != nil {
				return err
			}
			if err := c.Launch(pl.fn, grid, m.WorkgroupSize, m.DynamicSharedBytes, d.stream, pl.args); err != nil {
				return err
			}
			if err := c.EventRecord(d.end, d.stream); err != nil {
				return err
			}
			if err := c.EventSynchronize(d.end); err != nil {
				return err
			}
			ms, err := c.EventElapsed(d.start, d.end)
			if err != nil {
				return err
			}
			if r > 0 && ms > 0 {
				best = min(best, float64(ms)*1e6)
			}
		}
		return nil
	})
	if err != nil {
		if driver.IsSticky(err) {
			d.lost.Store(true)
		}
		return 0, err
	}
	if math.IsInf(best, 1) {
		return 0, errors.New("the copies took no measurable time")
	}
	return 2 * float64(size) / best, nil
}

// quantizeBandwidth rounds a measured bandwidth to two significant digits (3874
// GB/s reads 3900), so that run-to-run noise does not reorder backends whose
// bandwidths are the same; 0 stays 0 (unknown).
func quantizeBandwidth(gbps float64) float64 {
	if !(gbps > 0) || math.IsInf(gbps, 0) {
		return 0
	}
	e := math.Floor(math.Log10(gbps)) - 1
	if e >= 0 {
		step := math.Pow(10, e)
		return math.Round(gbps/step) * step
	}
	scale := math.Pow(10, -e)
	return math.Round(gbps*scale) / scale
}

package backend

import (
	"context"
	"errors"
	"math"
	"strconv"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// bandwidthBytes is the size of the buffers measureBandwidth copies on GPUs, and
// bandwidthTraffic the bytes its timed copies move there at least. CPU devices
// (lavapipe), whose copies run on the host's own cores in the background of
// whatever the host does first, copy cpuBandwidthBytes and move
// cpuBandwidthTraffic.
const (
	bandwidthBytes      = 256 << 20
	bandwidthTraffic    = 1 << 30
	cpuBandwidthBytes   = 16 << 20
	cpuBandwidthTraffic = 128 << 20
)

// measureOnce starts measuring every available adapter's bandwidth in the
// background, once per backend; the adapters it measures say "measuring"
// from now until it ends with a figure ("measured") or fails (the estimate
// stays, "estimated", or none, "unmeasured"). Close waits for the measurement.
func (b *Backend) measureOnce() {
	b.mu.Lock()
	if b.measuring {
		b.mu.Unlock()
		return
	}
	b.measuring = true
	adapters := b.adapters.List()
	b.measured.Add(1)
	b.mu.Unlock()
	for _, a := range adapters {
		if a.info.Available && a.timestamps {
			a.mu.Lock()
			a.info.Profile.MemBWStatus = pluginapi.BandwidthMeasuring
			a.mu.Unlock()
		}
	}
	go func() {
		defer b.measured.Done()
		b.life.RLock()
		defer b.life.RUnlock()
		b.mu.Lock()
		closed := b.adapters.Closed()
		b.mu.Unlock()
		for _, a := range adapters {
			if !a.info.Available || !a.timestamps {
				continue
			}
			bw, err := 0.0, errClosed
			if !closed {
				bw, err = a.measureBandwidth()
			}
			if err != nil && !closed && b.cfg.Logger != nil {
				b.cfg.Logger.Warn("Vulkan bandwidth measurement failed", "adapter", a.index, "error", err)
			}
			a.mu.Lock()
			switch p := &a.info.Profile; {
			case err == nil && bw > 0:
				p.MemBWGBps, p.MemBWStatus = bw, pluginapi.BandwidthMeasured
			case p.MemBWGBps > 0:
				p.MemBWStatus = pluginapi.BandwidthEstimated
			default:
				p.MemBWStatus = pluginapi.BandwidthUnmeasured
			}
			a.mu.Unlock()
		}
		b.noteValidation()
	}()
}

// measureBandwidth opens the adapter's device and measures it.
func (a *adapter) measureBandwidth() (float64, error) {
	d, err := a.Open()
	if err != nil {
		return 0, err
	}
	bw, err := d.measureBandwidth(context.Background())
	return quantize(bw), err
}

// quantize keeps two significant digits, so that run-to-run noise does not
// change the profile.
func quantize(gbps float64) float64 {
	if gbps <= 0 || math.IsInf(gbps, 0) || math.IsNaN(gbps) {
		return 0
	}
	q, _ := strconv.ParseFloat(strconv.FormatFloat(gbps, 'g', 2, 64), 64)
	return q
}

// copyProgram is the kernel measureBandwidth times: dst[i] = src[i] over u32, one
// element per invocation, on a grid whose second axis extends the first.
func copyProgram() *ir.Program {
	b := ir.NewBuilder("kiln.vulkan.bandwidth.copy.u32", 256, 1, 1)
	src := b.Buffer("src", ir.U32, ir.Read)
	dst := b.Buffer("dst", ir.U32, ir.Write)
	row := ir.Mul(ir.NumWorkgroups(0), ir.WorkgroupSize(0))
	i := b.Let("i", ir.Add(ir.GlobalID(0), ir.Mul(ir.GlobalID(1), row)))
	b.If(ir.Lt(i, ir.Len(dst)), func(then *ir.Block) {
		then.Store(dst, i, ir.Load(src, i))
	})
	return b.Program()
}

// measureBandwidth fills a buffer of bandwidthBytes (cpuBandwidthBytes on a CPU
// device), copies it once with copyProgram to warm up, then times one job of as
// many copies as move bandwidthTraffic bytes (cpuBandwidthTraffic; read plus
// written) with its timestamps, and returns that traffic per second in GB/s (10^9 bytes): the
// bandwidth a kiln kernel gets from this device's memory.
func (d *device) measureBandwidth(ctx context.Context) (float64, error) {
	p := copyProgram()
	m, err := spirv.EmitFor(p, d.a.targetFor(p.WorkgroupSize, ir.SpecMap{}))
	if err != nil {
		return 0, err
	}
	pl := &pipeline{d: d, prog: p, wg: p.WorkgroupSize, push: m.PushConstantBytes, uniforms: m.UniformOffset,
		grid: m.GridOffset, gridMode: m.Grid}
	if _, err := pl.build(m, nil); err != nil {
		return 0, err
	}
	defer pl.destroy()
	size, traffic := uint64(bandwidthBytes), uint64(bandwidthTraffic)
	if d.a.props.Type == vk.DeviceTypeCPU {
		size, traffic = cpuBandwidthBytes, cpuBandwidthTraffic
	}
	size = min(size, uint64(d.a.props.Limits.MaxStorageBufferRange)&^1023)
	heap := d.heapFor()
	src, err := heap.alloc(size)
	if err != nil {
		return 0, err
	}
	dst, err := heap.alloc(size)
	if err != nil {
		heap.free(src)
		return 0, err
	}
	defer func() {
		heap.free(src)
		heap.free(dst)
	}()
	count := uint32(size / 4)
	groups := count / p.WorkgroupSize[0]
	x := min(groups, d.a.props.Limits.MaxComputeWorkGroupCount[0])
	copyOp := op{kind: opDispatch, p: pl, grid: [3]uint32{x, (groups + x - 1) / x, 1},
		binds: []span{src, dst}, counts: []uint32{count, count}}
	warm := &job{d: d, ops: []op{{kind: opFill, dst: src, value: 0x3f800000}, copyOp}}
	if _, err := warm.run(ctx, "warming up the bandwidth measurement"); err != nil {
		return 0, err
	}
	runs := int((traffic + 2*size - 1) / (2 * size))
	timed := &job{d: d}
	for range runs {
		timed.ops = append(timed.ops, copyOp)
	}
	ns, err := timed.run(ctx, "measuring the bandwidth")
	if err != nil {
		return 0, err
	}
	if ns <= 0 {
		return 0, errors.New("the copies took no measurable time")
	}
	return 2 * float64(size) * float64(runs) / float64(ns), nil
}

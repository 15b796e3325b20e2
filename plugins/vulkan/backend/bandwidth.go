package backend

import (
	"context"
	"encoding/binary"
	"errors"
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// bandwidthBytes is the size of the buffer measureBandwidth copies on GPUs; CPU
// devices, a hundred times slower, copy cpuBandwidthBytes.
const (
	bandwidthBytes    = 64 << 20
	cpuBandwidthBytes = 8 << 20
)

// bandwidthRuns is how many copies measureBandwidth times after one warm-up copy;
// the fastest counts.
const bandwidthRuns = 3

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

// measureBandwidth runs copyProgram over a 64 MiB device-local buffer (8 MiB on a
// CPU device) once to warm up and bandwidthRuns more times, timing each dispatch with timestamps, and returns
// the fastest as GB/s of bytes read plus bytes written: the bandwidth a kiln kernel
// gets from this device's memory.
func (d *device) measureBandwidth(ctx context.Context) (float64, error) {
	p := copyProgram()
	m, err := spirv.EmitFor(p, d.a.targetFor(p.WorkgroupSize))
	if err != nil {
		return 0, err
	}
	entries, data := spirv.SpecData(p, m, ir.SpecMap{})
	spec := make([]vk.SpecializationEntry, len(entries))
	for i, e := range entries {
		spec[i] = vk.SpecializationEntry{ID: e.ID, Offset: e.Offset, Size: e.Size}
	}
	pl := &pipeline{d: d, prog: p, wg: p.WorkgroupSize, push: m.PushConstantBytes, grid: m.GridOffset, gridMode: m.Grid}
	if _, err := pl.build(m, spec, data, nil); err != nil {
		return 0, err
	}
	defer pl.destroy()
	d.mu.Lock()
	defer d.mu.Unlock()
	size := uint32(bandwidthBytes)
	if d.a.props.Type == vk.DeviceTypeCPU {
		size = cpuBandwidthBytes
	}
	count := size / 4
	j := &job{p: pl, d: d}
	defer j.free()
	for _, decl := range p.Buffers {
		bd := &binding{decl: decl, count: count}
		j.binds = append(j.binds, bd)
		if bd.dev, err = d.newBuffer(bd.size(), vk.UsageStorage|vk.UsageTransferDst, devicePrefs); err != nil {
			return 0, err
		}
	}
	set, err := j.descriptorSet()
	if err != nil {
		return 0, err
	}
	if j.sub, err = d.begin(2 * (bandwidthRuns + 1)); err != nil {
		return 0, err
	}
	cb := j.sub.cb
	cb.FillBuffer(j.binds[0].dev.buf, uint64(size), 0x3f800000)
	cb.MemoryBarrier(vk.StageTransfer, vk.StageComputeShader, vk.AccessTransferWrite, vk.AccessShaderRead)
	cb.BindCompute(pl.pipe, pl.layout, set)
	push := make([]byte, pl.push)
	binary.LittleEndian.PutUint32(push[0:], count)
	binary.LittleEndian.PutUint32(push[4:], count)
	groups := count / p.WorkgroupSize[0]
	x := min(groups, d.a.props.Limits.MaxComputeWorkGroupCount[0])
	y := (groups + x - 1) / x
	for r := range uint32(bandwidthRuns + 1) {
		cb.MemoryBarrier(vk.StageComputeShader, vk.StageComputeShader, vk.AccessShaderWrite, vk.AccessShaderWrite)
		cb.WriteTimestamp(vk.StageBottomOfPipe, j.sub.queries, 2*r)
		pl.dispatchGrid(cb, push, [3]uint32{x, y, 1})
		cb.WriteTimestamp(vk.StageBottomOfPipe, j.sub.queries, 2*r+1)
	}
	if err := j.sub.run(ctx); err != nil {
		if errors.Is(err, errAbandoned) {
			j.sub.wait()
		}
		return 0, err
	}
	best := math.Inf(1)
	for r := uint32(1); r <= bandwidthRuns; r++ {
		ns, err := j.sub.elapsed(2 * r)
		if err != nil {
			return 0, err
		}
		if ns > 0 {
			best = min(best, ns)
		}
	}
	if math.IsInf(best, 1) {
		return 0, errors.New("the copies took no measurable time")
	}
	return 2 * float64(size) / best, nil
}

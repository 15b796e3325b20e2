package backend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// fenceSlice is how long one wait on a fence lasts before the context is checked
// again.
const fenceSlice = 20 * time.Millisecond

// The memory-type preferences, best first.
var (
	// directPrefs back buffers the host maps directly (integrated and CPU devices).
	directPrefs = []vk.MemoryPropertyFlags{
		vk.MemoryDeviceLocal | vk.MemoryHostVisible | vk.MemoryHostCoherent | vk.MemoryHostCached,
		vk.MemoryDeviceLocal | vk.MemoryHostVisible | vk.MemoryHostCoherent,
		vk.MemoryDeviceLocal | vk.MemoryHostVisible,
		vk.MemoryHostVisible | vk.MemoryHostCoherent,
		vk.MemoryHostVisible,
	}
	// devicePrefs back buffers only the device touches.
	devicePrefs = []vk.MemoryPropertyFlags{vk.MemoryDeviceLocal}
	// stagingPrefs back the host-side copies of device-local buffers; cached memory
	// makes reading results back fast.
	stagingPrefs = []vk.MemoryPropertyFlags{
		vk.MemoryHostVisible | vk.MemoryHostCoherent | vk.MemoryHostCached,
		vk.MemoryHostVisible | vk.MemoryHostCached,
		vk.MemoryHostVisible | vk.MemoryHostCoherent,
		vk.MemoryHostVisible,
	}
)

// device is an opened adapter: a logical device, its queue and a command pool.
type device struct {
	a  *adapter
	vk *vk.Device
	// mu serializes use of the queue and the command pool: one dispatch at a time.
	mu   sync.Mutex
	pool vk.CommandPool
	// direct: buffers live in host-visible device memory, mapped by the host; no
	// staging copies.
	direct bool
	lost   atomic.Bool
}

// newDevice creates the logical device of a.
func newDevice(a *adapter) (*device, error) {
	control := a.sizeControl()
	dev, err := a.pd.CreateDevice(a.family, vk.DeviceOptions{Extensions: a.enable,
		SubgroupSizeControl: control, ComputeFullSubgroups: control && a.features.ComputeFullSubgroups})
	if err != nil {
		return nil, err
	}
	pool, err := dev.CreateCommandPool(a.family)
	if err != nil {
		dev.Destroy()
		return nil, err
	}
	return &device{a: a, vk: dev, pool: pool, direct: directMemory(a.props.Type, a.mem)}, nil
}

// directMemory decides whether buffers are mapped directly: on integrated GPUs and
// CPU devices when a device-local type is host-visible (one physical memory), and
// on any device without device-local memory. Discrete GPUs stage through
// host-visible buffers even when their memory is host-visible through a BAR, which
// is slow to read from the host.
func directMemory(t vk.DeviceType, mem vk.MemoryProperties) bool {
	hasLocal, localVisible := false, false
	for _, ty := range mem.Types {
		if ty.Flags&vk.MemoryDeviceLocal != 0 {
			hasLocal = true
			localVisible = localVisible || ty.Flags&vk.MemoryHostVisible != 0
		}
	}
	if !hasLocal {
		return true
	}
	return localVisible && (t == vk.DeviceTypeIntegratedGPU || t == vk.DeviceTypeCPU)
}

// destroy waits for the device to go idle and destroys it.
func (d *device) destroy() {
	d.mu.Lock()
	defer d.mu.Unlock()
	// Idle or lost, the device is destroyed either way.
	_ = d.vk.WaitIdle()
	d.vk.DestroyCommandPool(d.pool)
	d.vk.Destroy()
}

// vkFailure turns a Vulkan failure of op on adapter a into a DeviceError, marking
// the device d (nil while opening) lost when it was.
func vkFailure(a *adapter, d *device, op string, err error) error {
	if vk.IsDeviceLost(err) {
		if d != nil {
			d.lost.Store(true)
		}
		return pluginapi.DeviceFailed("vulkan adapter %d (%s): the device was lost during %s: %w. Fix: check the driver and the system log (a GPU reset, or a kernel that ran too long); restart the plugin to get a new device", a.index, a.info.Name, op, err)
	}
	var vkErr *vk.Error
	if errors.As(err, &vkErr) && (vkErr.Result == vk.ErrOutOfDeviceMemory || vkErr.Result == vk.ErrOutOfHostMemory) {
		return pluginapi.DeviceFailed("vulkan adapter %d (%s): %s ran out of memory: %w. Fix: use smaller buffers or free memory on the device", a.index, a.info.Name, op, err)
	}
	return pluginapi.DeviceFailed("vulkan adapter %d (%s): %s failed: %w", a.index, a.info.Name, op, err)
}

// fail is vkFailure on this device.
func (d *device) fail(op string, err error) error { return vkFailure(d.a, d, op, err) }

// checkLost fails when the device was lost earlier.
func (d *device) checkLost() error {
	if d.lost.Load() {
		return pluginapi.DeviceFailed("vulkan adapter %d (%s): the device was lost earlier. Fix: restart the plugin to get a new device", d.a.index, d.a.info.Name)
	}
	return nil
}

// memoryType returns the first memory type allowed by bits that has all flags of
// the earliest preference that any allowed type satisfies.
func (d *device) memoryType(bits uint32, prefs []vk.MemoryPropertyFlags) (uint32, vk.MemoryPropertyFlags, bool) {
	for _, want := range prefs {
		for i, ty := range d.a.mem.Types {
			if bits&(1<<i) != 0 && ty.Flags&want == want {
				return uint32(i), ty.Flags, true
			}
		}
	}
	return 0, 0, false
}

// buffer is a VkBuffer with its own memory; mapped is set for host-visible ones.
type buffer struct {
	buf      vk.Buffer
	mem      vk.Memory
	size     uint64
	coherent bool
	mapped   []byte
}

// newBuffer creates a buffer of size bytes in memory of the first fitting
// preference, mapped when the memory is host-visible.
func (d *device) newBuffer(size uint64, usage vk.BufferUsage, prefs []vk.MemoryPropertyFlags) (*buffer, error) {
	b := &buffer{size: size}
	var err error
	if b.buf, err = d.vk.CreateBuffer(size, usage); err != nil {
		return nil, err
	}
	req := d.vk.BufferRequirements(b.buf)
	ty, flags, ok := d.memoryType(req.TypeBits, prefs)
	if !ok {
		d.vk.DestroyBuffer(b.buf)
		return nil, fmt.Errorf("no memory type with flags %#x among types %#x. Fix: this device's memory layout is not supported; use another adapter", prefs[0], req.TypeBits)
	}
	if b.mem, err = d.vk.AllocateMemory(req.Size, ty); err != nil {
		d.vk.DestroyBuffer(b.buf)
		return nil, err
	}
	if err = d.vk.BindBufferMemory(b.buf, b.mem); err != nil {
		d.freeBuffer(b)
		return nil, err
	}
	if flags&vk.MemoryHostVisible != 0 {
		b.coherent = flags&vk.MemoryHostCoherent != 0
		if b.mapped, err = d.vk.MapMemory(b.mem, size); err != nil {
			d.freeBuffer(b)
			return nil, err
		}
	}
	return b, nil
}

// freeBuffer destroys a buffer and frees its memory (which unmaps it).
func (d *device) freeBuffer(b *buffer) {
	if b == nil {
		return
	}
	d.vk.DestroyBuffer(b.buf)
	d.vk.FreeMemory(b.mem)
}

// flush makes host writes visible to the device on non-coherent memory.
func (d *device) flush(b *buffer) error {
	if b.coherent {
		return nil
	}
	return d.vk.FlushMemory(b.mem)
}

// invalidate makes device writes visible to the host on non-coherent memory.
func (d *device) invalidate(b *buffer) error {
	if b.coherent {
		return nil
	}
	return d.vk.InvalidateMemory(b.mem)
}

// submission is one recorded command buffer with its fence and timestamp queries.
type submission struct {
	d       *device
	cb      vk.CommandBuffer
	fence   vk.Fence
	queries vk.QueryPool
	nq      uint32
}

// begin starts a command buffer with nq timestamp queries (reset at its start).
// d.mu must be held until the submission is freed.
func (d *device) begin(nq uint32) (*submission, error) {
	s := &submission{d: d, nq: nq}
	var err error
	if s.cb, err = d.vk.AllocateCommandBuffer(d.pool); err != nil {
		return nil, err
	}
	if s.fence, err = d.vk.CreateFence(); err != nil {
		s.free()
		return nil, err
	}
	if nq > 0 {
		if s.queries, err = d.vk.CreateTimestampPool(nq); err != nil {
			s.free()
			return nil, err
		}
	}
	if err = s.cb.Begin(); err != nil {
		s.free()
		return nil, err
	}
	if nq > 0 {
		s.cb.ResetQueries(s.queries, 0, nq)
	}
	return s, nil
}

// free releases the submission's objects; the device must be done with them.
func (s *submission) free() {
	s.d.vk.FreeCommandBuffer(s.d.pool, s.cb)
	s.d.vk.DestroyFence(s.fence)
	s.d.vk.DestroyQueryPool(s.queries)
}

// errAbandoned marks a wait that ended because the context did while the device
// was still working.
var errAbandoned = errors.New("abandoned")

// run ends recording, submits and waits for the fence. When ctx ends first it
// returns an error wrapping errAbandoned and ctx's error; the submission is then
// still in flight and must be finished with wait before anything it uses is freed.
func (s *submission) run(ctx context.Context) error {
	if err := s.cb.End(); err != nil {
		return err
	}
	if err := s.d.vk.Submit(s.cb, s.fence); err != nil {
		return err
	}
	for {
		done, err := s.d.vk.WaitFence(s.fence, fenceSlice)
		if err != nil {
			// The work may still run (or the device is lost); nothing it uses may
			// be freed before the device is idle.
			_ = s.d.vk.WaitIdle()
			return err
		}
		if done {
			return nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("%w: %w", errAbandoned, ctxErr)
		}
	}
}

// wait blocks until an abandoned submission's fence signals (or the device is
// lost).
func (s *submission) wait() {
	for {
		done, err := s.d.vk.WaitFence(s.fence, time.Second)
		if err != nil || done {
			return
		}
	}
}

// elapsed returns the time in nanoseconds between timestamp queries first and
// first+1.
func (s *submission) elapsed(first uint32) (float64, error) {
	ts, err := s.d.vk.QueryResults(s.queries, s.nq)
	if err != nil {
		return 0, err
	}
	mask := uint64(math.MaxUint64)
	if bits := s.d.a.validBits; bits < 64 {
		mask = 1<<bits - 1
	}
	ticks := (ts[first+1] - ts[first]) & mask
	return float64(ticks) * float64(s.d.a.props.Limits.TimestampPeriod), nil
}

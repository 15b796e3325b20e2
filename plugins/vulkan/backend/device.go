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

// device is an opened adapter: a logical device, its queue, its command pool,
// its memory heaps and the reusable objects of its jobs (see docs/design.md,
// "Vulkan").
type device struct {
	a  *adapter
	vk *vk.Device
	// lock is the device lock, a one-slot semaphore so that waiting for it
	// respects a context: it serializes recording and submitting (the queue, the
	// command pool, descriptor set updates) and is released right after
	// vkQueueSubmit.
	lock chan struct{}
	pool vk.CommandPool
	// direct: new buffers live in host-visible device memory, mapped by the
	// host; no staging copies.
	direct atomic.Bool
	lost   atomic.Bool
	// loseNext is a test hook: the next fence wait fails as a lost device.
	loseNext atomic.Bool
	// hold is a test hook: while it holds a channel, every fence reads as
	// unsignalled until the channel is closed, as if the device still ran
	// every job (waitFence).
	hold atomic.Pointer[chan struct{}]

	// local, mapped and staging are the memory heaps: device-local memory,
	// host-mapped device memory, and host-visible staging memory; imported holds
	// the blocks of host memory the device imported.
	local, mapped, staging, imported *heap
	// empty is a small span every empty binding is bound to.
	empty span

	slotMu sync.Mutex // guards slots and dead
	slots  []*slot
	dead   []*slot

	// seq numbers submissions (under lock); done is the highest whose fence
	// was seen signaled: fences of one queue signal in submission order, so
	// every job up to done has finished.
	seq    uint64
	doneMu sync.Mutex
	done   uint64
	doneCh chan struct{}

	// caches are the descriptor sets of each pipeline, and setGen their
	// generation, which grows whenever a set leaves a cache (both under lock).
	caches map[*pipeline]*setCache
	setGen uint64
	// spin is how long a job polls its fence before blocking, in nanoseconds
	// (spinWait; 0 on CPU devices).
	spin atomic.Int64
	// jobs are submit jobs to reuse, with their slices (see Backend.Submit),
	// at most maxFreeJobs; jobMu guards them.
	jobMu sync.Mutex
	jobs  []*job
	// segs are the data-plane segments the device imported, by id (nil: it
	// cannot import that one); the backend's segMu guards them.
	segs map[uint64]*resident
	// staged is the staging memory that started transfers hold until their
	// completions (pipelined.go), at most maxStartedStaging; stageMu guards
	// it.
	stageMu sync.Mutex
	staged  uint64
}

// newDevice creates the logical device of a.
func newDevice(a *adapter) (*device, error) {
	control := a.sizeControl()
	dev, err := a.pd.CreateDevice(a.family, vk.DeviceOptions{Extensions: a.enable,
		SubgroupSizeControl: control, ComputeFullSubgroups: control && a.features.ComputeFullSubgroups,
		BufferDeviceAddress: a.addresses, HostQueryReset: a.hostReset,
		ShaderFloat16: a.features.ShaderFloat16, StorageBuffer16BitAccess: a.features.StorageBuffer16BitAccess,
		ShaderInt16: a.features.ShaderInt16, Cooperative: a.coop.enable})
	if err != nil {
		return nil, err
	}
	pool, err := dev.CreateCommandPool(a.family)
	if err != nil {
		dev.Destroy()
		return nil, err
	}
	d := &device{a: a, vk: dev, pool: pool, lock: make(chan struct{}, 1), caches: map[*pipeline]*setCache{}}
	if a.props.Type != vk.DeviceTypeCPU {
		d.spin.Store(int64(spinWait))
	}
	d.direct.Store(directMemory(a.props.Type, a.mem))
	usage := vk.UsageStorage | vk.UsageTransferSrc | vk.UsageTransferDst
	blockBytes := uint64(gpuBlockBytes)
	if a.props.Type == vk.DeviceTypeCPU || a.props.Type == vk.DeviceTypeIntegratedGPU {
		blockBytes = cpuBlockBytes
	}
	d.local = newHeap(d, "device-local", devicePrefs, usage, blockBytes, false)
	d.mapped = newHeap(d, "mapped device", directPrefs, usage, blockBytes, true)
	d.staging = newHeap(d, "staging", stagingPrefs, vk.UsageTransferSrc|vk.UsageTransferDst, stagingBlockBytes, true)
	d.imported = newHeap(d, "imported host", directPrefs, usage, 0, true)
	if d.empty, err = d.heapFor().alloc(4); err != nil {
		d.destroy()
		return nil, err
	}
	return d, nil
}

// heapFor returns the heap new buffers of the device come from.
func (d *device) heapFor() *heap {
	if d.direct.Load() {
		return d.mapped
	}
	return d.local
}

// acquire takes the device lock, or fails when ctx ends first.
func (d *device) acquire(ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("vulkan adapter %d: nothing submitted: %w", d.a.index, context.Cause(ctx))
	}
	select {
	case d.lock <- struct{}{}:
		return nil
	default:
	}
	select {
	case d.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("vulkan adapter %d: waiting for the device: %w", d.a.index, context.Cause(ctx))
	}
}

// release lets go of the device lock.
func (d *device) release() { <-d.lock }

// finished records that every submission up to seq has finished, waking the
// waitFor calls waiting (doneCh is made only when one waits).
func (d *device) finished(seq uint64) {
	d.doneMu.Lock()
	defer d.doneMu.Unlock()
	if seq > d.done {
		d.done = seq
		if d.doneCh != nil {
			close(d.doneCh)
			d.doneCh = nil
		}
	}
}

// completed is the highest submission known to have finished.
func (d *device) completed() uint64 {
	d.doneMu.Lock()
	defer d.doneMu.Unlock()
	return d.done
}

// waitFor blocks until submission seq has finished, ctx ends or the device is
// lost.
func (d *device) waitFor(ctx context.Context, seq uint64) error {
	for {
		d.doneMu.Lock()
		done := d.done
		if done < seq && d.doneCh == nil {
			d.doneCh = make(chan struct{})
		}
		ch := d.doneCh
		d.doneMu.Unlock()
		if done >= seq {
			return nil
		}
		if err := d.checkLost(); err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("vulkan adapter %d: waiting for earlier work on a buffer: %w", d.a.index, context.Cause(ctx))
		case <-time.After(fenceSlice):
		}
	}
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

// destroy waits for the device to go idle and destroys it with everything it
// holds. Nothing may use it any more.
func (d *device) destroy() {
	// Idle or lost, the device is destroyed either way.
	_ = d.vk.WaitIdle()
	for p, c := range d.caches {
		c.destroy(d)
		delete(d.caches, p)
	}
	d.slotMu.Lock()
	for _, s := range append(d.slots, d.dead...) {
		s.destroy(d)
	}
	d.slots, d.dead = nil, nil
	d.slotMu.Unlock()
	d.local.destroyAll()
	d.mapped.destroyAll()
	d.staging.destroyAll()
	d.imported.destroyAll()
	d.vk.DestroyCommandPool(d.pool)
	d.vk.Destroy()
}

// vkFailure turns a Vulkan failure of op on adapter a into a DeviceError, marking
// the device d (nil while opening) lost when it was.
func vkFailure(a *adapter, d *device, op string, err error) error {
	if vk.IsDeviceLost(err) {
		if d != nil {
			d.markLost(err)
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
		return pluginapi.DeviceFailed("vulkan adapter %d (%s): the device was lost earlier; its pipelines and buffers are gone. Fix: retry: the plugin exits and the host relaunches it (in process: open the adapter again, then compile and allocate again)", d.a.index, d.a.info.Name)
	}
	return nil
}

// markLost records that the device was lost and tells Config.OnDeviceLost once.
func (d *device) markLost(err error) {
	if !d.lost.CompareAndSwap(false, true) {
		return
	}
	d.finished(math.MaxUint64)
	if d.a.onLost != nil {
		go d.a.onLost(err)
	}
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

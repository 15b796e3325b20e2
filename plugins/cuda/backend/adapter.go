package backend

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
)

// limits are the device attributes the backend checks programs and launches
// against.
type limits struct {
	maxThreadsPerBlock uint32
	maxBlock           [3]uint32
	maxGrid            [3]uint32
	sharedPerBlock     uint32
	// sharedOptIn is the most shared memory a block may have when its kernel
	// opts in (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN).
	sharedOptIn      uint32
	warp             uint32
	sms              uint32
	totalMem         uint64
	ccMajor, ccMinor int
	integrated       bool
	prohibited       bool
	// memClockKHz and busBits are the memory's clock (kHz) and bus width (bits),
	// for the bandwidth estimate of a device not measured yet.
	memClockKHz, busBits uint64
}

// maxBufferBytes is the largest buffer a dispatch may bind: an element count must
// fit a u32 and the buffer must fit the device.
func (l limits) maxBufferBytes() uint64 { return min(l.totalMem, 4*math.MaxUint32) }

// adapter is one CUDA device.
type adapter struct {
	index  int
	dev    driver.Device
	lim    limits
	uuid   string
	target ptx.Target
	info   pluginapi.Adapter
	// driverVersion is cuDriverGetVersion, part of every cached blob's header.
	driverVersion int
	// maxDynamicShared is the most dynamic shared memory a launch may pass (see
	// ptx.Options.MaxDynamicSharedBytes): the device's opt-in limit when the
	// driver has cuFuncSetAttribute, 0 otherwise.
	maxDynamicShared uint32
	// log, when set, receives the measurement's report.
	log hclog.Logger

	// measuredBW is the quantized copy bandwidth in GB/s (float64 bits) once the
	// background measurement has succeeded; 0 before.
	measuredBW atomic.Uint64
	// measuring counts the running background measurement (at most one);
	// measureEnded is set when it has ended, with a figure or not.
	measuring    sync.WaitGroup
	measureEnded atomic.Bool

	mu sync.Mutex // guards the fields below
	d  *device
	// stopMeasure cancels the background measurement; nil before the first open.
	stopMeasure context.CancelFunc
	// opening and measureTook are how long opening the device (retaining the
	// context, creating the stream) and measuring the bandwidth took.
	opening, measureTook time.Duration
}

// readLimits reads the attributes of dev.
func readLimits(dev driver.Device) (limits, error) {
	var l limits
	attr := func(a driver.Attribute) int {
		if v, err := dev.Attribute(a); err == nil {
			return v
		}
		return 0
	}
	var err error
	if l.totalMem, err = dev.TotalMem(); err != nil {
		return l, err
	}
	if l.ccMajor, err = dev.Attribute(driver.AttrComputeCapabilityMajor); err != nil {
		return l, err
	}
	if l.ccMinor, err = dev.Attribute(driver.AttrComputeCapabilityMinor); err != nil {
		return l, err
	}
	u := func(a driver.Attribute) uint32 { return uint32(max(attr(a), 0)) }
	l.maxThreadsPerBlock = u(driver.AttrMaxThreadsPerBlock)
	l.maxBlock = [3]uint32{u(driver.AttrMaxBlockDimX), u(driver.AttrMaxBlockDimY), u(driver.AttrMaxBlockDimZ)}
	l.maxGrid = [3]uint32{u(driver.AttrMaxGridDimX), u(driver.AttrMaxGridDimY), u(driver.AttrMaxGridDimZ)}
	l.sharedPerBlock = u(driver.AttrMaxSharedMemoryPerBlock)
	l.sharedOptIn = u(driver.AttrMaxSharedMemoryPerBlockOpt)
	l.warp = u(driver.AttrWarpSize)
	l.sms = u(driver.AttrMultiprocessorCount)
	l.integrated = attr(driver.AttrIntegrated) != 0
	l.prohibited = attr(driver.AttrComputeMode) == driver.ComputeModeProhibited
	l.memClockKHz = uint64(max(attr(driver.AttrMemoryClockRate), 0))
	l.busBits = uint64(max(attr(driver.AttrGlobalMemoryBusWidth), 0))
	return l, nil
}

// newAdapter reads device ordinal's identity and limits and decides whether kiln
// can use it. It creates no context.
func newAdapter(d *driver.Driver, ordinal int, driverText string, log hclog.Logger) *adapter {
	a := &adapter{index: ordinal, log: log, info: pluginapi.Adapter{Index: ordinal, Name: fmt.Sprintf("CUDA device %d", ordinal)}}
	dev, err := d.Device(ordinal)
	if err != nil {
		a.info.Reason = fmt.Sprintf("opening CUDA device %d failed: %v. Fix: check the GPU with nvidia-smi", ordinal, err)
		return a
	}
	a.dev = dev
	if name, err := dev.Name(); err == nil {
		a.info.Name = name
	}
	if u, err := dev.UUID(); err == nil {
		a.uuid = driver.FormatUUID(u)
	}
	if a.lim, err = readLimits(dev); err != nil {
		a.info.Reason = fmt.Sprintf("reading the attributes of CUDA device %d (%s) failed: %v. Fix: check the GPU with nvidia-smi", ordinal, a.info.Name, err)
		return a
	}
	if a.driverVersion, err = d.Version(); err != nil {
		a.info.Reason = fmt.Sprintf("reading the CUDA driver version failed: %v. Fix: reinstall the NVIDIA driver", err)
		return a
	}
	a.info.Identity = identity(a.info.Name, a.uuid, a.lim, driverText)
	if d.HasSetFunctionAttribute() {
		a.maxDynamicShared = a.lim.sharedOptIn
	}
	if a.target, err = ptx.TargetForDriver(a.lim.ccMajor, a.lim.ccMinor, a.driverVersion); err != nil {
		a.info.Reason = fmt.Sprintf("device %q: %v", a.info.Name, err)
		return a
	}
	if a.lim.prohibited {
		a.info.Reason = fmt.Sprintf("device %q is in the Prohibited compute mode and accepts no context. Fix: set its compute mode to Default (nvidia-smi -i %d -c DEFAULT) or use another adapter", a.info.Name, ordinal)
		return a
	}
	if a.lim.warp != 32 || a.lim.maxThreadsPerBlock == 0 {
		a.info.Reason = fmt.Sprintf("device %q reports a warp size of %d and %d threads per block; kiln's PTX assumes warps of 32. Fix: use another adapter", a.info.Name, a.lim.warp, a.lim.maxThreadsPerBlock)
		return a
	}
	a.info.Profile = profile(a.lim)
	a.info.Profile.MemBWGBps = estimateBandwidth(a.lim)
	a.info.Profile.MemoryBytes = a.lim.totalMem
	a.info.Available = true
	return a
}

// profile builds the DeviceProfile from the device's attributes but for
// MemBWGBps (see adapter.describe). Subgroups are warps of 32 with shuffles on
// every device kiln accepts. f16 arithmetic and storage run from compute
// capability 5.3 (add.rn.f16 and friends), so on every device kiln accepts
// (7.0 and later); bf16 storage runs on all of them too: cvt.rn.bf16.f32 from
// 8.0, an integer round to nearest even on 7.x (see package ptx). Tensor cores
// from 8.0: the matmul_tc shape runs on mma.sync there and on wgmma on 9.0 (see
// package ptx); 7.x runs workgroup matrices on the scalar path only. The driver
// API has no indirect dispatch; CUDA events time on the device.
func profile(l limits) pluginapi.DeviceProfile {
	cc := 10*l.ccMajor + l.ccMinor
	return pluginapi.DeviceProfile{
		MaxStorageBufferBindingSize: l.maxBufferBytes(),
		MaxInvocationsPerWorkgroup:  l.maxThreadsPerBlock,
		SubgroupSize:                l.warp,
		SupportsSubgroupOps:         true,
		HasSubgroupShuffle:          true,
		HasSharedMemory:             l.sharedPerBlock > 0,
		SupportsF16:                 cc >= 53,
		SupportsBF16:                cc >= 70,
		SupportsTensorCores:         cc >= 80,
		SupportsDeviceTimestamps:    true,
		TimingQuality:               pluginapi.DeviceTimestamps,
	}
}

// identity names the device for the host's fingerprint: NVIDIA, the device's name
// with its compute capability, the driver's version and the device type. The UUID
// ("" when the driver gave none) goes in Instance, which only the device
// fingerprint carries:
// a cubin is valid on every device of the same model, capability and driver, so
// identical GPUs share cache entries (the model fingerprint), while autotune
// records and PGO routes follow each GPU by its UUID.
func identity(name, uuid string, l limits, driverText string) pluginapi.DeviceIdentity {
	kind := "discrete-gpu"
	if l.integrated {
		kind = "integrated-gpu"
	}
	return pluginapi.DeviceIdentity{
		Vendor:        "NVIDIA",
		Device:        fmt.Sprintf("%s (sm_%d%d)", name, l.ccMajor, l.ccMinor),
		DriverVersion: driverText,
		DeviceType:    kind,
		Instance:      uuid,
	}
}

// describe returns the adapter's description: everything comes from the
// attributes read at start, but mem_bw_gbps, which is the measured copy bandwidth
// once the background measurement after the first open has finished, and the
// estimate from the memory's clock and bus width before (see
// estimateBandwidth; mem_bw_status says which), and the free memory, which
// cuMemGetInfo reads once the adapter is open (unknown before). Describing
// opens nothing.
func (a *adapter) describe() pluginapi.Adapter {
	info := a.info
	if !info.Available {
		return info
	}
	a.mu.Lock()
	d, started := a.d, a.stopMeasure != nil
	a.mu.Unlock()
	p := &info.Profile
	switch bw := math.Float64frombits(a.measuredBW.Load()); {
	case bw > 0:
		p.MemBWGBps, p.MemBWStatus = bw, pluginapi.BandwidthMeasured
	case started && !a.measureEnded.Load():
		p.MemBWStatus = pluginapi.BandwidthMeasuring
	case p.MemBWGBps > 0:
		p.MemBWStatus = pluginapi.BandwidthEstimated
	default:
		p.MemBWStatus = pluginapi.BandwidthUnmeasured
	}
	if d != nil {
		_ = d.ctx.Do(func() error {
			free, _, err := d.ctx.MemGetInfo()
			if err == nil {
				p.MemoryFreeBytes = free
			}
			return err
		})
	}
	return info
}

// estimateBandwidth is the memory's peak bandwidth from its attributes, GB/s:
// two transfers per clock (DDR and HBM alike) over the bus width, quantized like
// a measurement (see quantizeBandwidth). Devices of one model get the same
// figure, so they tie and order by index. 0 when the driver reports no clock or
// bus width.
func estimateBandwidth(l limits) float64 {
	return quantizeBandwidth(2 * float64(l.memClockKHz) * 1e3 * float64(l.busBits) / 8 / 1e9)
}

// Open returns the adapter's device, creating it on first use.
func (a *adapter) Open() (*device, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.openLocked()
}

func (a *adapter) openLocked() (*device, error) {
	if a.d != nil {
		return a.d, nil
	}
	start := time.Now()
	d, err := newDevice(a)
	if err != nil {
		return nil, cudaFailure(a, nil, "opening the device", err)
	}
	a.opening = time.Since(start)
	a.d = d
	if a.stopMeasure == nil {
		ctx, cancel := context.WithCancel(context.Background())
		a.stopMeasure = cancel
		a.measuring.Add(1)
		go a.measure(ctx, d)
	}
	return d, nil
}

// measure runs the copy-bandwidth measurement on d in the background, after the
// first open, and publishes the quantized result for later Describes. It takes
// the device's stream like a submit, so work queued meanwhile waits for it (once,
// a few milliseconds on a large GPU). A failure leaves the estimate and is
// logged.
func (a *adapter) measure(ctx context.Context, d *device) {
	defer a.measuring.Done()
	defer a.measureEnded.Store(true)
	start := time.Now()
	bw, err := d.measureBandwidth(ctx)
	took := time.Since(start)
	a.mu.Lock()
	a.measureTook = took
	a.mu.Unlock()
	log := a.log
	if err == nil {
		a.measuredBW.Store(math.Float64bits(quantizeBandwidth(bw)))
	}
	switch {
	case log == nil:
	case err != nil:
		log.Warn("CUDA bandwidth measurement failed; mem_bw_gbps stays the estimate from the memory's clock and bus width",
			"index", a.index, "estimate", a.info.Profile.MemBWGBps, "error", err)
	default:
		log.Info("CUDA bandwidth measured", "index", a.index, "gbps", bw, "reported", quantizeBandwidth(bw),
			"estimate", a.info.Profile.MemBWGBps, "open", a.opening, "measure", took)
	}
}

// lost reports whether the adapter's device, when opened, failed (see
// device.checkLost).
func (a *adapter) lost() error {
	a.mu.Lock()
	d := a.d
	a.mu.Unlock()
	if d == nil {
		return nil
	}
	return d.checkLost()
}

// waitMeasured waits for the background measurement, if one runs.
func (a *adapter) waitMeasured() { a.measuring.Wait() }

// Info is the adapter's description as read at start (see describe).
func (a *adapter) Info() *pluginapi.Adapter { return &a.info }

// Close stops the background measurement, waits for the device's work and
// releases it.
func (a *adapter) Close() {
	a.mu.Lock()
	stop := a.stopMeasure
	a.mu.Unlock()
	if stop != nil {
		stop()
	}
	a.measuring.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.d != nil {
		a.d.destroy()
		a.d = nil
	}
}

package backend

import (
	"context"
	"fmt"
	"math"
	"sync"
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
	warp               uint32
	sms                uint32
	totalMem           uint64
	ccMajor, ccMinor   int
	integrated         bool
	prohibited         bool
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

	mu       sync.Mutex // guards the fields below
	d        *device
	measured bool
	// opening and measuring are how long the first Describe took to open the
	// device (retain the context, create the stream) and to measure the
	// bandwidth.
	opening, measuring time.Duration
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
	l.warp = u(driver.AttrWarpSize)
	l.sms = u(driver.AttrMultiprocessorCount)
	l.integrated = attr(driver.AttrIntegrated) != 0
	l.prohibited = attr(driver.AttrComputeMode) == driver.ComputeModeProhibited
	return l, nil
}

// newAdapter reads device ordinal's identity and limits and decides whether kiln
// can use it. It creates no context.
func newAdapter(d *driver.Driver, ordinal int, driverText string) *adapter {
	a := &adapter{index: ordinal, info: pluginapi.Adapter{Index: ordinal, Name: fmt.Sprintf("CUDA device %d", ordinal)}}
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
	a.info.Identity = identity(a.info.Name, a.lim, driverText)
	a.info.Identity.Instance = a.uuid
	if a.target, err = ptx.TargetFor(a.lim.ccMajor, a.lim.ccMinor); err != nil {
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
	a.info.Available = true
	return a
}

// profile builds the DeviceProfile from the device's attributes; MemBWGBps is
// filled in by describe. Subgroups are warps of 32 with shuffles on every device
// kiln accepts; f16 from compute capability 5.3, bf16 from 8.0, tensor cores from
// 7.0. The driver API has no indirect dispatch; CUDA events time on the device.
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
		SupportsBF16:                cc >= 80,
		SupportsTensorCores:         cc >= 70,
		SupportsDeviceTimestamps:    true,
		TimingQuality:               pluginapi.DeviceTimestamps,
	}
}

// identity names the device for the host's fingerprint: NVIDIA, the device's name
// with its compute capability, the driver's version and the device type. The UUID
// goes in Instance (set by the caller), which only the device fingerprint carries:
// a cubin is valid on every device of the same model, capability and driver, so
// identical GPUs share cache entries (the model fingerprint), while autotune
// records and PGO routes follow each GPU by its UUID.
func identity(name string, l limits, driverText string) pluginapi.DeviceIdentity {
	kind := "discrete-gpu"
	if l.integrated {
		kind = "integrated-gpu"
	}
	return pluginapi.DeviceIdentity{
		Vendor:        "NVIDIA",
		Device:        fmt.Sprintf("%s (sm_%d%d)", name, l.ccMajor, l.ccMinor),
		DriverVersion: driverText,
		DeviceType:    kind,
	}
}

// describe returns the adapter's description, measuring the bandwidth on the first
// call.
func (a *adapter) describe(ctx context.Context, log hclog.Logger) pluginapi.Adapter {
	if !a.info.Available {
		return a.info
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.measured {
		a.measured = true
		start := time.Now()
		d, err := a.openLocked()
		a.opening = time.Since(start)
		var bw float64
		if err == nil {
			start = time.Now()
			bw, err = d.measureBandwidth(ctx)
			a.measuring = time.Since(start)
			a.info.Profile.MemBWGBps = quantizeBandwidth(bw)
		}
		switch {
		case log == nil:
		case err != nil:
			log.Warn("CUDA bandwidth measurement failed; mem_bw_gbps stays 0", "index", a.index, "error", err)
		default:
			log.Info("CUDA bandwidth measured", "index", a.index, "gbps", bw, "reported", a.info.Profile.MemBWGBps,
				"open", a.opening, "measure", a.measuring)
		}
	}
	return a.info
}

// open returns the adapter's device, creating it on first use.
func (a *adapter) open() (*device, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.openLocked()
}

func (a *adapter) openLocked() (*device, error) {
	if a.d != nil {
		return a.d, nil
	}
	d, err := newDevice(a)
	if err != nil {
		return nil, cudaFailure(a, nil, "opening the device", err)
	}
	a.d = d
	return d, nil
}

// close waits for the device's work and releases it.
func (a *adapter) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.d != nil {
		a.d.destroy()
		a.d = nil
	}
}

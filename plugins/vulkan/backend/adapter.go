package backend

import (
	"fmt"
	"strings"
	"sync"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// adapter is one physical device.
type adapter struct {
	index int
	pd    vk.PhysicalDevice
	props vk.Properties
	mem   vk.MemoryProperties
	// family is the compute queue family; timestamps says whether kiln times
	// dispatches on it with timestamp queries.
	family     uint32
	timestamps bool
	validBits  uint32
	info       pluginapi.Adapter
	// features and enable are the device's features and the extensions its
	// logical device is created with; target is what the emitter may use.
	features vk.Features
	enable   []string
	target   spirv.Target
	// addresses: the device has bufferDeviceAddress, enabled on its logical
	// device, so a binding may exceed maxStorageBufferRange (address.go).
	addresses bool
	// hostReset: the device has hostQueryReset, enabled on its logical device,
	// so timestamp queries are reset on the host before each submission rather
	// than by a command recorded into it (exec.go).
	hostReset bool
	// coop is what the adapter uses of cooperative matrices (coopmat.go).
	coop coopState

	// onLost is Config.OnDeviceLost.
	onLost func(error)

	mu  sync.Mutex // guards dev, lost and info.Profile's MemBWGBps and MemBWStatus
	dev *device
	// lost are devices that were lost and replaced, destroyed at close.
	lost []*device
}

// newAdapter reads a physical device's properties and decides whether kiln can use
// it; matrixPath is Config.MatrixPath.
func newAdapter(index int, pd vk.PhysicalDevice, matrixPath string) *adapter {
	props := pd.Properties()
	a := &adapter{index: index, pd: pd, props: props, mem: pd.MemoryProperties()}
	a.info = pluginapi.Adapter{Index: index, Name: props.Name, Identity: identity(props)}
	if props.APIVersion < vk.Version11 {
		a.info.Reason = fmt.Sprintf("device %q supports Vulkan %s; kiln needs 1.1 or later. Fix: update the device's Vulkan driver", props.Name, props.APIVersion)
		return a
	}
	family := -1
	for i, q := range pd.QueueFamilies() {
		if q.Flags&vk.QueueCompute == 0 {
			continue
		}
		if family < 0 || (a.validBits == 0 && q.TimestampValidBits > 0) {
			family, a.validBits = i, q.TimestampValidBits
		}
	}
	if family < 0 {
		a.info.Reason = fmt.Sprintf("device %q has no compute queue. Fix: use another adapter", props.Name)
		return a
	}
	a.family = uint32(family)
	a.timestamps = props.Limits.TimestampComputeAndGraphics && props.Limits.TimestampPeriod > 0 && a.validBits > 0
	exts, err := pd.Extensions()
	if err != nil {
		a.info.Reason = fmt.Sprintf("device %q: %v. Fix: update the device's Vulkan driver", props.Name, err)
		return a
	}
	_, _, a.enable = pd.Needs()
	a.features = pd.Features()
	a.addresses = pd.BufferDeviceAddress()
	a.hostReset = pd.HostQueryReset()
	a.target = target(props, a.features)
	a.info.Note = floatNote(a.target)
	a.info.Profile = profile(props, a.features, exts, a.timestamps)
	a.info.Profile.MaxStorageBufferBindingSize = a.bindingLimit()
	a.info.Profile.MemoryBytes = deviceLocalBytes(a.mem)
	a.useCoop(matrixPath)
	a.info.Available = true
	return a
}

// target is what the emitter may use on a device: float controls when 32-bit
// (and 16-bit) operations can keep signed zeros, infinities and NaN, and
// denormals, the subgroup operation classes the device supports in compute
// shaders, and f16 arithmetic and 16-bit storage (IR v1.2) where it has them.
func target(p vk.Properties, f vk.Features) spirv.Target {
	var t spirv.Target
	t.SignedZeroInfNanPreserve = p.FloatControls != nil && p.FloatControls.SignedZeroInfNanPreserveFloat32
	t.SignedZeroInfNanPreserve16 = p.FloatControls != nil && p.FloatControls.SignedZeroInfNanPreserveFloat16
	t.DenormPreserve = p.FloatControls != nil && p.FloatControls.DenormPreserveFloat32
	t.Float16, t.Storage16, t.Int16 = f.ShaderFloat16, f.StorageBuffer16BitAccess, f.ShaderInt16
	t.LoopGuard = endsLongLoops(p)
	if p.Subgroup.Stages&vk.StageCompute != 0 {
		t.Subgroups = spirv.SubgroupFeatures(p.Subgroup.Operations) &
			(spirv.SubgroupBasic | spirv.SubgroupArithmetic | spirv.SubgroupBallot | spirv.SubgroupShuffle)
	}
	return t
}

// targetFor is the adapter's target for a pipeline of workgroup size wg and
// specialization spec, which the module folds in as constants (the emitter
// then knows every parameter's value: constant loops unroll and shared
// indices it can prove in range lose their checks; see docs/design.md,
// "Value ranges and bounds-check elision").
func (a *adapter) targetFor(wg [3]uint32, spec ir.SpecMap) spirv.Target {
	t := a.target
	t.WorkgroupSize = wg
	t.FoldSpec = &spec
	t.MaxPushConstantBytes = a.props.Limits.MaxPushConstantsSize
	t.MaxSharedBytes = a.props.Limits.MaxComputeSharedMemorySize
	return t
}

// floatNote is the adapter's note (`kiln devices`) about the float controls
// the device lacks: without SignedZeroInfNanPreserve the emitter's bit-level
// fallbacks keep NaN, infinities and signed zeros; without DenormPreserve
// denormals may be flushed to zero, which the conformance rules allow.
func floatNote(t spirv.Target) string {
	var missing []string
	if !t.SignedZeroInfNanPreserve {
		missing = append(missing, "no SignedZeroInfNanPreserve (bit-level fallbacks)")
	}
	if !t.DenormPreserve {
		missing = append(missing, "no DenormPreserve (denormals may flush)")
	}
	if len(missing) == 0 {
		return ""
	}
	return "float controls: " + strings.Join(missing, "; ")
}

// deviceLocalBytes is the size of the device's device-local heaps, the memory
// its buffers live in.
func deviceLocalBytes(m vk.MemoryProperties) uint64 {
	var n uint64
	for _, h := range m.Heaps {
		if h.DeviceLocal {
			n += h.Size
		}
	}
	return n
}

// freeBytes is how much of the device-local heaps this process may still
// allocate by VK_EXT_memory_budget (budget less usage), 0 (unknown) when the
// device lacks the extension.
func (a *adapter) freeBytes() uint64 {
	budgets, ok := a.pd.MemoryBudget()
	if !ok {
		return 0
	}
	var n uint64
	for i, b := range budgets {
		if i < len(a.mem.Heaps) && a.mem.Heaps[i].DeviceLocal && b.Budget > b.Usage {
			n += b.Budget - b.Usage
		}
	}
	return n
}

// sizeControl reports whether pipelines can require a subgroup size (and full
// subgroups) on this device.
func (a *adapter) sizeControl() bool {
	sc := a.props.SubgroupSizeControl
	return sc != nil && a.features.SubgroupSizeControl && sc.RequiredStages&vk.StageCompute != 0
}

// subgroupRequirement decides the subgroups a pipeline of p with workgroup size
// wg runs with (see docs/design.md, "Vulkan"): p's required size, or for a
// program that runs with any size the device's own when it divides the
// workgroup's invocation count, else the largest size the device can be asked for
// that does. A size the device cannot run is a rejection that says why. The size
// is required explicitly where the device has subgroup size control, with full
// subgroups when the workgroup's x is a multiple of it.
func (a *adapter) subgroupRequirement(p *ir.Program, wg [3]uint32) (vk.SubgroupRequirement, error) {
	def := a.props.Subgroup.Size
	control := a.sizeControl()
	var lo, hi uint32 = def, def
	if control {
		lo, hi = a.props.SubgroupSizeControl.MinSubgroupSize, a.props.SubgroupSizeControl.MaxSubgroupSize
	}
	size := p.SubgroupSize
	if size == 0 {
		if ir.CheckSubgroupSize(wg, def) == nil {
			size = def
		}
		for s := hi; size == 0 && s >= lo && s > 0; s /= 2 {
			if ir.CheckSubgroupSize(wg, s) == nil {
				size = s
			}
		}
		if size == 0 {
			return vk.SubgroupRequirement{}, pluginapi.Rejected("vulkan: program %q uses subgroups, but its workgroup %v has %d invocations, which no subgroup size adapter %d (%s) runs (%d to %d lanes) divides. Fix: use a workgroup whose invocation count is a multiple of %d",
				p.Name, wg, uint64(wg[0])*uint64(wg[1])*uint64(wg[2]), a.index, a.info.Name, lo, hi, lo)
		}
	}
	if size < lo || size > hi {
		how := "its subgroup size is fixed (no subgroup size control)"
		if control {
			how = fmt.Sprintf("it can be asked for %d to %d", lo, hi)
		}
		return vk.SubgroupRequirement{}, pluginapi.Rejected("vulkan: program %q requires subgroups of %d lanes, but adapter %d (%s) runs subgroups of %d lanes and %s. Fix: require a size the adapter runs, or none (subgroup_size 0), or run on another adapter",
			p.Name, size, a.index, a.info.Name, def, how)
	}
	if !control {
		return vk.SubgroupRequirement{}, nil
	}
	return vk.SubgroupRequirement{Size: size, FullSubgroups: a.features.ComputeFullSubgroups && wg[0]%size == 0}, nil
}

// profile builds the DeviceProfile from what Vulkan reports, claiming only what
// the backend can run (see the package documentation): f16 where the device has
// both f16 arithmetic (shaderFloat16) and 16-bit storage buffers, bf16 where it
// has 16-bit storage buffers (bf16 needs no arithmetic), no tensor cores
// (useCoop, coopmat.go, claims them where the cooperative-matrix path is used),
// no indirect dispatch and no hardware counters (the backend records neither).
// MemBWGBps is filled in by the bandwidth measurement (MemBWStatus says how
// far it got); until one starts the figure is not measured.
func profile(p vk.Properties, f vk.Features, _ []string, timestamps bool) pluginapi.DeviceProfile {
	compute := p.Subgroup.Stages&vk.StageCompute != 0
	ops := p.Subgroup.Operations
	q := pluginapi.HostEnqueueWait
	if timestamps {
		q = pluginapi.DeviceTimestamps
	}
	return pluginapi.DeviceProfile{
		MaxStorageBufferBindingSize: uint64(p.Limits.MaxStorageBufferRange),
		MaxInvocationsPerWorkgroup:  p.Limits.MaxComputeWorkGroupInvocations,
		SubgroupSize:                p.Subgroup.Size,
		SupportsSubgroupOps:         compute && ops&(vk.SubgroupBasic|vk.SubgroupArithmetic) == vk.SubgroupBasic|vk.SubgroupArithmetic,
		HasSubgroupShuffle:          compute && ops&vk.SubgroupShuffle != 0,
		HasSharedMemory:             p.Limits.MaxComputeSharedMemorySize > 0,
		SupportsF16:                 f.ShaderFloat16 && f.StorageBuffer16BitAccess,
		SupportsBF16:                f.StorageBuffer16BitAccess,
		SupportsDeviceTimestamps:    timestamps,
		TimingQuality:               q,
		MemBWStatus:                 pluginapi.BandwidthUnmeasured,
	}
}

// vendorNames are the PCI (or Khronos) vendor ids of Vulkan implementers.
var vendorNames = map[uint32]string{
	0x1002: "AMD", 0x1010: "ImgTec", 0x106b: "Apple", 0x10de: "NVIDIA", 0x13b5: "ARM",
	0x5143: "Qualcomm", 0x8086: "Intel", 0x10005: "Mesa",
}

// identity names the device for the host's fingerprint: vendor, device name and id,
// driver version (with the driver's own version text when Vulkan 1.2 reports it,
// since some drivers, lavapipe among them, leave driverVersion meaningless),
// device type, and the device's UUID as its Instance.
func identity(p vk.Properties) pluginapi.DeviceIdentity {
	vendor := fmt.Sprintf("0x%04x", p.VendorID)
	if name, ok := vendorNames[p.VendorID]; ok {
		vendor = name + " (" + vendor + ")"
	}
	driver := driverVersion(p.VendorID, p.DriverVersion)
	if p.Driver != nil {
		driver += " (" + p.Driver.Name + ": " + p.Driver.Info + ")"
	}
	return pluginapi.DeviceIdentity{
		Vendor:        vendor,
		Device:        fmt.Sprintf("%s (0x%04x)", p.Name, p.DeviceID),
		DriverVersion: driver,
		DeviceType:    p.Type.String(),
		Instance:      instance(p),
	}
}

// instance is the device's UUID as the identity's Instance: "GPU-" and the UUID
// in its usual groups on NVIDIA (where it is the GPU's UUID, as CUDA and
// nvidia-smi show it), the groups alone elsewhere, empty when the device has none.
func instance(p vk.Properties) string {
	u := p.DeviceUUID
	if u == ([16]byte{}) {
		return ""
	}
	s := fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	if p.VendorID == 0x10de {
		return "GPU-" + s
	}
	return s
}

// driverVersion decodes VkPhysicalDeviceProperties.driverVersion: NVIDIA packs
// 10.8.8.6 bits, everyone else follows VK_MAKE_API_VERSION.
func driverVersion(vendor, v uint32) string {
	if vendor == 0x10de {
		return fmt.Sprintf("%d.%d.%d.%d", v>>22, v>>14&0xff, v>>6&0xff, v&0x3f)
	}
	return vk.Version(v).String()
}

// describe returns the adapter's description.
func (a *adapter) describe() pluginapi.Adapter {
	a.mu.Lock()
	info := a.info
	a.mu.Unlock()
	if info.Available {
		info.Profile.MemoryFreeBytes = a.freeBytes()
	}
	return info
}

// Open returns the adapter's device, creating it on first use and after a lost
// device.
func (a *adapter) Open() (*device, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dev != nil && !a.dev.lost.Load() {
		return a.dev, nil
	}
	d, err := newDevice(a)
	if err != nil {
		return nil, vkFailure(a, nil, "open", err)
	}
	if a.dev != nil {
		a.lost = append(a.lost, a.dev)
	}
	a.dev = d
	return d, nil
}

// devices returns the adapter's current device and the lost ones.
func (a *adapter) devices() []*device {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]*device(nil), a.lost...)
	if a.dev != nil {
		out = append(out, a.dev)
	}
	return out
}

// current returns the adapter's device, nil when it was never opened.
func (a *adapter) current() *device {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dev
}

// Info is the adapter's description.
func (a *adapter) Info() *pluginapi.Adapter { return &a.info }

// Close waits for the device's work and destroys it.
func (a *adapter) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, d := range append(a.lost, a.dev) {
		if d != nil {
			d.destroy()
		}
	}
	a.dev, a.lost = nil, nil
}

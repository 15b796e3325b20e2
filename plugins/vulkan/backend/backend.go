package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
	"github.com/kiln-dev/kiln/plugins/internal/handles"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// ID is the backend's id in the host's registry.
const ID = "vulkan"

// Version is the plugin's version.
const Version = "0.1.0"

// The environment variables ConfigFromEnv reads.
const (
	// ValidationEnv set to 1 enables the Khronos validation layer.
	ValidationEnv = "KILN_VK_VALIDATION"
	// LoaderEnv names the Vulkan loader library to open instead of libvulkan.so.1
	// (tests point it at a missing library).
	LoaderEnv = "KILN_VULKAN_LOADER"
	// MatrixPathEnv picks the cooperative-matrix path where the device offers
	// both (Config.MatrixPath).
	MatrixPathEnv = "KILN_VK_MATRIX_PATH"
)

// Config configures a Backend.
type Config struct {
	// Loader is the Vulkan loader library to dlopen; empty means libvulkan.so.1.
	Loader string
	// Validation enables VK_LAYER_KHRONOS_validation, with synchronization
	// validation (missing barriers are messages too); its messages are counted and
	// kept (see Backend.ValidationMessages) and logged as warnings to Logger. Vulkan
	// is unavailable when the layer is requested but not installed.
	Validation bool
	// Logger, when set, receives the validation messages.
	Logger hclog.Logger
	// NoBandwidth skips measuring the adapters' bandwidth (mem_bw_gbps stays 0):
	// tests that count allocations or want the CPU to themselves set it.
	NoBandwidth bool
	// OnDeviceLost, when set, is called (once per device, on its own goroutine)
	// after a device was lost. The plugin's main exits there so the host
	// relaunches it; in process, the next Open creates a new device.
	OnDeviceLost func(error)
	// MatrixPath picks the cooperative-matrix path where the device offers
	// VK_NV_cooperative_matrix2: "nv" takes the NV path (workgroup-scope
	// matrices) with staged operands, "nv-direct" the NV path with operands
	// loaded straight from the buffers, "nv-tensor" through tensor layouts
	// where they can be; empty or "khr": the KHR path
	// (subgroup tiles; coopmat.go, nvChoice).
	MatrixPath string
}

// ConfigFromEnv reads the configuration from KILN_VK_VALIDATION,
// KILN_VULKAN_LOADER and KILN_VK_MATRIX_PATH.
func ConfigFromEnv() Config {
	return Config{Loader: os.Getenv(LoaderEnv), Validation: os.Getenv(ValidationEnv) == "1", MatrixPath: os.Getenv(MatrixPathEnv)}
}

// Backend is the Vulkan pluginapi.Backend. It starts Vulkan on first use and is
// safe for concurrent use.
type Backend struct {
	cfg Config

	// life is held for reading by every call that uses Vulkan objects and for
	// writing by Close, so Close never destroys what a call is using.
	life sync.RWMutex

	mu        sync.Mutex // guards the fields below
	adapters  gpukit.Adapters[*adapter]
	measuring bool
	// measured is done when the bandwidth measurement has ended.
	measured sync.WaitGroup
	// estimates delivers NVML's bandwidth estimates when they came too late
	// for the first Describe.
	estimates chan map[string]float64
	loader    *vk.Loader
	instance  *vk.Instance
	// pipelines and buffers are by handle; each table guards itself. Adding to
	// them takes mu too, so nothing is added after Close.
	pipelines handles.Table[*pipeline]
	buffers   handles.Table[*resident]
	// segMem are the data-plane segments attached, by id (see AttachSegment);
	// segMu guards them and every device's imports of them.
	segMu  sync.Mutex
	segMem map[uint64][]byte
	// phases is how long each step of starting Vulkan took; estimate reads
	// NVML's bandwidth estimates (vk.NVMLBandwidth; benchmarks replace it to
	// time the start without NVML).
	phases   startPhases
	estimate func() (map[string]float64, error)
	// msgCount and msgText tally the validation messages not yet returned by
	// ValidationMessages.
	msgCount uint64
	msgText  string
}

// maxMessageText bounds the validation text a Backend keeps.
const maxMessageText = 1 << 20

var _ pluginapi.Backend = (*Backend)(nil)

// ConcurrentAdapters opts into one data-plane queue per adapter: every call
// that records or submits on a device holds that device's lock, the tables are
// under mu, the segments and their imports under segMu, and life is only
// read-held by calls, so calls on different adapters run side by side.
func (b *Backend) ConcurrentAdapters() bool { return true }

// New returns a Backend; nothing is loaded until the first call.
func New(cfg Config) *Backend {
	return &Backend{cfg: cfg, estimate: vk.NVMLBandwidth, adapters: gpukit.Adapters[*adapter]{Backend: ID, API: "Vulkan", ErrClosed: errClosed}}
}

// startPhases is how long each step of the first Describe's start took (see
// docs/design.md, "Vulkan"); the plugin logs them.
type startPhases struct {
	// Load is dlopen of the loader; Version vkEnumerateInstanceVersion;
	// Instance vkCreateInstance (the loader loads its drivers and layers);
	// Enumerate vkEnumeratePhysicalDevices; Adapters reading every device's
	// properties, queues, extensions and features; Estimates the wait for NVML's
	// bandwidth estimates after all that (at most estimateGrace).
	Load, Version, Instance, Enumerate, Adapters, Estimates time.Duration
}

// estimateGrace is how long the first Describe waits, once Vulkan has started,
// for NVML's bandwidth estimates (read alongside Vulkan's start).
const estimateGrace = 5 * time.Millisecond

// applyEstimates gives every adapter not measured yet NVML's estimate for its
// GPU UUID, quantized: 2 × memory clock × bus width, the peak, until the
// background measurement replaces it with what a kiln kernel gets.
func applyEstimates(adapters []*adapter, est map[string]float64) {
	for _, a := range adapters {
		g, ok := est[a.info.Identity.Instance]
		if !ok || a.info.Identity.Instance == "" {
			continue
		}
		a.mu.Lock()
		if p := &a.info.Profile; p.MemBWGBps == 0 {
			p.MemBWGBps = quantize(g)
			if p.MemBWStatus != pluginapi.BandwidthMeasuring {
				p.MemBWStatus = pluginapi.BandwidthEstimated
			}
		}
		a.mu.Unlock()
	}
}

var errClosed = errors.New("the vulkan backend is closed. Fix: start a new backend (the host relaunches the plugin)")

// start loads Vulkan and lists the adapters once. A missing loader, driver or device
// is not an error: it becomes one unavailable adapter carrying the reason. b.mu must
// be held.
func (b *Backend) start() error {
	if b.adapters.Started() {
		// Every call comes here: no closure to allocate once started.
		_, err := b.adapters.Live()
		return err
	}
	var estimates chan map[string]float64
	started, err := b.adapters.Start(func() ([]*adapter, string) {
		// NVML's bandwidth estimates are read alongside Vulkan's start.
		estimates = make(chan map[string]float64, 1)
		go func() {
			est, _ := b.estimate()
			estimates <- est
		}()
		return b.startVulkan()
	}, func(info pluginapi.Adapter) *adapter { return &adapter{info: info} })
	if !started || err != nil {
		return err
	}
	adapters := b.adapters.List()
	began := time.Now()
	grace := time.NewTimer(estimateGrace)
	select {
	case est := <-estimates:
		applyEstimates(adapters, est)
	case <-grace.C:
		b.estimates = estimates
	}
	grace.Stop()
	b.phases.Estimates = time.Since(began)
	if log := b.cfg.Logger; log != nil {
		ph := b.phases
		log.Info("Vulkan started", "validation", b.cfg.Validation, "adapters", len(adapters),
			"load", ph.Load, "version", ph.Version, "instance", ph.Instance, "enumerate", ph.Enumerate, "describe_adapters", ph.Adapters, "nvml_wait", ph.Estimates)
		b.adapters.Log(log, func(a *adapter) []any {
			return []any{"type", a.info.Identity.DeviceType, "direct_memory", directMemory(a.props.Type, a.mem)}
		})
	}
	return nil
}

// startVulkan opens the loader and instance and builds the adapters, or returns
// why Vulkan is unusable.
func (b *Backend) startVulkan() ([]*adapter, string) {
	library := b.cfg.Loader
	if library == "" {
		library = vk.DefaultLibrary
	}
	t := time.Now()
	lap := func(d *time.Duration) {
		now := time.Now()
		*d, t = now.Sub(t), now
	}
	l, err := vk.Load(library)
	lap(&b.phases.Load)
	var missing *vk.LoaderMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Sprintf("Vulkan loader %s not found. Fix: install libvulkan1 and a Vulkan driver (mesa-vulkan-drivers provides a CPU one)", library)
	}
	if err != nil {
		return nil, err.Error()
	}
	version := l.InstanceVersion()
	lap(&b.phases.Version)
	if version < vk.Version11 {
		l.Close()
		return nil, fmt.Sprintf("the Vulkan loader %s supports Vulkan %s; kiln needs 1.1 or later. Fix: update libvulkan1", library, version)
	}
	inst, err := l.CreateInstance(vk.InstanceOptions{APIVersion: min(version, vk.Version13), Validation: b.cfg.Validation, SyncValidation: true})
	lap(&b.phases.Instance)
	var noLayer *vk.LayerMissingError
	if errors.As(err, &noLayer) {
		l.Close()
		return nil, err.Error()
	}
	if err != nil {
		l.Close()
		return nil, fmt.Sprintf("creating a Vulkan instance failed: %v. Fix: install a Vulkan driver for this machine (mesa-vulkan-drivers provides a CPU one); "+
			"on a headless NVIDIA machine whose nvidia_icd.json names libGLX_nvidia.so.0, point VK_ICD_FILENAMES at an ICD file naming libEGL_nvidia.so.0; "+
			"VK_LOADER_DEBUG=driver shows why the loader rejected a driver", err)
	}
	pds, err := inst.PhysicalDevices()
	lap(&b.phases.Enumerate)
	if err == nil && len(pds) == 0 {
		err = errors.New("the loader found no physical device")
	}
	if err != nil {
		inst.Destroy()
		l.Close()
		return nil, fmt.Sprintf("listing Vulkan devices failed: %v. Fix: install a Vulkan driver for this machine (mesa-vulkan-drivers provides a CPU one)", err)
	}
	b.loader, b.instance = l, inst
	adapters := make([]*adapter, len(pds))
	for i, pd := range pds {
		adapters[i] = newAdapter(i, pd, b.cfg.MatrixPath)
		adapters[i].onLost = b.cfg.OnDeviceLost
	}
	lap(&b.phases.Adapters)
	return adapters, ""
}

// Prestart loads Vulkan and lists the adapters now, as the first call would:
// the plugin runs it on its own goroutine at process start, so the start
// overlaps the plugin handshake and the first Describe finds it done or under
// way. It creates no device. Calling it more than once, or after another call,
// does nothing.
func (b *Backend) Prestart() {
	b.life.RLock()
	defer b.life.RUnlock()
	b.mu.Lock()
	_ = b.start() // a closed backend: the next call says so
	b.mu.Unlock()
	b.noteValidation()
}

// Describe reports the backend and its adapters. The first call starts
// measuring each available adapter's bandwidth in the background (see the
// package documentation); until a measurement ends, mem_bw_gbps is 0 or
// NVML's estimate and mem_bw_status says "measuring". Free memory is read on
// each call.
func (b *Backend) Describe(ctx context.Context) (*pluginapi.Description, error) {
	b.life.RLock()
	defer b.life.RUnlock()
	defer b.noteValidation()
	b.mu.Lock()
	err := b.start()
	adapters := b.adapters.List()
	if b.estimates != nil {
		select {
		case est := <-b.estimates:
			applyEstimates(adapters, est)
			b.estimates = nil
		default:
		}
	}
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !b.cfg.NoBandwidth {
		b.measureOnce()
	}
	d := &pluginapi.Description{
		ID:         ID,
		Version:    Version,
		Dispatches: true,
		Features:   []string{"ir.v1", "shared", "atomics", "barrier"},
	}
	for _, a := range adapters {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("describe vulkan adapters: %w", err)
		}
		d.Adapters = append(d.Adapters, a.describe())
	}
	return d, nil
}

// adapterAt returns an available adapter, starting Vulkan if needed.
func (b *Backend) adapterAt(index int) (*adapter, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.start(); err != nil {
		return nil, err
	}
	return b.adapters.At(index)
}

// deviceAt returns an available adapter and its device, opened on first use.
func (b *Backend) deviceAt(index int) (*adapter, *device, error) {
	return gpukit.DeviceAt[*adapter, *device](b.adapterAt, index)
}

// Open creates the adapter's logical device; opening it again does nothing.
func (b *Backend) Open(ctx context.Context, adapter int) error {
	b.life.RLock()
	defer b.life.RUnlock()
	defer b.noteValidation()
	return gpukit.Open(ctx, ID, adapter, b.deviceAt)
}

// Release destroys a pipeline. Releasing an unknown handle is a RejectedError.
func (b *Backend) Release(_ context.Context, handle uint64) error {
	b.life.RLock()
	defer b.life.RUnlock()
	defer b.noteValidation()
	return gpukit.ReleasePipeline(ID, &b.pipelines, handle, (*pipeline).destroy)
}

// Close waits for running work, then destroys every pipeline, device and the
// instance. Later calls fail.
func (b *Backend) Close(context.Context) error {
	b.life.Lock()
	defer b.life.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.adapters.Closed() {
		return nil
	}
	gpukit.DestroyAll(&b.pipelines, (*pipeline).destroy)
	gpukit.DestroyAll(&b.buffers, nil)
	b.adapters.Close()
	if b.instance != nil {
		b.noteValidationLocked()
		b.instance.Destroy()
		b.instance = nil
	}
	b.loader.Close()
	b.loader = nil
	return nil
}

// noteValidation moves the validation messages that arrived since the last call
// into the backend's tally and logs them.
func (b *Backend) noteValidation() {
	if !b.cfg.Validation {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.noteValidationLocked()
}

func (b *Backend) noteValidationLocked() {
	if b.instance == nil || !b.cfg.Validation {
		return
	}
	n, text := b.instance.Messages()
	if n == 0 {
		return
	}
	b.msgCount += n
	if len(b.msgText) < maxMessageText {
		b.msgText += text
	}
	if b.cfg.Logger != nil {
		b.cfg.Logger.Warn("Vulkan validation layer reported problems", "count", n, "messages", text)
	}
}

// ValidationMessages returns how many validation-layer messages arrived since the
// last call, and their text (the first MiB), and clears them; after Close it
// returns those reported until the instance was destroyed. It is (0, "") without
// validation.
func (b *Backend) ValidationMessages() (uint64, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.noteValidationLocked()
	n, text := b.msgCount, b.msgText
	b.msgCount, b.msgText = 0, ""
	return n, text
}

package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
	"github.com/kiln-dev/kiln/plugins/internal/handles"
)

// ID is the backend's id in the host's registry.
const ID = "cuda"

// Version is the plugin's version.
const Version = "0.1.0"

// Precedence ranks CUDA ahead of backends without a rank (Vulkan) when everything
// else ties, as on the same NVIDIA GPU with the same quantized bandwidth.
const Precedence = 10

// DriverEnv names the driver library ConfigFromEnv reads: another file than
// libcuda.so.1 (tests point it at a missing library).
const DriverEnv = "KILN_CUDA_DRIVER"

// Config configures a Backend.
type Config struct {
	// Library is the driver library to open; empty means libcuda.so.1.
	Library string
	// Logger, when set, receives the start-up report and warnings.
	Logger hclog.Logger
}

// ConfigFromEnv reads the configuration from KILN_CUDA_DRIVER.
func ConfigFromEnv() Config { return Config{Library: os.Getenv(DriverEnv)} }

// Backend is the CUDA pluginapi.Backend. It loads the driver on first use and is
// safe for concurrent use.
type Backend struct {
	cfg Config

	// life is held for reading by every call that uses driver objects and for
	// writing by Close, so Close never destroys what a call is using.
	life sync.RWMutex

	// mu guards the fields below; adapter lookups take it for reading, so
	// submits on different adapters do not wait for each other.
	mu       sync.RWMutex
	adapters gpukit.Adapters[*adapter]
	drv      *driver.Driver
	version  int // cuDriverGetVersion
	// initTook is how long loading the driver and cuInit took.
	initTook time.Duration
	// segs are the data plane's shared-memory segments (segments.go).
	segs segments
	// peer is the state of copies between devices (peer.go).
	peer peers

	// pipelines and buffers (the resident buffers of protocol 2) are by handle;
	// each table guards itself. Adding to them takes mu too, so nothing is
	// added after Close.
	pipelines handles.Table[*pipeline]
	buffers   handles.Table[*resident]
}

var _ pluginapi.Backend = (*Backend)(nil)

// ConcurrentAdapters opts into one data-plane queue per adapter: every call
// that touches a device takes that device's lock (device.acquire), the tables
// are under mu, the segments under segs.mu, and life is only read-held by
// calls, so calls on different adapters run side by side.
func (b *Backend) ConcurrentAdapters() bool { return true }

// New returns a Backend; nothing is loaded until the first call.
func New(cfg Config) *Backend {
	return &Backend{cfg: cfg, adapters: gpukit.Adapters[*adapter]{Backend: ID, API: "CUDA", ErrClosed: errClosed}}
}

var errClosed = errors.New("the cuda backend is closed. Fix: start a new backend (the host relaunches the plugin)")

// start loads the driver and lists the adapters once. A missing driver, an old
// one or no device is not an error: it becomes one unavailable adapter carrying
// the reason. b.mu must be held.
func (b *Backend) start() error {
	started, err := b.adapters.Start(b.startCUDA, func(info pluginapi.Adapter) *adapter { return &adapter{info: info} })
	if !started || err != nil {
		return err
	}
	if log := b.cfg.Logger; log != nil {
		adapters := b.adapters.List()
		log.Info("CUDA started", "driver", b.cfg.Library, "driver_api", b.version, "adapters", len(adapters), "init", b.initTook)
		b.adapters.Log(log, func(a *adapter) []any {
			return []any{"uuid", a.uuid, "compute_capability", fmt.Sprintf("%d.%d", a.lim.ccMajor, a.lim.ccMinor), "sms", a.lim.sms, "target", a.target.String()}
		})
	}
	return nil
}

// startCUDA opens the driver and builds the adapters, or returns why CUDA is
// unusable.
func (b *Backend) startCUDA() ([]*adapter, string) {
	library := b.cfg.Library
	if library == "" {
		library = driver.DefaultLibrary
	}
	start := time.Now()
	defer func() { b.initTook = time.Since(start) }()
	d, err := driver.Load(library)
	var missing *driver.LibraryMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Sprintf("CUDA driver library %s not found. Fix: install the NVIDIA driver (it provides libcuda.so.1) on a machine with an NVIDIA GPU, or set %s to the library's path", library, DriverEnv)
	}
	if err != nil {
		return nil, err.Error()
	}
	if err := d.Init(); err != nil {
		if driver.IsNoDevice(err) {
			return nil, fmt.Sprintf("the CUDA driver found no device (%v). Fix: check that the GPU is visible (nvidia-smi; in a container, pass it through) and that CUDA_VISIBLE_DEVICES does not hide it", err)
		}
		return nil, fmt.Sprintf("cuInit failed: %v. Fix: check the NVIDIA driver with nvidia-smi (the kernel module and libcuda.so.1 must be the same version)", err)
	}
	version, err := d.Version()
	if err != nil {
		return nil, fmt.Sprintf("reading the CUDA driver version failed: %v. Fix: reinstall the NVIDIA driver", err)
	}
	b.version = version
	if version < ptx.MinDriverVersion {
		return nil, fmt.Sprintf("the NVIDIA driver supports CUDA %s, older than the CUDA %s whose PTX ISA %s kiln emits. Fix: update the NVIDIA driver to R450 or newer",
			cudaVersion(version), cudaVersion(ptx.MinDriverVersion), ptx.ISAVersion)
	}
	n, err := d.DeviceCount()
	if err == nil && n == 0 {
		err = errors.New("cuDeviceGetCount reports 0 devices")
	}
	if err != nil {
		return nil, fmt.Sprintf("listing CUDA devices failed: %v. Fix: check that the GPU is visible (nvidia-smi) and that CUDA_VISIBLE_DEVICES does not hide it", err)
	}
	b.drv = d
	driverText := driverVersionText(version)
	adapters := make([]*adapter, n)
	for i := range n {
		adapters[i] = newAdapter(d, i, driverText, b.cfg.Logger)
	}
	return adapters, ""
}

// cudaVersion formats a cuDriverGetVersion value ("13.0").
func cudaVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// driverVersionText is the driver's version for the device identity: the kernel
// module's version from /proc/driver/nvidia/version when it can be read, and the
// CUDA version.
func driverVersionText(version int) string {
	cuda := "CUDA " + cudaVersion(version)
	data, err := os.ReadFile("/proc/driver/nvidia/version")
	if err != nil {
		return cuda
	}
	if nvrm := moduleVersion(string(data)); nvrm != "" {
		return nvrm + " (" + cuda + ")"
	}
	return cuda
}

// moduleVersion finds the version in the first line of /proc/driver/nvidia/version
// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.03  Tue ..."): the
// first field after "Module" made of digits and dots.
func moduleVersion(text string) string {
	line, _, _ := strings.Cut(text, "\n")
	_, rest, ok := strings.Cut(line, "Module")
	if !ok {
		return ""
	}
	for _, f := range strings.Fields(rest) {
		if strings.Trim(f, "0123456789.") == "" && strings.Contains(f, ".") {
			return f
		}
	}
	return ""
}

// Describe reports the backend and its adapters from the driver's attributes: it
// creates no context and runs nothing on a device (see the package
// documentation for the bandwidth it reports).
func (b *Backend) Describe(ctx context.Context) (*pluginapi.Description, error) {
	b.life.RLock()
	defer b.life.RUnlock()
	b.mu.Lock()
	err := b.start()
	adapters := b.adapters.List()
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	rank := uint32(Precedence)
	d := &pluginapi.Description{
		ID:         ID,
		Version:    Version,
		Dispatches: true,
		Precedence: &rank,
		Features:   []string{"ir.v1", "ir.v1.1", "ir.v1.2", "shared", "atomics", "barrier"},
	}
	for _, a := range adapters {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("describe cuda adapters: %w", err)
		}
		d.Adapters = append(d.Adapters, a.describe())
	}
	return d, nil
}

// Start loads the driver and lists the adapters now rather than on the first
// call, so that the plugin can do it while the host is still connecting. It
// returns at once; a call that needs the adapters waits for it.
func (b *Backend) Start() {
	b.mu.Lock()
	go func() {
		defer b.mu.Unlock()
		_ = b.start()
	}()
}

// adapterAt returns an available adapter, starting CUDA if needed.
func (b *Backend) adapterAt(index int) (*adapter, error) {
	b.mu.RLock()
	started := b.adapters.Started()
	b.mu.RUnlock()
	if !started {
		b.mu.Lock()
		err := b.start()
		b.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.adapters.At(index)
}

// deviceAt returns an available adapter and its device, opened on first use.
func (b *Backend) deviceAt(index int) (*adapter, *device, error) {
	return gpukit.DeviceAt[*adapter, *device](b.adapterAt, index)
}

// Open retains the adapter's primary context and creates its stream; opening it
// again does nothing.
func (b *Backend) Open(ctx context.Context, adapter int) error {
	b.life.RLock()
	defer b.life.RUnlock()
	return gpukit.Open(ctx, ID, adapter, b.deviceAt)
}

// Release unloads a pipeline. Releasing an unknown handle is a RejectedError.
func (b *Backend) Release(_ context.Context, handle uint64) error {
	b.life.RLock()
	defer b.life.RUnlock()
	return gpukit.ReleasePipeline(ID, &b.pipelines, handle, (*pipeline).destroy)
}

// Close waits for running work, then unloads every pipeline and releases every
// device. Later calls fail.
func (b *Backend) Close(context.Context) error {
	b.life.Lock()
	defer b.life.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.adapters.Closed() {
		return nil
	}
	gpukit.DestroyAll(&b.pipelines, (*pipeline).destroy)
	b.segs.mu.Lock()
	for id, seg := range b.segs.m {
		if seg.d != nil {
			_ = seg.d.ctx.Do(func() error { return seg.d.ctx.HostUnregister(seg.mem) })
		}
		delete(b.segs.m, id)
	}
	b.segs.mu.Unlock()
	gpukit.DestroyAll(&b.buffers, func(r *resident) { _ = r.d.ctx.Do(func() error { return r.d.ctx.MemFree(r.ptr) }) })
	b.closePeers()
	b.adapters.Close()
	return nil
}

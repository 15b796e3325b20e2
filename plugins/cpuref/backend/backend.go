package backend

import (
	"context"
	"errors"
	"time"

	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/handles"
)

// ID is the backend's registry id.
const ID = "cpu-ref"

// Version is the plugin's version; it is also the adapter's driver version, so a
// new interpreter gets a new device fingerprint and fresh cache entries.
const Version = "0.1.0"

// AdapterName names the single adapter.
const AdapterName = "CPU reference interpreter"

// maxBindingBytes is the storage binding size reported: 1 GiB. The interpreter
// itself takes any buffer a u32 length can count, but every buffer of a dispatch
// crosses the wire in one gRPC message of at most pluginapi.MaxMessageBytes (2 GiB).
const maxBindingBytes = 1 << 30

// Backend runs programs on the interpreter. Pipelines are compiled kernels kept
// by handle, buffers byte slices kept by handle (buffers.go). It is safe for
// concurrent use; dispatches run in parallel.
type Backend struct {
	kernels handles.Table[*interp.Kernel]
	buffers handles.Table[[]byte]
}

// ConcurrentAdapters opts into concurrent data-plane calls: cpu-ref has one
// adapter, so this only lets a Dispatch (which runs on its staged inputs, not
// on buffers) run beside the adapter's queue; the handle tables are safe for
// concurrent use.
func (b *Backend) ConcurrentAdapters() bool { return true }

// New returns a Backend with no pipelines and no buffers.
func New() *Backend {
	return &Backend{}
}

// Profile describes the CPU as the interpreter uses it: large storage bindings,
// workgroups of up to 1024 invocations, shared memory, no subgroups, and host-only
// timing. MemBWGBps is 0 and not measured: the interpreter is bound by
// interpretation, not by memory bandwidth, and claims none. Its memory is the
// machine's: MemTotal and MemAvailable of /proc/meminfo, 0 (unknown) where
// there is none.
func Profile() pluginapi.DeviceProfile {
	total, free := machineMemory()
	return pluginapi.DeviceProfile{
		MaxStorageBufferBindingSize: maxBindingBytes,
		MaxInvocationsPerWorkgroup:  1024,
		HasSharedMemory:             true,
		SupportsF16:                 true, // the interpreter runs all of IR v1.2
		SupportsBF16:                true,
		TimingQuality:               pluginapi.HostOnly,
		MemBWStatus:                 pluginapi.BandwidthUnmeasured,
		MemoryBytes:                 total,
		MemoryFreeBytes:             free,
	}
}

// Describe reports cpu-ref: a dispatching reference oracle without precedence,
// with one always-available adapter.
func (b *Backend) Describe(context.Context) (*pluginapi.Description, error) {
	return &pluginapi.Description{
		ID:              ID,
		Version:         Version,
		ReferenceOracle: true,
		Dispatches:      true,
		Features:        []string{"ir.v1", "ir.v1.1", "ir.v1.2", "shared", "atomics", "barrier"}, // all of IR v1.2
		Adapters: []pluginapi.Adapter{{
			Index:     0,
			Name:      AdapterName,
			Available: true,
			Profile:   Profile(),
			Identity: pluginapi.DeviceIdentity{
				Vendor:        "kiln",
				Device:        AdapterName,
				DriverVersion: Version,
				DeviceType:    "cpu",
			},
		}},
	}, nil
}

func checkAdapter(adapter int) error {
	if adapter != 0 {
		return pluginapi.Rejected("cpu-ref has no adapter %d. Fix: use adapter 0 (cpu-ref:0)", adapter)
	}
	return nil
}

// Open accepts adapter 0, which needs no preparation.
func (b *Backend) Open(_ context.Context, adapter int) error { return checkAdapter(adapter) }

// Compile compiles the program with the interpreter. It produces no blob and
// ignores a cached one: compiling is cheaper than any cache. Every compile failure
// is a RejectedError.
func (b *Backend) Compile(_ context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	if err := checkAdapter(req.Adapter); err != nil {
		return nil, err
	}
	start := time.Now()
	k, err := interp.Compile(req.Program, interp.Options{WorkgroupSize: req.WorkgroupSize, Spec: req.Spec})
	if err != nil {
		return nil, pluginapi.Rejected("%w", err)
	}
	nanos := time.Since(start).Nanoseconds()
	return &pluginapi.CompileResult{Pipeline: b.kernels.Add(k), CompileNanos: max(nanos, 1)}, nil
}

func (b *Backend) kernel(pipeline uint64) (*interp.Kernel, error) {
	k, ok := b.kernels.Get(pipeline)
	if !ok {
		return nil, pluginapi.Rejected("cpu-ref has no pipeline %d (never compiled, or released). Fix: compile the program again", pipeline)
	}
	return k, nil
}

// Dispatch runs a compiled pipeline. It stops early when ctx ends and then returns
// an error wrapping ctx's; a launch the interpreter refuses (input sizes, grid) or
// a program that misbehaves at run time (a barrier not reached by the whole
// workgroup) is a RejectedError.
func (b *Backend) Dispatch(ctx context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	k, err := b.kernel(req.Pipeline)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	outs, err := k.Run(ctx, interp.Launch{Grid: req.Grid, Inputs: req.Inputs, OutputCounts: req.OutputCounts, Uniforms: req.Uniforms})
	nanos := time.Since(start).Nanoseconds()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, err
		}
		return nil, pluginapi.Rejected("%w", err)
	}
	return &pluginapi.DispatchResult{Outputs: outs, HostNanos: max(nanos, 1)}, nil
}

// Release forgets a pipeline; releasing an unknown one does nothing.
func (b *Backend) Release(_ context.Context, pipeline uint64) error {
	b.kernels.Remove(pipeline)
	return nil
}

// Close forgets every pipeline and buffer.
func (b *Backend) Close(context.Context) error {
	b.kernels.RemoveAll()
	b.buffers.RemoveAll()
	return nil
}

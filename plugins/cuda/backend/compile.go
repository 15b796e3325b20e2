package backend

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
)

// pipeline is a loaded kernel on one device.
type pipeline struct {
	d      *device
	prog   *ir.Program
	mod    *ptx.Module
	module driver.Module
	fn     driver.Function
	// args holds the kernel's parameter values; it is filled under d's stream,
	// as is tmaps, the tensor maps last encoded into it.
	args  *driver.Params
	tmaps tensorMaps
	// nc says the module reads its read buffers through the non-coherent path
	// (ld.global.nc), which a dispatch may use only when none of its read
	// bindings overlaps a writable one. safe is the kernel without it, for the
	// dispatches that alias, linked on the first such dispatch (under d's
	// stream) from the module emitted with opts but plain reads.
	nc         bool
	opts       ptx.Options
	safeModule driver.Module
	safe       driver.Function
	// use is held for reading by dispatches and for writing by destroy.
	use sync.RWMutex
}

// hold read-locks the pipeline for a dispatch: destroy waits until it is let go.
func (p *pipeline) hold() { p.use.RLock() }

// destroy waits for the pipeline's dispatches and unloads its module.
func (p *pipeline) destroy() {
	p.use.Lock()
	defer p.use.Unlock()
	_ = p.d.ctx.Do(func() error {
		if p.safeModule != 0 {
			_ = p.d.ctx.ModuleUnload(p.safeModule)
		}
		return p.d.ctx.ModuleUnload(p.module)
	})
	p.args.Free()
}

// Compile emits the program as PTX and loads its cubin on the adapter's device:
// the cubin of req.CachedBlob when the blob was made for this PTX, driver and
// device and is intact, otherwise one the driver's JIT linker compiles now. The
// blob returned is the cubin behind a header (see blobHeader).
func (b *Backend) Compile(ctx context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	b.life.RLock()
	defer b.life.RUnlock()
	if err := gpukit.CompileContext(ctx, ID, req); err != nil {
		return nil, err
	}
	start := time.Now()
	a, d, err := b.deviceAt(req.Adapter)
	if err != nil {
		return nil, err
	}
	if err := d.checkLost(); err != nil {
		return nil, err
	}
	p := req.Program
	wg, err := checkLimits(p, req.WorkgroupSize, a.lim)
	if err != nil {
		return nil, err
	}
	if err := checkCapabilities(p, a.info.Profile, a.index, a.info.Name); err != nil {
		return nil, err
	}
	// The module a dispatch runs unless its bindings alias (see pipeline.nc); it
	// is the one whose cubin the host caches.
	opts := emitOptions(a, req.Spec, wg)
	m, err := ptx.Emit(p, opts)
	if err != nil {
		return nil, pluginapi.Rejected("cuda: %w", err)
	}
	pl, blob, err := d.load(p, m, req.CachedBlob)
	if err != nil {
		return nil, err
	}
	pl.opts, pl.nc = opts, strings.Contains(m.Text, "ld.global.nc")
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.adapters.Closed() {
		pl.destroy()
		return nil, errClosed
	}
	return &pluginapi.CompileResult{Pipeline: b.pipelines.Add(pl), Blob: blob, CompileNanos: time.Since(start).Nanoseconds()}, nil
}

// emitOptions are the options of the module a pipeline of adapter a runs with
// the parameter values spec at workgroup size wg: reads through the
// non-coherent path (see pipeline.nc), dynamic shared memory up to the device's
// opt-in limit.
func emitOptions(a *adapter, spec ir.SpecMap, wg [3]uint32) ptx.Options {
	return ptx.Options{Target: a.target, Spec: spec, WorkgroupSize: wg, NonCoherentReads: true, MaxDynamicSharedBytes: a.maxDynamicShared}
}

// load makes a pipeline of module m on d, from the cubin in cached when it is
// usable and from a fresh JIT link otherwise, and returns it with its blob.
func (d *device) load(p *ir.Program, m *ptx.Module, cached []byte) (*pipeline, []byte, error) {
	a := d.a
	pl := &pipeline{d: d, prog: p, mod: m}
	var blob []byte
	err := d.ctx.Do(func() error {
		if cubin := usableBlob(cached, a.driverVersion, a.lim, m.Text); cubin != nil {
			if module, err := d.ctx.ModuleLoadData(cubin); err == nil {
				pl.module, blob = module, cached
			}
		}
		if pl.module == 0 {
			cubin, err := d.ctx.Link(m.Text)
			if err != nil {
				return linkFailure(d, p, err)
			}
			if pl.module, err = d.ctx.ModuleLoadData(cubin); err != nil {
				return d.fail(fmt.Sprintf("loading the cubin of program %q", p.Name), err)
			}
			blob = encodeBlob(a.driverVersion, a.lim, m.Text, cubin)
		}
		var err error
		if pl.fn, err = d.ctx.ModuleFunction(pl.module, m.Entry); err != nil {
			_ = d.ctx.ModuleUnload(pl.module)
			return d.fail(fmt.Sprintf("finding the kernel of program %q", p.Name), err)
		}
		if err := raiseDynamicShared(d.ctx, pl.fn, m); err != nil {
			_ = d.ctx.ModuleUnload(pl.module)
			return d.fail(fmt.Sprintf("allowing the kernel of program %q %d bytes of dynamic shared memory", p.Name, m.DynamicSharedBytes), err)
		}
		maxThreads, err := d.ctx.FunctionAttribute(pl.fn, driver.FuncMaxThreadsPerBlock)
		wg := m.WorkgroupSize
		if n := uint64(wg[0]) * uint64(wg[1]) * uint64(wg[2]); err == nil && uint64(maxThreads) < n {
			_ = d.ctx.ModuleUnload(pl.module)
			return pluginapi.Rejected("cuda: program %q needs too many registers for a workgroup of %d invocations on adapter %d (%s), which runs at most %d. Fix: use a workgroup of at most %d invocations",
				p.Name, n, a.index, a.info.Name, maxThreads, maxThreads)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	pl.args = driver.NewParamsSized(paramSizes(m))
	return pl, blob, nil
}

// loadSafe links and loads the pipeline's kernel with plain reads, once. It must
// run inside d.ctx.Do with the stream held.
func (p *pipeline) loadSafe() error {
	if p.safe != 0 {
		return nil
	}
	d := p.d
	opts := p.opts
	opts.NonCoherentReads = false
	m, err := ptx.Emit(p.prog, opts)
	if err != nil {
		return pluginapi.Rejected("cuda: %w", err)
	}
	cubin, err := d.ctx.Link(m.Text)
	if err != nil {
		return linkFailure(d, p.prog, err)
	}
	module, err := d.ctx.ModuleLoadData(cubin)
	if err != nil {
		return d.fail(fmt.Sprintf("loading the cubin of program %q", p.prog.Name), err)
	}
	fn, err := d.ctx.ModuleFunction(module, m.Entry)
	if err != nil {
		_ = d.ctx.ModuleUnload(module)
		return d.fail(fmt.Sprintf("finding the kernel of program %q", p.prog.Name), err)
	}
	if err := raiseDynamicShared(d.ctx, fn, m); err != nil {
		_ = d.ctx.ModuleUnload(module)
		return d.fail(fmt.Sprintf("allowing the kernel of program %q %d bytes of dynamic shared memory", p.prog.Name, m.DynamicSharedBytes), err)
	}
	wg := m.WorkgroupSize
	if maxThreads, err := d.ctx.FunctionAttribute(fn, driver.FuncMaxThreadsPerBlock); err == nil && uint64(maxThreads) < uint64(wg[0])*uint64(wg[1])*uint64(wg[2]) {
		_ = d.ctx.ModuleUnload(module)
		return pluginapi.Rejected("cuda: program %q, with a read binding aliasing a written one, needs too many registers for a workgroup of %v on adapter %d, which runs at most %d. Fix: bind separate buffers, or use a smaller workgroup",
			p.prog.Name, wg, d.a.index, maxThreads)
	}
	p.safeModule, p.safe = module, fn
	return nil
}

// attributeSetter sets a kernel's attributes: a *driver.Context.
type attributeSetter interface {
	SetFunctionAttribute(f driver.Function, a driver.FuncAttribute, value int) error
}

// raiseDynamicShared lets fn, the kernel of m, launch with m's dynamic shared
// memory: over 48 KiB a launch fails unless the function's
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES was raised first. Every launch
// of a pipeline passes m.DynamicSharedBytes. A module without dynamic shared
// memory sets nothing.
func raiseDynamicShared(c attributeSetter, fn driver.Function, m *ptx.Module) error {
	if m.DynamicSharedBytes == 0 {
		return nil
	}
	return c.SetFunctionAttribute(fn, driver.FuncMaxDynamicSharedSizeBytes, int(m.DynamicSharedBytes))
}

// linkFailure explains a JIT link that failed: a driver too old for the PTX is
// an unusable adapter, anything else a device error carrying the linker's log.
func linkFailure(d *device, p *ir.Program, err error) error {
	var e *driver.Error
	if errors.As(err, &e) && e.Result == driver.ErrUnsupportedPTXVersion {
		return pluginapi.Unavailable("cuda adapter %d (%s): the driver's JIT does not accept PTX ISA %s: %v. Fix: update the NVIDIA driver to R450 (CUDA 11.0) or newer",
			d.a.index, d.a.info.Name, ptx.ISAVersion, err)
	}
	return d.fail(fmt.Sprintf("compiling program %q (PTX to cubin)", p.Name), err)
}

// A cached blob is a header followed by the cubin:
//
//	magic "KILNCUBN", u32 format version, u32 driver version (cuDriverGetVersion),
//	u32 compute capability major, u32 minor, 32-byte SHA-256 of the PTX text,
//	u64 cubin length, 32-byte SHA-256 of the cubin
//
// all little-endian. A blob is used only when every field matches this driver,
// device and PTX and the cubin's digest is right, so a blob from another driver
// or device, a stale one or a corrupted one is ignored and the PTX compiled
// again.
const (
	blobMagic   = "KILNCUBN"
	blobFormat  = 1
	blobHeader  = 8 + 4 + 4 + 4 + 4 + 32 + 8 + 32
	blobDigests = 8 + 4 + 4 + 4 + 4 // offset of the PTX digest
)

// encodeBlob puts the header before cubin.
func encodeBlob(driverVersion int, l limits, ptxText string, cubin []byte) []byte {
	out := make([]byte, 0, blobHeader+len(cubin))
	out = append(out, blobMagic...)
	out = binary.LittleEndian.AppendUint32(out, blobFormat)
	out = binary.LittleEndian.AppendUint32(out, uint32(driverVersion))
	out = binary.LittleEndian.AppendUint32(out, uint32(l.ccMajor))
	out = binary.LittleEndian.AppendUint32(out, uint32(l.ccMinor))
	ptxSum := sha256.Sum256([]byte(ptxText))
	out = append(out, ptxSum[:]...)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(cubin)))
	cubinSum := sha256.Sum256(cubin)
	out = append(out, cubinSum[:]...)
	return append(out, cubin...)
}

// usableBlob returns the cubin of blob when its header names this driver version,
// compute capability and PTX text and the cubin is intact; nil otherwise.
func usableBlob(blob []byte, driverVersion int, l limits, ptxText string) []byte {
	if len(blob) < blobHeader || string(blob[:8]) != blobMagic {
		return nil
	}
	le := binary.LittleEndian
	if le.Uint32(blob[8:]) != blobFormat || le.Uint32(blob[12:]) != uint32(driverVersion) ||
		le.Uint32(blob[16:]) != uint32(l.ccMajor) || le.Uint32(blob[20:]) != uint32(l.ccMinor) {
		return nil
	}
	ptxSum := sha256.Sum256([]byte(ptxText))
	if !bytes.Equal(blob[blobDigests:blobDigests+32], ptxSum[:]) {
		return nil
	}
	n := le.Uint64(blob[blobDigests+32:])
	cubin := blob[blobHeader:]
	if n == 0 || n != uint64(len(cubin)) {
		return nil
	}
	cubinSum := sha256.Sum256(cubin)
	if !bytes.Equal(blob[blobDigests+40:blobHeader], cubinSum[:]) {
		return nil
	}
	return cubin
}

// checkCapabilities rejects a program that needs what the adapter's profile
// lacks: f16 arithmetic and storage (SupportsF16) for an f16 buffer, shared
// array, matrix, local or value, bf16 storage (SupportsBF16) for a bf16 one.
func checkCapabilities(p *ir.Program, prof pluginapi.DeviceProfile, index int, name string) error {
	for _, need := range []struct {
		t    ir.Type
		has  bool
		what string
	}{{ir.F16, prof.SupportsF16, "f16 arithmetic and storage"}, {ir.BF16, prof.SupportsBF16, "bf16 storage"}} {
		if !need.has && usesType(p, need.t) {
			return pluginapi.Rejected("cuda: program %q uses %s, which adapter %d (%s) does not run. Fix: run it on a device of compute capability %s or later, or on another backend",
				p.Name, need.what, index, name, map[ir.Type]string{ir.F16: "5.3", ir.BF16: "7.0"}[need.t])
		}
	}
	return nil
}

// usesType reports whether a buffer, shared array, matrix, var, literal or cast
// of p has type t.
func usesType(p *ir.Program, t ir.Type) bool {
	for _, b := range p.Buffers {
		if b.Type == t {
			return true
		}
	}
	for _, s := range p.Shared {
		if s.Type == t {
			return true
		}
	}
	for _, m := range p.Matrices {
		if m.Type == t {
			return true
		}
	}
	found := false
	ir.Inspect(p.Body, func(n any) bool {
		switch x := n.(type) {
		case ir.VarStmt:
			found = found || x.Type == t
		case ir.Literal:
			found = found || x.Type == t
		case ir.CastExpr:
			found = found || x.To == t
		}
		return !found
	})
	return found
}

// checkLimits checks the program, with the workgroup override, against the
// device's limits (the SDK checked the rest: pluginapi.CheckCompile). It
// returns the workgroup size the pipeline runs with.
func checkLimits(p *ir.Program, override [3]uint32, lim limits) ([3]uint32, error) {
	return gpukit.CheckLimits(ID, p, override, gpukit.ProgramLimits{
		Workgroup: lim.maxBlock, WorkgroupName: "maximum block dimensions",
		Invocations: lim.maxThreadsPerBlock, InvocationsText: "%d threads per block",
		SharedBytes: lim.sharedPerBlock, SharedText: "%d per block",
	})
}

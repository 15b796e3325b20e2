package pluginapi

import (
	"context"
	"fmt"
	"strings"
	"unsafe"
)

// The SDK grows by optional interfaces, as database/sql/driver does: Backend is
// the core every plugin implements, and each capability added later is an
// interface of its own that a backend may also implement. Serve finds them with
// type assertions; for a missing one the plugin answers "unimplemented" and the
// host adapts (see docs/design.md, "Protocol v2: buffers, submits, shared
// memory, fast path"). A plugin built against an older SDK keeps working.

// Buffers is implemented by a backend that keeps buffers on its device (protocol
// 2), with [Submitter]. Without them the host keeps buffers in its own memory and
// runs every dispatch through [Backend.Dispatch] with the bytes inline.
//
// Buffer handles are the backend's; the SDK keeps a table of each handle's size
// and checks every offset and size against it before a backend sees a request, so
// WriteBuffer, ReadBuffer and Submitter.Submit only ever get ranges that lie inside
// their buffers. A buffer starts zero-filled.
type Buffers interface {
	// AllocBuffer creates a buffer of req.Size bytes on an adapter.
	AllocBuffer(ctx context.Context, req *AllocRequest) (*AllocResult, error)
	// FreeBuffer frees a buffer. The backend must not touch its memory (nor
	// AllocRequest.Shared) afterwards.
	FreeBuffer(ctx context.Context, buffer uint64) error
	// WriteBuffer copies src into the buffer at offset. src is only valid during
	// the call.
	WriteBuffer(ctx context.Context, buffer, offset uint64, src []byte) error
	// ReadBuffer fills dst from the buffer at offset. dst is only valid during the
	// call.
	ReadBuffer(ctx context.Context, buffer, offset uint64, dst []byte) error
}

// Submitter is implemented by a backend that runs batches of commands over its
// buffers (protocol 2); it comes with Buffers. Without both, the host runs each
// command of a batch itself, dispatches through Backend.Dispatch.
type Submitter interface {
	// Submit runs req.Commands in order, with the barriers their dependencies
	// need (a command sees every write of the commands before it), and returns
	// when all are done. The first failing command ends the batch.
	Submit(ctx context.Context, req *SubmitRequest) (*SubmitResult, error)
}

// Artifacts is implemented by a backend that can show the device code a program
// compiles to, for `kiln compile`. Without it, the host reports the backend as
// having no artifacts.
type Artifacts interface {
	// Artifact compiles req.Program and returns its device code of req.Kind
	// ("spirv", "ptx"). An unknown kind is a RejectedError.
	Artifact(ctx context.Context, req *ArtifactRequest) (*Artifact, error)
}

// HealthChecker is implemented by a backend that can tell whether its devices
// still work (device lost, driver reset). Without it the host knows only whether
// the process answers.
type HealthChecker interface {
	// Health returns nil when every opened adapter works, else a DeviceError or
	// UnavailableError saying what broke.
	Health(ctx context.Context) error
}

// Segments is implemented by a backend that wants to know the shared memory of
// the data plane (Linux): the memfd segments the host and the plugin both map,
// which hold every byte the host moves (staged inputs and outputs of Dispatch,
// the src and dst of WriteBuffer and ReadBuffer) and the memory of mapped
// buffers ([AllocRequest.Shared]). A GPU backend registers each segment with its
// driver (cuMemHostRegister, VK_EXT_external_memory_host) so the device copies
// from and to it directly; [ViewOffset] tells whether a view lies in a segment
// and where.
//
// The SDK calls AttachSegment after it maps a segment and before any view of it
// reaches the backend, and DetachSegment once nothing the SDK handed the backend
// uses it any more (a staging segment the host detaches; a mapped buffer's
// segment after FreeBuffer, or after an AllocBuffer that did not keep it), before
// it unmaps the memory. Notices come one at a time, in order with the requests
// that use the segment (for a [ConcurrentAdapters] backend they may run while
// other requests run). mem starts on a page boundary and its length is a whole number of
// pages; segment ids are never 0 and are not reused while the plugin runs.
// When the data plane closes (the host went away or closed it), the staging
// segments are detached, which may happen after [Backend.Close]: a backend
// ignores an id it no longer knows. Segments of buffers still mapped then stay
// attached until the process exits. Without a data plane (gRPC fallback, other platforms,
// the in-process Backend) no notices come.
type Segments interface {
	// AttachSegment announces segment id and its memory, valid until
	// DetachSegment(id) returns. An error fails the host's request that brought
	// the segment; a backend that can work without registering returns nil.
	AttachSegment(ctx context.Context, id uint64, mem []byte) error
	// DetachSegment ends segment id: the backend unregisters it and must not
	// touch its memory afterwards. The SDK unmaps it whatever the error.
	DetachSegment(ctx context.Context, id uint64) error
}

// ViewOffset reports whether view lies wholly within mem (an attached segment)
// and at which byte offset; false for an empty view.
func ViewOffset(mem, view []byte) (offset int, ok bool) {
	if len(view) == 0 || len(mem) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(view)))
	if at < base || at-base > uintptr(len(mem)) || uintptr(len(view)) > uintptr(len(mem))-(at-base) {
		return 0, false
	}
	return int(at - base), true
}

// Capabilities says which optional interfaces a backend implements, and, for a
// plugin process seen from the host, which protocol and data plane it speaks.
type Capabilities struct {
	// Protocol is the negotiated wire protocol: 1 or 2; 0 for a backend used in
	// process.
	Protocol int
	// Buffers, Submit, Artifacts and Health report the optional interfaces.
	Buffers, Submit, Artifacts, Health bool
	// PeerCopy reports [PeerCopier]: copies between the plugin's buffers, on
	// one adapter or across two, without the bytes leaving the plugin. The host
	// sends them on the data plane only; without it (or without a data plane)
	// it copies through its own memory.
	PeerCopy bool
	// ConcurrentAdapters reports [ConcurrentAdapters] (returning true): the
	// calls of different adapters may run at the same time.
	ConcurrentAdapters bool
	// PipelinedDispatch reports [DispatchStarter] on a ConcurrentAdapters
	// backend: its data plane starts a v1 dispatch in the queue of the
	// pipeline's adapter without waiting for it, so the host sends a small v1
	// dispatch there as one request rather than a write, a submit and a read
	// of its scratch buffers.
	PipelinedDispatch bool
	// Spans reports that the plugin's SDK times the requests it serves on the
	// data plane and ships the phases with their completions when asked
	// ([SpansEnv]); false for a backend used in process and a plugin built
	// before spans.
	Spans bool
	// SharedMemory reports whether buffer bytes and submits travel through the
	// shared-memory data plane (fixed frames in shared-memory rings, memfd
	// segments mapped by both processes) instead of gRPC messages.
	SharedMemory bool
	// DataPlane says why SharedMemory is off, when it is.
	DataPlane string
}

// CapabilitiesOf reports what b implements, found with type assertions as
// Serve finds it. (The host asks a plugin process instead: what the plugin
// reported when described, with the protocol and data plane of its connection.)
func CapabilitiesOf(b Backend) Capabilities {
	_, buffers := b.(Buffers)
	_, submit := b.(Submitter)
	_, artifacts := b.(Artifacts)
	_, health := b.(HealthChecker)
	_, peer := b.(PeerCopier)
	return Capabilities{Buffers: buffers, Submit: submit && buffers, Artifacts: artifacts, Health: health, PeerCopy: peer && buffers, ConcurrentAdapters: concurrentAdapters(b), PipelinedDispatch: pipelinedDispatch(b)}
}

// pipelinedDispatch reports whether b starts dispatches on the data plane: a
// [DispatchStarter] that is ConcurrentAdapters.
func pipelinedDispatch(b Backend) bool {
	_, ok := b.(DispatchStarter)
	return ok && concurrentAdapters(b)
}

// concurrentAdapters reports whether b implements ConcurrentAdapters and
// returns true.
func concurrentAdapters(b Backend) bool {
	c, ok := b.(ConcurrentAdapters)
	return ok && c.ConcurrentAdapters()
}

// Resident reports whether buffers live in the plugin: the backend implements
// both Buffers and Submitter over protocol 2 (or in process).
func (c Capabilities) Resident() bool { return c.Buffers && c.Submit && c.Protocol != 1 }

// Missing lists, for each optional interface the backend lacks, what the host
// does instead, in words for `kiln doctor`.
func (c Capabilities) Missing() []string {
	var out []string
	if c.Protocol == 1 {
		return []string{"protocol 1 plugin: no optional interfaces; buffers are kept by the host and every dispatch sends its bytes inline over gRPC. Fix: rebuild the plugin against the current pluginapi"}
	}
	switch {
	case !c.Buffers:
		out = append(out, "no pluginapi.Buffers: buffers are kept by the host and every dispatch sends its bytes inline")
	case !c.Submit:
		out = append(out, "no pluginapi.Submitter: buffers are kept by the host and every dispatch sends its bytes inline")
	}
	if !c.Artifacts {
		out = append(out, "no pluginapi.Artifacts: kiln compile cannot show its device code")
	}
	if !c.Health {
		out = append(out, "no pluginapi.HealthChecker: only process liveness is known")
	}
	if c.Protocol == 2 && !c.SharedMemory {
		out = append(out, "no shared-memory data plane ("+c.DataPlane+"): buffer bytes and submits travel as gRPC messages")
	}
	return out
}

// String is a one-line summary: "protocol 2: buffers, submit, shared memory".
func (c Capabilities) String() string {
	var have []string
	for _, f := range []struct {
		on   bool
		name string
	}{{c.Buffers, "buffers"}, {c.Submit, "submit"}, {c.Artifacts, "artifacts"}, {c.Health, "health"}, {c.PeerCopy, "peer copy"}, {c.ConcurrentAdapters, "concurrent adapters"}, {c.PipelinedDispatch, "pipelined dispatch"}, {c.SharedMemory, "shared memory"}, {c.Spans, "spans"}} {
		if f.on {
			have = append(have, f.name)
		}
	}
	if len(have) == 0 {
		have = append(have, "core only")
	}
	return fmt.Sprintf("protocol %d: %s", c.Protocol, strings.Join(have, ", "))
}

// UnimplementedError says a plugin does not implement an optional interface.
// The host adapts where it can (see Capabilities.Missing) and returns this error
// where it cannot (artifacts, health).
type UnimplementedError struct {
	// Interface names the missing interface ("pluginapi.Artifacts").
	Interface string
	// Backend is the backend's id, when known.
	Backend string
}

func (e *UnimplementedError) Error() string {
	who := "the plugin"
	if e.Backend != "" {
		who = "backend " + e.Backend
	}
	return fmt.Sprintf("%s does not implement %s. Fix: use a backend that implements it, or ask the plugin's author to implement it", who, e.Interface)
}

// ConcurrentAdapters is implemented by a backend whose calls for different
// adapters may run at the same time. On the data plane the SDK then keeps one
// ordered queue per adapter: the calls for one adapter (AllocBuffer, the
// WriteBuffer, ReadBuffer and FreeBuffer of its buffers, Submit) still come one
// at a time in the order the host sent them, while calls for other adapters,
// Dispatch, and the [Segments] notices of staging segments run concurrently
// with them (a [DispatchStarter]'s dispatches go to their pipeline's adapter
// queue instead). A backend without it (or whose method returns false) gets every
// data-plane call one at a time in the host's order, as a backend written for
// serial calls expects; the SDK still reads the host's next requests while one
// runs. Either way, calls over gRPC (Describe, Compile, Release, and every
// call without a data plane) may come concurrently with anything, as [Backend]
// says; completions go back in the order calls finish, with no order across
// adapters (the host's callers order them by waiting); and each queue holds at
// most 64 requests: when one is full the SDK stops reading until it has room,
// so the host's callers wait and nothing is dropped. See docs/design.md,
// "Ordering on the data plane".
type ConcurrentAdapters interface {
	// ConcurrentAdapters reports whether calls for different adapters may run
	// concurrently; it is asked when the plugin is described (for the host's
	// Capabilities) and once more when the data plane opens.
	ConcurrentAdapters() bool
}

// PeerCopier is implemented by a backend with [Buffers] that copies between its
// own buffers without the bytes leaving the plugin: across two adapters (CUDA
// peer access, or staging in the plugin's pinned memory) or within one. The
// host's CopyBuffer (package host) sends such a copy on the data plane as one request;
// without PeerCopier, without a data plane, or between buffers of two plugins,
// the host reads the source and writes the destination through its own memory
// in bounded chunks. See docs/design.md, "Copies between adapters".
//
// The SDK has checked both ranges against its table: they lie inside live
// buffers, have the same size and do not overlap when they share a buffer. On a
// [ConcurrentAdapters] backend the call comes in the destination adapter's
// queue, while calls of the source's adapter may run; the host sends it only
// after the calls it depends on are done on both. It returns when the copy is
// complete. A backend that cannot copy between a pair of adapters returns an
// [*UnimplementedError], and the host copies through its memory instead.
type PeerCopier interface {
	// PeerCopy copies src's bytes into dst (same size).
	PeerCopy(ctx context.Context, dst, src BufferRange) error
}

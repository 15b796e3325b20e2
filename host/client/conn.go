package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kiln-dev/kiln/internal/wire"
	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// DataPlaneEnv names the environment variable that, set to "grpc" in the host's
// environment, keeps every connection on gRPC (no shared-memory data plane).
const DataPlaneEnv = "KILN_DATA_PLANE"

// LimitError says a request exceeds a limit of the transport it would travel on;
// nothing was sent.
type LimitError struct {
	// What is the request ("submit of 5000 commands").
	What string
	// Size and Limit are in bytes.
	Size, Limit uint64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s needs %d bytes on the wire, more than the transport's limit of %d. Fix: split it into smaller requests", e.What, e.Size, e.Limit)
}

// ResultError says a plugin answered with a result the host did not ask for (an
// output of the wrong size, the wrong number of outputs); the host read none of
// it.
type ResultError struct{ Detail string }

func (e *ResultError) Error() string { return e.Detail }

// ProtocolError says a plugin broke the data plane's protocol (a malformed or
// unexpected frame). The data plane is closed; the host must stop the plugin.
type ProtocolError struct{ Detail string }

func (e *ProtocolError) Error() string {
	return "kiln plugin broke the data plane protocol: " + e.Detail + ". Fix: report this to the plugin's author"
}

// rejected returns a check's error as a rejection; nil stays nil.
func rejected(err error) error {
	if err == nil {
		return nil
	}
	return &pluginapi.RejectedError{Err: err}
}

// usageMask holds every usage bit the SDK defines.
const usageMask = pluginapi.UsageStorage | pluginapi.UsageCopySrc | pluginapi.UsageCopyDst | pluginapi.UsageMap

// errPlaneClosed reports a data plane the host closed on purpose.
var errPlaneClosed = errors.New("kiln data plane is closed")

// cancelTimeout bounds the gRPC call that cancels a data-plane request.
const cancelTimeout = 5 * time.Second

// v2client is the protocol-2 half of the host-side client.
type v2client struct {
	rpc kilnpb.DeviceClient

	mu     sync.Mutex
	caps   pluginapi.Capabilities
	id     string
	plane  *plane
	table  wire.Table
	mapped map[uint64]*wire.Segment
	// tail is closed when the last gRPC submit sent is done, so that gRPC
	// submits run in order.
	tail chan struct{}
}

func newV2Client(rpc kilnpb.DeviceClient) *v2client {
	return &v2client{rpc: rpc, caps: pluginapi.Capabilities{Protocol: 2}, table: wire.Table{}, mapped: map[uint64]*wire.Segment{}}
}

// describe is Describe on protocol 2: the description, the capabilities, and
// (the first time) the data plane.
func (v *v2client) describe(ctx context.Context) (*pluginapi.Description, error) {
	r, err := v.rpc.Describe(ctx, &kilnpb.DescribeRequest{})
	if err != nil {
		return nil, fromStatus(ctx, "Describe", err)
	}
	d := descriptionFromProto(r.GetDescription())
	c := r.GetCapabilities()
	v.mu.Lock()
	v.id = d.ID
	v.caps.Buffers, v.caps.Submit = c.GetBuffers(), c.GetBuffers() && c.GetSubmit()
	v.caps.Artifacts, v.caps.Health = c.GetArtifacts(), c.GetHealth()
	v.caps.PeerCopy = c.GetBuffers() && c.GetPeerCopy()
	v.caps.ConcurrentAdapters, v.caps.Spans = c.GetConcurrentAdapters(), c.GetSpans()
	v.caps.PipelinedDispatch = c.GetConcurrentAdapters() && c.GetPipelinedDispatch()
	open := v.plane != nil || v.caps.DataPlane != ""
	v.mu.Unlock()
	if !open {
		v.openPlane(ctx)
	}
	return d, nil
}

// openPlane tries to start the shared-memory data plane and records why not.
func (v *v2client) openPlane(ctx context.Context) {
	why := ""
	var pl *plane
	if os.Getenv(DataPlaneEnv) == "grpc" {
		why = DataPlaneEnv + "=grpc"
	} else if r, err := v.rpc.OpenDataPlane(ctx, &kilnpb.OpenDataPlaneRequest{}); err != nil {
		why = "the plugin could not open it: " + status.Convert(err).Message()
	} else if pl, err = dialPlane(ctx, r.GetSocket(), r.GetToken(), v.cancel); err != nil {
		why = err.Error()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.plane = pl
	v.caps.SharedMemory = pl != nil
	v.caps.DataPlane = why
}

// cancel asks the plugin to cancel a data-plane request.
func (v *v2client) cancel(seq uint64) {
	ctx, stop := context.WithTimeout(context.Background(), cancelTimeout)
	defer stop()
	_, _ = v.rpc.Cancel(ctx, &kilnpb.CancelRequest{Seq: seq}) // best effort: the request may be done
}

// status converts a Device call's error; UNIMPLEMENTED names the interface.
func (v *v2client) status(ctx context.Context, method, iface string, err error) error {
	if status.Code(err) == codes.Unimplemented {
		return &pluginapi.UnimplementedError{Interface: iface, Backend: v.backendID()}
	}
	return callError(ctx, method, err)
}

func (v *v2client) backendID() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.id
}

func (v *v2client) snapshot() (pluginapi.Capabilities, *plane) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.caps, v.plane
}

// closePlane ends the data plane from the host's side.
func (v *v2client) closePlane() {
	v.mu.Lock()
	pl := v.plane
	v.mu.Unlock()
	if pl != nil {
		pl.close()
	}
}

// Capabilities reports what the plugin declared when it was described (its
// optional interfaces: resident buffers and submits, artifacts, health, peer
// copies, concurrent adapters; whether its SDK ships spans), with the
// connection's protocol and data plane. The host asks it
// before it uses an optional feature; before the first Describe it knows only
// the protocol.
func (c *Conn) Capabilities() pluginapi.Capabilities {
	if c.v2 == nil {
		return pluginapi.Capabilities{Protocol: 1}
	}
	caps, _ := c.v2.snapshot()
	caps.Spans = caps.Spans && caps.SharedMemory // spans come on the data plane only
	return caps
}

// need returns the v2 client when the plugin implements the interface.
func (c *Conn) need(iface string, has func(pluginapi.Capabilities) bool) (*v2client, error) {
	if c.v2 == nil {
		return nil, &pluginapi.UnimplementedError{Interface: iface}
	}
	caps, _ := c.v2.snapshot()
	if !has(caps) {
		return nil, &pluginapi.UnimplementedError{Interface: iface, Backend: c.v2.backendID()}
	}
	return c.v2, nil
}

func hasBuffers(c pluginapi.Capabilities) bool { return c.Buffers }
func hasSubmit(c pluginapi.Capabilities) bool  { return c.Submit }

// AllocBuffer implements pluginapi.Buffers. With the data plane, a UsageMap buffer gets a
// shared segment the plugin may keep its contents in.
func (c *Conn) AllocBuffer(ctx context.Context, req *pluginapi.AllocRequest) (*pluginapi.AllocResult, error) {
	v, err := c.need("pluginapi.Buffers", hasBuffers)
	if err != nil {
		return nil, err
	}
	adapter, err := adapterIndex(req.Adapter)
	if err != nil {
		return nil, err
	}
	if req.Size > pluginapi.MaxBufferBytes {
		return nil, &LimitError{What: fmt.Sprintf("buffer of %d bytes", req.Size), Size: req.Size, Limit: pluginapi.MaxBufferBytes}
	}
	if req.Usage&^usageMask != 0 {
		return nil, pluginapi.Rejected("buffer usage %s has unknown bits. Fix: use the pluginapi.Usage constants", req.Usage)
	}
	_, pl := v.snapshot()
	var res *pluginapi.AllocResult
	var seg *wire.Segment
	if pl != nil {
		res, seg, err = allocOnPlane(ctx, pl, adapter, req)
	} else {
		var r *kilnpb.AllocBufferResponse
		r, err = v.rpc.AllocBuffer(ctx, &kilnpb.AllocBufferRequest{Adapter: adapter, Size: req.Size, Usage: uint32(req.Usage)})
		if err != nil {
			err = v.status(ctx, "AllocBuffer", "pluginapi.Buffers", err)
		} else {
			res = &pluginapi.AllocResult{Buffer: r.GetBuffer()}
		}
	}
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, live := v.table[res.Buffer]; live || res.Buffer == 0 {
		if seg != nil {
			pl.dropSegment(seg)
		}
		return nil, &ResultError{Detail: fmt.Sprintf("the plugin returned buffer handle %d, which is zero or already live", res.Buffer)}
	}
	v.table[res.Buffer] = req.Size
	if seg != nil {
		v.mapped[res.Buffer] = seg
	}
	return res, nil
}

// Lost returns the error that ended the connection's data plane — the plugin
// died (its socket closed) or broke the protocol — and nil while the plane is
// up or when the connection has none. Buffers of a lost connection are gone.
func (c *Conn) Lost() error {
	if c.v2 == nil {
		return nil
	}
	if _, pl := c.v2.snapshot(); pl != nil {
		return pl.closed()
	}
	return nil
}

// Stalled returns how long the data plane's request ring has been full without
// the plugin taking a request from it: the plugin stopped reading its requests
// (a backend method that blocks the requests queued behind it). It is 0 while
// the ring has room, and without a data plane. The host treats a plugin
// stalled for its hang timeout as hung.
func (c *Conn) Stalled() time.Duration {
	if c.v2 == nil {
		return 0
	}
	if _, pl := c.v2.snapshot(); pl != nil {
		return pl.stalled()
	}
	return 0
}

// Mapping returns the host's view of a buffer whose AllocResult was Mapped, nil
// for any other. It is valid until FreeBuffer; if the plugin dies, it keeps its
// address and, once the data plane has noticed (at the latest by the next call,
// which checks), reads zeros and keeps no writes. WriteBuffer and ReadBuffer of
// a mapped buffer copy in place after checking that the plugin's end of the
// data plane is still open.
func (c *Conn) Mapping(buffer uint64) []byte {
	if c.v2 == nil {
		return nil
	}
	c.v2.mu.Lock()
	defer c.v2.mu.Unlock()
	if s := c.v2.mapped[buffer]; s != nil {
		size := c.v2.table[buffer] // the segment may be longer: whole pages
		return s.Mem[:size:size]
	}
	return nil
}

// FreeBuffer implements pluginapi.Buffers. When the plugin is gone, the host's side of the
// buffer is released all the same and the connection's error returned.
func (c *Conn) FreeBuffer(ctx context.Context, buffer uint64) error {
	v, err := c.need("pluginapi.Buffers", hasBuffers)
	if err != nil {
		return err
	}
	v.mu.Lock()
	_, ok := v.table[buffer]
	seg := v.mapped[buffer]
	v.mu.Unlock()
	if !ok {
		return pluginapi.Rejected("free of buffer %d, which does not exist (never allocated, or freed). Fix: free each buffer once", buffer)
	}
	_, pl := v.snapshot()
	if pl != nil {
		_, err = pl.roundTrip(ctx, &wire.Request{Kind: wire.FrameFree, Buffer: buffer}, -1, 0)
	} else if _, err = v.rpc.FreeBuffer(ctx, &kilnpb.FreeBufferRequest{Buffer: buffer}); err != nil {
		err = v.status(ctx, "FreeBuffer", "pluginapi.Buffers", err)
	}
	gone := err == nil || status.Code(err) == codes.Unavailable || (pl != nil && pl.closed() != nil)
	if gone {
		v.mu.Lock()
		delete(v.table, buffer)
		delete(v.mapped, buffer)
		v.mu.Unlock()
		if seg != nil {
			pl.dropSegment(seg)
		}
	}
	return err
}

// checkRange checks a range against the host's table.
func (v *v2client) checkRange(what string, r pluginapi.BufferRange) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return rejected(v.table.CheckRange(what, wire.Range(r), 1))
}

// WriteBuffer implements pluginapi.Buffers: a mapped buffer is written in place, otherwise
// the bytes go through staging segments (data plane) or gRPC messages, in chunks.
func (c *Conn) WriteBuffer(ctx context.Context, buffer, offset uint64, src []byte) error {
	return c.transfer(ctx, wire.FrameWrite, buffer, offset, src)
}

// ReadBuffer implements pluginapi.Buffers, as WriteBuffer.
func (c *Conn) ReadBuffer(ctx context.Context, buffer, offset uint64, dst []byte) error {
	return c.transfer(ctx, wire.FrameRead, buffer, offset, dst)
}

func (c *Conn) transfer(ctx context.Context, kind wire.FrameKind, buffer, offset uint64, b []byte) error {
	v, err := c.need("pluginapi.Buffers", hasBuffers)
	if err != nil {
		return err
	}
	what := "write"
	if kind == wire.FrameRead {
		what = "read"
	}
	if err := v.checkRange(what, pluginapi.BufferRange{Buffer: buffer, Offset: offset, Size: uint64(len(b))}); err != nil {
		return err
	}
	if mem := c.Mapping(buffer); mem != nil {
		// The copy needs no call, so nothing else would notice a plugin that
		// died a moment ago: the plane checks its socket first.
		if _, pl := v.snapshot(); pl != nil {
			if err := pl.alive(); err != nil {
				return err
			}
		}
		if kind == wire.FrameWrite {
			copy(mem[offset:], b)
		} else {
			copy(b, mem[offset:])
		}
		return nil
	}
	_, pl := v.snapshot()
	for len(b) > 0 {
		n := min(len(b), wire.MaxChunkBytes)
		if pl != nil {
			err = transferOnPlane(ctx, pl, kind, buffer, offset, b[:n])
		} else {
			err = v.transferGRPC(ctx, kind, buffer, offset, b[:n])
		}
		if err != nil {
			return err
		}
		b, offset = b[n:], offset+uint64(n)
	}
	return nil
}

func (v *v2client) transferGRPC(ctx context.Context, kind wire.FrameKind, buffer, offset uint64, b []byte) error {
	if kind == wire.FrameWrite {
		if _, err := v.rpc.WriteBuffer(ctx, &kilnpb.WriteBufferRequest{Buffer: buffer, Offset: offset, Data: b}); err != nil {
			return v.status(ctx, "WriteBuffer", "pluginapi.Buffers", err)
		}
		return nil
	}
	rctx := WithReceiveLimit(ctx, len(b)+ResponseOverhead)
	r, err := v.rpc.ReadBuffer(rctx, &kilnpb.ReadBufferRequest{Buffer: buffer, Offset: offset, Size: uint64(len(b))}, callOptions(rctx)...)
	if err != nil {
		return v.status(ctx, "ReadBuffer", "pluginapi.Buffers", err)
	}
	if len(r.GetData()) != len(b) {
		return &ResultError{Detail: fmt.Sprintf("read of %d bytes returned %d", len(b), len(r.GetData()))}
	}
	copy(b, r.GetData())
	return nil
}

// PeerCopy implements pluginapi.PeerCopier: one copy frame on the data plane,
// both ranges checked against the host's table first. It is an
// *pluginapi.UnimplementedError when the plugin lacks it or there is no data plane (gRPC
// fallback), and the host copies through its memory then.
func (c *Conn) PeerCopy(ctx context.Context, dst, src pluginapi.BufferRange) error {
	v, err := c.need("pluginapi.PeerCopier", func(c pluginapi.Capabilities) bool { return c.PeerCopy && c.SharedMemory })
	if err != nil {
		return err
	}
	v.mu.Lock()
	err = rejected(v.table.CheckCopy("peer copy", wire.Range(dst), wire.Range(src)))
	v.mu.Unlock()
	if err != nil {
		return err
	}
	_, pl := v.snapshot()
	if pl == nil {
		return &pluginapi.UnimplementedError{Interface: "pluginapi.PeerCopier", Backend: v.backendID()}
	}
	_, err = pl.roundTrip(ctx, &wire.Request{Kind: wire.FrameCopy, Src: rangeToWire(src), Dst: rangeToWire(dst)}, -1, 0)
	return err
}

// Submit implements pluginapi.Submitter: SubmitAsync, then Wait.
func (c *Conn) Submit(ctx context.Context, req *pluginapi.SubmitRequest) (*pluginapi.SubmitResult, error) {
	p, err := c.SubmitAsync(ctx, req)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// SubmitAsync sends a batch and returns without waiting for it; batches run in
// the order they are sent. ctx ending before the batch completes cancels it.
// The batch is checked against the host's table of
// buffers before anything is sent.
func (c *Conn) SubmitAsync(ctx context.Context, req *pluginapi.SubmitRequest) (*Pending, error) {
	v, err := c.need("pluginapi.Submitter", hasSubmit)
	if err != nil {
		return nil, err
	}
	adapter, err := adapterIndex(req.Adapter)
	if err != nil {
		return nil, err
	}
	w, err := commandsToWire(req.Commands)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	err = rejected(v.table.CheckCommands(w, pluginapi.BindingAlign, pluginapi.ElementBytes))
	v.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if _, pl := v.snapshot(); pl != nil {
		r := &wire.Request{Kind: wire.FrameSubmit, Adapter: adapter, Commands: w}
		call, err := pl.send(ctx, r, -1, 0, nil)
		if err != nil {
			return nil, err
		}
		return &Pending{plane: pl, call: call}, nil
	}
	cmds, err := commandsToProto(req.Commands)
	if err != nil {
		return nil, err
	}
	msg := &kilnpb.SubmitRequest{Adapter: adapter, Commands: cmds}
	if size := uint64(proto.Size(msg)); size > pluginapi.MaxMessageBytes {
		return nil, &LimitError{What: fmt.Sprintf("submit of %d commands", len(req.Commands)), Size: size, Limit: pluginapi.MaxMessageBytes}
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p := &Pending{done: make(chan struct{}), stop: stop}
	v.mu.Lock()
	prev := v.tail
	v.tail = p.done
	v.mu.Unlock()
	unlink := context.AfterFunc(ctx, stop)
	go func() {
		defer close(p.done)
		defer unlink()
		if prev != nil {
			<-prev
		}
		r, err := v.rpc.Submit(rctx, msg)
		if err != nil {
			p.err = v.status(rctx, "Submit", "pluginapi.Submitter", err)
			return
		}
		p.res = &pluginapi.SubmitResult{HostNanos: r.GetHostNanos(), DeviceNanos: r.GetDeviceNanos()}
	}()
	return p, nil
}

// submitSize is a batch's frame size, for a LimitError.
func submitSize(cmds []wire.Command) uint64 {
	return uint64(wire.FrameHeaderBytes + 8 + wire.CommandsBytes(cmds))
}

// Pending is a submitted batch that may still be running (Conn.SubmitAsync).
type Pending struct {
	// data plane
	plane *plane
	call  *call
	// gRPC
	done chan struct{}
	stop context.CancelFunc

	mu       sync.Mutex
	finished bool
	res      *pluginapi.SubmitResult
	spans    []pluginapi.Span
	err      error
}

// Ready reports whether the batch has completed (or failed), so that Wait would
// not block.
func (p *Pending) Ready() bool {
	if !p.mu.TryLock() {
		return false // a Wait is running
	}
	defer p.mu.Unlock()
	if p.finished {
		return true
	}
	if p.plane != nil {
		return p.call.ready()
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WaitReady waits until the batch has completed (or failed), so that Ready
// reports true, or until ctx ends (ctx's error). Unlike Wait it takes no result
// and cancels nothing when ctx ends: it is for a caller that orders its own
// work after a batch another caller waits for.
func (p *Pending) WaitReady(ctx context.Context) error {
	if p.plane != nil {
		return p.plane.await(ctx, p.call)
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Spans returns the phases the plugin timed for the batch, once Wait returned:
// empty unless the plugin was started with pluginapi.SpansEnv and the batch went
// over the data plane.
func (p *Pending) Spans() []pluginapi.Span {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spans
}

// Wait returns the batch's result once it has run. If ctx ends first, the batch
// is cancelled and Wait returns ctx's error. Wait may be called more than once.
func (p *Pending) Wait(ctx context.Context) (*pluginapi.SubmitResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return p.res, p.err
	}
	if p.plane != nil {
		d, _, err := p.plane.wait(ctx, p.call)
		if err == nil {
			p.res = &pluginapi.SubmitResult{HostNanos: d.HostNanos, DeviceNanos: d.DeviceNanos}
			p.spans = spansFromWire(d.Spans)
		}
		p.finished, p.err = true, err
		return p.res, p.err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.stop()
		<-p.done
		if p.err == nil {
			p.res, p.err = nil, ctx.Err()
		}
	}
	p.finished = true
	return p.res, p.err
}

// DispatchResult is a dispatch's result, with the phases the plugin timed.
type DispatchResult struct {
	pluginapi.DispatchResult
	// Spans are the phases the plugin timed: empty unless the plugin was
	// started with pluginapi.SpansEnv and the dispatch went over the data plane.
	Spans []pluginapi.Span
}

// DispatchSized is Backend.Dispatch for a host that knows how many bytes each
// output has (outputs, in output order). With the data plane, inputs and
// outputs travel through shared memory, and an output of another size is
// refused unread (a *ResultError).
func (c *Conn) DispatchSized(ctx context.Context, req *pluginapi.DispatchRequest, outputs []int) (*DispatchResult, error) {
	var pl *plane
	if c.v2 != nil {
		_, pl = c.v2.snapshot()
	}
	if pl == nil {
		in, out := uint64(0), uint64(0)
		for _, b := range req.Inputs {
			in += uint64(len(b))
		}
		for _, n := range outputs {
			out += uint64(n)
		}
		const overhead = 1 << 10
		if in+overhead > pluginapi.MaxMessageBytes || out+overhead > pluginapi.MaxMessageBytes {
			return nil, &LimitError{What: fmt.Sprintf("dispatch with %d input and %d output bytes", in, out), Size: max(in, out) + overhead, Limit: pluginapi.MaxMessageBytes}
		}
		res, err := c.Dispatch(ctx, req)
		if err != nil {
			return nil, err
		}
		return &DispatchResult{DispatchResult: *res}, nil
	}
	return dispatchOnPlane(ctx, pl, req, outputs)
}

// Artifact implements pluginapi.Artifacts.
func (c *Conn) Artifact(ctx context.Context, req *pluginapi.ArtifactRequest) (*pluginapi.Artifact, error) {
	v, err := c.need("pluginapi.Artifacts", func(c pluginapi.Capabilities) bool { return c.Artifacts })
	if err != nil {
		return nil, err
	}
	idx, err := adapterIndex(req.Adapter)
	if err != nil {
		return nil, err
	}
	if req.Program == nil {
		return nil, pluginapi.Rejected("artifact request has no program. Fix: set pluginapi.ArtifactRequest.Program")
	}
	prog, err := ir.Encode(req.Program)
	if err != nil {
		return nil, pluginapi.Rejected("encode program %q: %w", req.Program.Name, err)
	}
	r, err := v.rpc.Artifact(ctx, &kilnpb.ArtifactRequest{
		Adapter: idx, Program: prog, Spec: specToProto(req.Spec),
		WorkgroupX: req.WorkgroupSize[0], WorkgroupY: req.WorkgroupSize[1], WorkgroupZ: req.WorkgroupSize[2],
		Kind: req.Kind,
	})
	if err != nil {
		return nil, v.status(ctx, "pluginapi.Artifact", "pluginapi.Artifacts", err)
	}
	return &pluginapi.Artifact{Data: r.GetData(), Info: r.GetInfo()}, nil
}

// Health implements pluginapi.HealthChecker.
func (c *Conn) Health(ctx context.Context) error {
	v, err := c.need("pluginapi.HealthChecker", func(c pluginapi.Capabilities) bool { return c.Health })
	if err != nil {
		return err
	}
	if _, err := v.rpc.Health(ctx, &kilnpb.HealthRequest{}); err != nil {
		return v.status(ctx, "Health", "pluginapi.HealthChecker", err)
	}
	return nil
}

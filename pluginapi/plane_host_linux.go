//go:build linux

package pluginapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"sync"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Staging policy: a staging segment is at least minStagingBytes (rounded up to a
// power of two); at most maxIdleSegments idle ones are kept, none larger than
// maxIdleBytes.
const (
	minStagingBytes = 64 << 10
	maxIdleSegments = 4
	maxIdleBytes    = 64 << 20
)

// plane is the host's side of a plugin's data plane: the socket its request frames
// go out on, the reader that matches completions to requests, and the table of
// shared segments (mapped buffers and staging areas). Every completion is checked
// against the request it answers; a frame that does not fit closes the plane with
// a ProtocolError.
type plane struct {
	conn   *rawConn
	cancel func(seq uint64) // asks the plugin over gRPC to cancel a request

	wmu sync.Mutex // one frame at a time on the socket

	mu      sync.Mutex
	err     error // set once the plane is closed
	seq     uint64
	nextSeg uint32
	pending map[uint64]*call
	segs    map[uint32]*segment
	idle    []*segment // staging segments not leased

	detach chan *segment // staging segments to detach, for the janitor
}

// call is one request waiting for its completion.
type call struct {
	seq     uint64
	kind    frameKind
	outputs int
	ch      chan *done // receives the completion, or nil when the plane closed
	// abandoned: the caller stopped waiting; release runs when the completion
	// arrives instead.
	abandoned bool
	release   func()
}

// ready reports whether the call's completion (or the plane's closing) arrived.
func (c *call) ready() bool { return len(c.ch) > 0 }

// dialPlane connects to a plugin's data plane and presents the token.
func dialPlane(ctx context.Context, path string, token []byte, cancel func(uint64)) (*plane, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connect to the data plane: %w", err)
	}
	conn, err := rawFrom(c.(*net.UnixConn))
	if err != nil {
		return nil, err
	}
	if err := checkPeer(conn.fd); err != nil {
		conn.close()
		return nil, err
	}
	p := newPlane(conn, cancel)
	if _, err := p.roundTrip(ctx, &request{kind: frameHello, token: token}, -1, 0); err != nil {
		p.fail(err)
		return nil, fmt.Errorf("data plane hello: %w", err)
	}
	return p, nil
}

// newPlane starts the host's side of a plane on a connected socket.
func newPlane(conn *rawConn, cancel func(uint64)) *plane {
	p := &plane{conn: conn, cancel: cancel, pending: map[uint64]*call{}, segs: map[uint32]*segment{}, detach: make(chan *segment, 64)}
	go p.read()
	go p.janitor()
	return p
}

// closed returns the error that closed the plane, nil while it is open.
func (p *plane) closed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// fail closes the plane with err: pending calls end, every segment is orphaned
// (views callers hold stay readable), idle staging segments are unmapped.
func (p *plane) fail(err error) {
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return
	}
	p.err = err
	pending := p.pending
	p.pending = nil
	for _, s := range p.segs {
		s.orphan()
	}
	for _, s := range p.idle {
		delete(p.segs, s.id)
		s.unmap()
	}
	p.idle = nil
	close(p.detach)
	p.mu.Unlock()
	p.conn.shutdown()
	for _, c := range pending {
		p.finish(c, nil)
	}
}

// finish delivers a completion (nil: the plane closed) to its call.
func (p *plane) finish(c *call, d *done) {
	p.mu.Lock()
	abandoned := c.abandoned
	if !abandoned {
		c.ch <- d // buffered: never blocks, and the waiter checks it under mu
	}
	p.mu.Unlock()
	if abandoned && c.release != nil {
		c.release()
	}
}

// unavailable is the error calls see once the plane is closed: a plain
// connection loss reads as gRPC Unavailable, as a broken gRPC connection does.
func (p *plane) unavailable() error { return unavailableErr(p.closed()) }

// unavailableErr is unavailable for the plane's closing error err.
func unavailableErr(err error) error {
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return err
	}
	return status.Error(codes.Unavailable, fmt.Sprintf("kiln data plane lost: %v", err))
}

// read receives completions until the connection ends.
func (p *plane) read() {
	defer p.conn.close()
	br := bufio.NewReaderSize(p.conn, 64<<10)
	hdr := make([]byte, frameHeaderBytes)
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			p.fail(err)
			return
		}
		h, err := parseHeader(hdr, maxDoneBytes)
		if err != nil {
			p.fail(&ProtocolError{Detail: err.Error()})
			return
		}
		b := make([]byte, h.size)
		copy(b, hdr)
		if _, err := io.ReadFull(br, b[frameHeaderBytes:]); err != nil {
			p.fail(err)
			return
		}
		p.mu.Lock()
		c := p.pending[h.seq]
		delete(p.pending, h.seq)
		p.mu.Unlock()
		if c == nil {
			p.fail(&ProtocolError{Detail: fmt.Sprintf("completion for request %d, which is not waiting", h.seq)})
			return
		}
		d, err := decodeDone(b, c.kind, c.outputs)
		if err != nil {
			p.fail(&ProtocolError{Detail: err.Error()})
			p.finish(c, nil)
			return
		}
		p.finish(c, d)
	}
}

// roundTrip sends r (with fd, when not -1, riding along) and waits for its
// completion. outputs is the number of output sizes a dispatch completion must
// carry. When ctx ends first the request is cancelled and abandoned.
func (p *plane) roundTrip(ctx context.Context, r *request, fd int, outputs int) (*done, error) {
	c, err := p.send(r, fd, outputs, nil)
	if err != nil {
		return nil, err
	}
	d, _, err := p.wait(ctx, c)
	return d, err
}

// send registers and sends r. release, when not nil, frees what the request
// staged; it runs only if the caller abandons the call (see wait).
func (p *plane) send(r *request, fd int, outputs int, release func()) (*call, error) {
	c := &call{seq: 0, kind: r.kind, outputs: outputs, ch: make(chan *done, 1), release: release}
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return nil, p.unavailable()
	}
	p.seq++
	r.seq, c.seq = p.seq, p.seq
	p.pending[r.seq] = c
	p.mu.Unlock()
	r.fd = fd >= 0
	b, err := encodeRequest(r)
	if err != nil {
		p.mu.Lock()
		delete(p.pending, r.seq)
		p.mu.Unlock()
		return nil, Rejected("%v. Fix: split the batch", err)
	}
	if err := p.write(b, fd); err != nil {
		p.fail(err)
	}
	return c, nil
}

// wait returns c's completion as the error kind the plugin returned. owned
// reports that the caller still owns what the request staged (it must release
// it); it is false when ctx ended first: the request is then cancelled and its
// release runs when the plugin is done with it.
func (p *plane) wait(ctx context.Context, c *call) (d *done, owned bool, err error) {
	select {
	case d = <-c.ch:
	case <-ctx.Done():
		p.mu.Lock()
		select {
		case d = <-c.ch:
		default:
			c.abandoned = true
		}
		p.mu.Unlock()
		if c.abandoned {
			go p.cancel(c.seq)
			return nil, false, ctx.Err()
		}
	}
	if d == nil {
		return nil, true, p.unavailable()
	}
	return d, true, d.err()
}

// write sends one frame, with fd as SCM_RIGHTS on its first bytes.
func (p *plane) write(b []byte, fd int) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if fd >= 0 {
		return p.conn.write(b, unix.UnixRights(fd))
	}
	return p.conn.write(b, nil)
}

// newSegment creates a shared segment, registered so that it is orphaned when
// the plane closes; the caller sends fd with a frame and closes it.
func (p *plane) newSegment(size uint64) (*segment, int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, -1, unavailableErr(p.err)
	}
	p.nextSeg++
	s, fd, err := createSegment(p.nextSeg, size)
	if err != nil {
		return nil, -1, err
	}
	p.segs[s.id] = s
	return s, fd, nil
}

// dropSegment unmaps a segment and forgets it.
func (p *plane) dropSegment(s *segment) {
	p.mu.Lock()
	delete(p.segs, s.id)
	p.mu.Unlock()
	s.unmap()
}

// lease returns a staging segment of at least size bytes for one request,
// attaching a new one to the plugin when no idle one is large enough.
func (p *plane) lease(ctx context.Context, size uint64) (*segment, error) {
	p.mu.Lock()
	best := -1
	for i, s := range p.idle {
		if uint64(len(s.mem)) >= size && (best < 0 || len(s.mem) < len(p.idle[best].mem)) {
			best = i
		}
	}
	if best >= 0 {
		s := p.idle[best]
		p.idle = append(p.idle[:best], p.idle[best+1:]...)
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	want := uint64(minStagingBytes)
	if size > want {
		want = 1 << bits.Len64(size-1)
	}
	s, fd, err := p.newSegment(want)
	if err != nil {
		return nil, err
	}
	_, err = p.roundTrip(ctx, &request{kind: frameAttach, segment: s.id, size: want}, fd, 0)
	unix.Close(fd)
	if err != nil {
		p.dropSegment(s)
		return nil, err
	}
	return s, nil
}

// unlease returns a staging segment. It never writes to the socket (the reader
// goroutine calls it): segments beyond the idle policy go to the janitor.
func (p *plane) unlease(s *segment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		delete(p.segs, s.id)
		s.unmap()
		return
	}
	if len(s.mem) > maxIdleBytes || len(p.idle) >= maxIdleSegments {
		select {
		case p.detach <- s:
			return
		default:
		}
	}
	p.idle = append(p.idle, s)
}

// janitor detaches the staging segments unlease gave up, until the plane closes.
func (p *plane) janitor() {
	for s := range p.detach {
		_, _ = p.roundTrip(context.Background(), &request{kind: frameDetach, segment: s.id}, -1, 0)
		p.dropSegment(s)
	}
}

// close ends the plane from the host's side.
func (p *plane) close() { p.fail(errPlaneClosed) }

// allocOnPlane allocates a buffer over the data plane; a UsageMap buffer is
// offered a shared segment, which it keeps when the plugin maps it (seg is then
// returned for the host's table).
func allocOnPlane(ctx context.Context, pl *plane, adapter uint32, req *AllocRequest) (*AllocResult, *segment, error) {
	r := &request{kind: frameAlloc, adapter: adapter, usage: req.Usage, size: req.Size}
	var seg *segment
	fd := -1
	if req.Usage&UsageMap != 0 && req.Size > 0 {
		var err error
		if seg, fd, err = pl.newSegment(req.Size); err != nil {
			return nil, nil, err
		}
		r.segment = seg.id
	}
	d, err := pl.roundTrip(ctx, r, fd, 0)
	if fd >= 0 {
		unix.Close(fd)
	}
	if err == nil && d.mapped && seg == nil {
		err = &ResultError{Detail: fmt.Sprintf("the plugin reports buffer %d as mapped, but no shared memory was offered for it", d.buffer)}
	}
	if err != nil || !d.mapped {
		if seg != nil {
			pl.dropSegment(seg)
		}
		if err != nil {
			return nil, nil, err
		}
		seg = nil
	}
	return &AllocResult{Buffer: d.buffer, Mapped: d.mapped}, seg, nil
}

// transferOnPlane writes or reads b through a staging segment.
func transferOnPlane(ctx context.Context, pl *plane, kind frameKind, buffer, offset uint64, b []byte) error {
	s, err := pl.lease(ctx, uint64(len(b)))
	if err != nil {
		return err
	}
	if kind == frameWrite {
		copy(s.mem, b)
	}
	c, err := pl.send(&request{kind: kind, buffer: buffer, offset: offset, data: segRange{segment: s.id, size: uint64(len(b))}}, -1, 0, func() { pl.unlease(s) })
	if err != nil {
		pl.unlease(s)
		return err
	}
	_, owned, err := pl.wait(ctx, c)
	if owned {
		if err == nil && kind == frameRead {
			copy(b, s.mem)
		}
		pl.unlease(s)
	}
	return err
}

// stagingAlign aligns every staged range, so interpreters can use inputs in
// place.
const stagingAlign = 64

func alignUp(n uint64) uint64 { return (n + stagingAlign - 1) &^ (stagingAlign - 1) }

// dispatchOnPlane runs Backend.Dispatch with inputs and outputs staged in one
// shared segment.
func dispatchOnPlane(ctx context.Context, pl *plane, req *DispatchRequest, outputs []int) (*DispatchResult, error) {
	n := max(len(req.Inputs), len(req.OutputCounts))
	if n > maxBindings || len(outputs) > maxBindings {
		return nil, Rejected("dispatch with %d bindings and %d outputs, more than %d. Fix: use fewer buffers", n, len(outputs), maxBindings)
	}
	var total uint64
	for _, in := range req.Inputs {
		total += alignUp(uint64(len(in)))
	}
	for _, size := range outputs {
		if size < 0 {
			return nil, Rejected("output size %d is negative", size)
		}
		total += alignUp(uint64(size))
	}
	var s *segment
	if total > 0 {
		var err error
		if s, err = pl.lease(ctx, total); err != nil {
			return nil, err
		}
	}
	r := &request{kind: frameDispatch, dispatch: req, inputs: make([]segRange, n), outputs: make([]segRange, len(outputs))}
	var at uint64
	for i, in := range req.Inputs {
		if len(in) == 0 {
			continue
		}
		copy(s.mem[at:], in)
		r.inputs[i] = segRange{segment: s.id, offset: at, size: uint64(len(in))}
		at += alignUp(uint64(len(in)))
	}
	for i, size := range outputs {
		if size > 0 {
			r.outputs[i] = segRange{segment: s.id, offset: at, size: uint64(size)}
			at += alignUp(uint64(size))
		}
	}
	var release func()
	if s != nil {
		release = func() { pl.unlease(s) }
	}
	c, err := pl.send(r, -1, len(outputs), release)
	if err != nil {
		if release != nil {
			release()
		}
		return nil, err
	}
	d, owned, err := pl.wait(ctx, c)
	if owned && release != nil {
		defer release()
	}
	if err != nil {
		return nil, err
	}
	res := &DispatchResult{HostNanos: d.hostNanos, DeviceNanos: d.deviceNanos, Outputs: make([][]byte, len(outputs))}
	for i, size := range d.sizes {
		if size > uint64(outputs[i]) {
			return nil, &ResultError{Detail: fmt.Sprintf("output %d is %d bytes, the launch makes it %d; the host refused it unread", i, size, outputs[i])}
		}
		out := make([]byte, size)
		if size > 0 {
			copy(out, s.mem[r.outputs[i].offset:])
		}
		res.Outputs[i] = out
	}
	return res, nil
}

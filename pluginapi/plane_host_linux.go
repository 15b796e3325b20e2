//go:build linux

package pluginapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"sync"
	"time"

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
// go out on, the completions it reads back, and the table of shared segments
// (mapped buffers and staging areas). Every completion is checked against the
// request it answers; a frame that does not fit closes the plane with a
// ProtocolError.
//
// Completions are read by the callers waiting for them, not by a goroutine of
// the plane's own: a waiting caller that takes the reader token reads frames,
// hands each to its call, and gives the token back once its own completion came;
// the thread that sleeps in the read is the one that needs the answer. (Handing
// each completion from a reader goroutine to its caller cost a thread wake-up of
// about 35 µs per round trip on the 2-core machine.) A watcher goroutine sleeps
// until the plugin's end of the socket closes and then closes the plane, so a
// dead plugin is noticed while nobody waits.
type plane struct {
	conn   *rawConn
	cancel func(seq uint64) // asks the plugin over gRPC to cancel a request

	wmu sync.Mutex // one frame at a time on the socket

	// lead is the reader token (capacity 1); its holder alone reads the socket,
	// through in. wake (an eventfd) interrupts a holder waiting for data: a
	// caller's context ended, or the plane closed.
	lead    chan struct{}
	in      frameBuffer
	wake    int
	watched chan struct{} // closed when the watcher returned

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
	p := &plane{conn: conn, cancel: cancel, pending: map[uint64]*call{}, segs: map[uint32]*segment{},
		detach: make(chan *segment, 64), lead: make(chan struct{}, 1), watched: make(chan struct{})}
	p.lead <- struct{}{}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		wake = -1 // a leader then waits in read alone; a context cannot interrupt it
	}
	p.wake = wake
	go p.watch()
	go p.janitor()
	return p
}

// watch sleeps until the peer closes its end of the socket (or the plane is
// shut down), then closes the plane.
func (p *plane) watch() {
	defer close(p.watched)
	fds := []unix.PollFd{{Fd: int32(p.conn.fd), Events: unix.POLLRDHUP}}
	for {
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		break
	}
	p.fail(io.EOF)
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
	p.signal()
	for _, c := range pending {
		p.finish(c, nil)
	}
	go func() {
		// The descriptors close once nobody can be using them: the watcher has
		// returned and the reader token is held here for good.
		<-p.watched
		<-p.lead
		p.conn.close()
		p.mu.Lock()
		wake := p.wake
		p.wake = -1
		p.mu.Unlock()
		if wake >= 0 {
			unix.Close(wake)
		}
	}()
}

// signal wakes a reader-token holder waiting for data.
func (p *plane) signal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wake >= 0 {
		var one [8]byte
		one[0] = 1
		_, _ = unix.Write(p.wake, one[:]) // a full counter means a wake is pending anyway
	}
}

// finish delivers a completion (nil: the plane closed) to its call.
func (p *plane) finish(c *call, d *done) {
	p.mu.Lock()
	abandoned := c.abandoned
	if !abandoned {
		select {
		case c.ch <- d: // buffered: the waiter checks it under mu
		default: // already ended (the plane closed meanwhile)
		}
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

// errWoken reports that a reader-token holder was woken without data.
var errWoken = errors.New("woken")

// readFrame returns the next completion frame, waiting for it; errWoken when
// the wait was interrupted (see signal). Unless interruptible, it waits in the
// read alone (one system call less per frame; closing the plane still ends it).
//
// Before it sleeps it polls the socket for spinWait: a completion that comes
// within that time is read without the wake-up of a sleeping thread.
func (p *plane) readFrame(interruptible bool) ([]byte, error) {
	until := time.Now().Add(spinWait)
	for {
		if b, ok, err := p.in.next(); err != nil || ok {
			return b, err
		}
		got, err := spin(until, func() (bool, error) {
			err := p.in.fillNow(p.conn)
			if err == errNothingYet {
				return false, nil
			}
			return err == nil, err
		})
		if err != nil {
			return nil, err
		}
		if got {
			continue
		}
		if interruptible && p.wake >= 0 {
			fds := []unix.PollFd{{Fd: int32(p.conn.fd), Events: unix.POLLIN}, {Fd: int32(p.wake), Events: unix.POLLIN}}
			if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
				return nil, err
			}
			if fds[1].Revents != 0 {
				var buf [8]byte
				_, _ = unix.Read(p.wake, buf[:]) // resets the counter
				if fds[0].Revents == 0 {
					return nil, errWoken
				}
			}
		}
		if err := p.in.fill(p.conn); err != nil {
			return nil, err
		}
	}
}

// deliver matches a completion frame to its call and hands it over. A frame
// that fits no waiting request closes the plane.
func (p *plane) deliver(b []byte) error {
	h, err := parseHeader(b, maxDoneBytes)
	if err != nil {
		return &ProtocolError{Detail: err.Error()}
	}
	p.mu.Lock()
	c := p.pending[h.seq]
	delete(p.pending, h.seq)
	p.mu.Unlock()
	if c == nil {
		return &ProtocolError{Detail: fmt.Sprintf("completion for request %d, which is not waiting", h.seq)}
	}
	d, err := decodeDone(b, c.kind, c.outputs)
	if err != nil {
		p.finish(c, nil)
		return &ProtocolError{Detail: err.Error()}
	}
	p.finish(c, d)
	return nil
}

// readFor reads and delivers completions, holding the reader token, until c has
// its own, ctx ends, or the plane closes.
func (p *plane) readFor(ctx context.Context, c *call) {
	interruptible := ctx.Done() != nil
	if interruptible {
		stop := context.AfterFunc(ctx, p.signal)
		defer stop()
	}
	for !c.ready() && ctx.Err() == nil && p.closed() == nil {
		b, err := p.readFrame(interruptible)
		switch {
		case err == errWoken:
			continue
		case err != nil:
			p.fail(err)
			return
		}
		if err := p.deliver(b); err != nil {
			p.fail(err)
			return
		}
	}
}

// frameBuffer collects completion frames from the socket; only the reader-token
// holder uses it.
type frameBuffer struct {
	buf  []byte
	r, w int
}

// next returns the next whole frame when one is buffered (valid until the next
// call), or an error for a header that breaks the format.
func (f *frameBuffer) next() ([]byte, bool, error) {
	if f.w-f.r < frameHeaderBytes {
		return nil, false, nil
	}
	h, err := parseHeader(f.buf[f.r:f.r+frameHeaderBytes], maxDoneBytes)
	if err != nil {
		return nil, false, &ProtocolError{Detail: err.Error()}
	}
	if f.w-f.r < int(h.size) {
		return nil, false, nil
	}
	b := f.buf[f.r : f.r+int(h.size)]
	f.r += int(h.size)
	return b, true, nil
}

// fill reads what the socket has, waiting for at least one byte, making room
// first.
func (f *frameBuffer) fill(c *rawConn) error { return f.fillWith(c.Read) }

// fillNow is fill without waiting: errNothingYet when no byte is there.
func (f *frameBuffer) fillNow(c *rawConn) error { return f.fillWith(c.readNow) }

func (f *frameBuffer) fillWith(read func([]byte) (int, error)) error {
	if f.buf == nil {
		f.buf = make([]byte, 2*maxDoneBytes)
	}
	if f.r > 0 {
		f.w = copy(f.buf, f.buf[f.r:f.w])
		f.r = 0
	}
	n, err := read(f.buf[f.w:])
	if err != nil {
		return err
	}
	f.w += n
	return nil
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
		if r.kind == frameSubmit {
			return nil, &LimitError{What: fmt.Sprintf("submit of %d commands", len(r.commands)), Size: submitSize(r.commands), Limit: maxRequestFrameBytes}
		}
		return nil, Rejected("%v. Fix: split the request", err)
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
	for d == nil {
		select {
		case d = <-c.ch:
			if d == nil {
				return nil, true, p.unavailable()
			}
		case <-p.lead:
			p.readFor(ctx, c)
			p.lead <- struct{}{}
			if c.ready() {
				continue
			}
			if p.closed() != nil {
				p.finishClosed(c)
				continue
			}
		case <-ctx.Done():
		}
		if d == nil && ctx.Err() != nil {
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
			if d == nil {
				return nil, true, p.unavailable()
			}
		}
	}
	return d, true, d.err()
}

// finishClosed ends c as failed if the closing plane has not already.
func (p *plane) finishClosed(c *call) {
	p.mu.Lock()
	if len(c.ch) == 0 && !c.abandoned {
		c.ch <- nil
	}
	p.mu.Unlock()
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
		out := []byte{}
		if size > 0 {
			// A clone allocates without zeroing first.
			o := r.outputs[i].offset
			out = bytes.Clone(s.mem[o : o+size])
		}
		res.Outputs[i] = out
	}
	return res, nil
}

//go:build linux

package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Staging policy: a staging segment is at least minStagingBytes (rounded up to a
// power of two); at most maxIdleSmall idle ones of minStagingBytes are kept (one
// per concurrent caller of small transfers, 8 MiB in all), and at most
// maxIdleSegments larger ones, none larger than maxIdleBytes. A caller that
// finds no idle segment attaches a new one (a round trip, and the plugin may
// register it with its driver), so the small ones cover the callers that move
// small data at once: with 4 kept, 16 callers reading and writing made most of
// their transfers attach and detach a segment.
const (
	minStagingBytes = 64 << 10
	maxIdleSmall    = 128
	maxIdleSegments = 4
	maxIdleBytes    = 64 << 20
)

// plane is the host's side of a plugin's data plane: the ring segment its
// request frames go out on and its completions come back on, the socket that
// carries the hello, the descriptors and the plugin's liveness, and the table
// of shared segments (mapped buffers and staging areas). Every completion is
// checked against the request it answers; a frame or ring index that does not
// fit closes the plane with a ProtocolError.
//
// Completions are read by the callers waiting for them, not by a goroutine of
// the plane's own: a waiting caller that takes the reader token reads frames,
// hands each to its call, and gives the token back once its own completion came;
// the thread that sleeps on the ring is the one that needs the answer. (Handing
// each completion from a reader goroutine to its caller cost a thread wake-up of
// about 35 µs per round trip on the 2-core machine.) A watcher goroutine sleeps
// until the plugin's end of the socket closes and then closes the plane, so a
// dead plugin is noticed while nobody waits.
type plane struct {
	conn   *wire.RawConn
	cancel func(seq uint64) // asks the plugin over gRPC to cancel a request

	// wlock is the write lock (capacity 1; holding it is having sent into
	// it), so that a caller waiting for it can give up when its context ends:
	// one frame at a time into the request ring (and descriptors on the
	// socket); it guards req.
	wlock chan struct{}
	req   *wire.Ring // producer side; nil once the plane closed and the segment is unmapped
	// wasFull: a writer found the request ring full since the last write
	// that found room (guarded by wlock).
	wasFull bool

	// lead is the reader token (capacity 1); its holder alone reads the
	// completion ring (done) into in.
	lead    chan struct{}
	done    *wire.Ring // consumer side; nil once unmapped
	in      []byte
	watched chan struct{} // closed when the watcher returned

	mu    sync.Mutex
	err   error  // set once the plane is closed
	rings []byte // the ring segment's mapping, until it is unmapped
	// fullSince is when a writer found the request ring full with the
	// plugin's tail at fullTail (zero: the last write found room).
	fullSince time.Time
	fullTail  uint64
	seq       uint64
	nextSeg   uint32
	pending   map[uint64]*call
	segs      map[uint32]*wire.Segment
	idle      []*wire.Segment // staging segments larger than minStagingBytes, not leased
	idleSmall []*wire.Segment // staging segments of minStagingBytes, not leased

	detach chan *wire.Segment // staging segments to detach, for the janitor
}

// call is one request waiting for its completion.
type call struct {
	seq     uint64
	kind    wire.FrameKind
	outputs int
	ch      chan *wire.Done // receives the completion, or nil when the plane closed
	// fin is closed once the completion (or the plane's closing) arrived;
	// delivered says so under the plane's mu.
	fin       chan struct{}
	delivered bool
	// abandoned: the caller stopped waiting; release runs when the completion
	// arrives instead.
	abandoned bool
	release   func()
}

// ready reports whether the call's completion (or the plane's closing) arrived.
func (c *call) ready() bool {
	select {
	case <-c.fin:
		return true
	default:
		return false
	}
}

// deliverLocked hands d (nil: the plane closed) to c, once, and reports
// whether this was the first delivery; the plane's mu is held.
func (c *call) deliverLocked(d *wire.Done) bool {
	if c.delivered {
		return false
	}
	c.delivered = true
	close(c.fin)
	if !c.abandoned {
		c.ch <- d // buffered, and empty until now
	}
	return true
}

// dialPlane connects to a plugin's data plane and presents the token.
func dialPlane(ctx context.Context, path string, token []byte, cancel func(uint64)) (*plane, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connect to the data plane: %w", err)
	}
	conn, err := wire.RawFrom(c.(*net.UnixConn))
	if err != nil {
		return nil, err
	}
	if err := wire.CheckPeer(conn.FD()); err != nil {
		conn.Close()
		return nil, err
	}
	return startPlane(ctx, conn, token, cancel)
}

// startPlane starts the host's side of a plane on a connected socket: it
// creates the ring segment and sends it with the hello frame, whose completion
// comes back on the completion ring.
func startPlane(ctx context.Context, conn *wire.RawConn, token []byte, cancel func(uint64)) (*plane, error) {
	mem, fd, err := wire.CreateRingSegment()
	if err != nil {
		conn.Close()
		return nil, err
	}
	p := &plane{conn: conn, cancel: cancel, pending: map[uint64]*call{}, segs: map[uint32]*wire.Segment{},
		detach: make(chan *wire.Segment, 64), lead: make(chan struct{}, 1), wlock: make(chan struct{}, 1), watched: make(chan struct{}), rings: mem}
	p.req, p.done = wire.RingPair(mem)
	p.lead <- struct{}{}
	go p.watch()
	go p.janitor()
	_, err = p.roundTrip(ctx, &wire.Request{Kind: wire.FrameHello, Token: token}, fd, 0)
	unix.Close(fd)
	if err != nil {
		p.fail(err)
		return nil, fmt.Errorf("data plane hello: %w", err)
	}
	return p, nil
}

// watch sleeps until the peer closes its end of the socket (or the plane is
// shut down), then closes the plane.
func (p *plane) watch() {
	defer close(p.watched)
	fds := []unix.PollFd{{Fd: int32(p.conn.FD()), Events: unix.POLLRDHUP}}
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
		s.Orphan()
	}
	for _, s := range append(p.idle, p.idleSmall...) {
		delete(p.segs, s.ID)
		s.Unmap()
	}
	p.idle, p.idleSmall = nil, nil
	close(p.detach)
	p.mu.Unlock()
	p.conn.Shutdown()
	p.signal()
	for _, c := range pending {
		p.finish(c, nil)
	}
	go func() {
		// The ring segment is unmapped and the socket closed once nobody can
		// be using them: the watcher has returned, the reader token is held
		// here for good, and no frame is being written.
		<-p.watched
		<-p.lead
		p.wlock <- struct{}{}
		p.mu.Lock()
		mem := p.rings
		p.rings, p.req, p.done = nil, nil, nil
		p.mu.Unlock()
		<-p.wlock
		if mem != nil {
			_ = unix.Munmap(mem) // fails only for a mapping unix.Mmap did not make
		}
		p.conn.Close()
	}()
}

// alive checks that the plane is open and the plugin's end of its socket too
// (one poll: a plugin that died is seen at once, before the watcher closes the
// plane), and returns the lost plane's error otherwise, closing it first.
func (p *plane) alive() error {
	p.mu.Lock()
	// The socket is closed only after rings is cleared under mu: while mu is
	// held and rings is set, conn.FD() is this plane's.
	open := p.err == nil && p.rings != nil && !wire.HungUp(p.conn.FD())
	p.mu.Unlock()
	if open {
		return nil
	}
	p.fail(io.EOF)
	return p.unavailable()
}

// signal wakes a reader-token holder asleep on the completion ring.
func (p *plane) signal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rings != nil {
		_, done := wire.RingPair(p.rings)
		done.Interrupt()
	}
}

// finish delivers a completion (nil: the plane closed) to its call, unless the
// call already ended (the plane closed meanwhile).
func (p *plane) finish(c *call, d *wire.Done) {
	p.mu.Lock()
	abandoned := c.abandoned
	first := c.deliverLocked(d)
	p.mu.Unlock()
	if abandoned && first && c.release != nil {
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

// errWoken reports that a reader-token holder was woken without a frame;
// errSlept that its sleep ran its whole time without one.
var (
	errWoken = errors.New("woken")
	errSlept = errors.New("slept")
)

// readFrame returns the next completion frame, copied out of the completion
// ring (valid until the next call); errWoken when the wait ended early without
// one (see signal; stop reports that the caller should not sleep), errSlept
// when it timed out. With spin it first polls the ring for wire.SpinWait: a
// completion that comes within that time is read without the wake-up of a
// sleeping thread.
func (p *plane) readFrame(spin bool, stop func() bool) ([]byte, error) {
	until := time.Now().Add(wire.SpinWait)
	for {
		b, in, ok, err := p.done.Next(p.in, wire.MaxDoneBytes)
		p.in = in
		switch {
		case err != nil:
			return nil, &ProtocolError{Detail: "completion ring: " + err.Error()}
		case ok:
			return b, nil
		case spin:
			spin = false
			if p.done.Spin(until) {
				continue
			}
		}
		woken := p.done.Sleep(wire.RingWaitTimeout, stop)
		if !p.done.Pending() {
			if wire.HungUp(p.conn.FD()) {
				return nil, io.EOF
			}
			if !woken {
				return nil, errSlept
			}
			return nil, errWoken
		}
	}
}

// deliver matches a completion frame to its call and hands it over. A frame
// that fits no waiting request closes the plane.
func (p *plane) deliver(b []byte) error {
	h, err := wire.ParseHeader(b, wire.MaxDoneBytes)
	if err != nil {
		return &ProtocolError{Detail: err.Error()}
	}
	p.mu.Lock()
	c := p.pending[h.Seq]
	delete(p.pending, h.Seq)
	p.mu.Unlock()
	if c == nil {
		return &ProtocolError{Detail: fmt.Sprintf("completion for request %d, which is not waiting", h.Seq)}
	}
	d, err := wire.DecodeDone(b, c.kind, c.outputs)
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
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, p.signal)
		defer stop()
	}
	stop := func() bool { return c.ready() || ctx.Err() != nil || p.closed() != nil }
	spin := true
	spurious := 0 // wakes in a row that brought nothing
	for !stop() {
		b, err := p.readFrame(spin, stop)
		spin = false
		switch {
		case err == errSlept:
			spurious = 0
			continue
		case err == errWoken:
			if !stop() {
				spurious++
				p.backOff(spurious)
			}
			continue
		case err != nil:
			p.fail(err)
			return
		}
		spurious = 0
		if err := p.deliver(b); err != nil {
			p.fail(err)
			return
		}
	}
}

// Spurious wakes: a plugin that wakes the completion ring's futex word without
// writing a frame (a wake storm) would make the host's reader loop as fast as
// it wakes. After freeWakes spurious wakes in a row the reader naps before it
// looks again, from wakeNap doubling up to maxWakeNap; a frame, a sleep that
// runs its whole time, or the plugin's death ends the naps.
const (
	freeWakes  = 4
	wakeNap    = 50 * time.Microsecond
	maxWakeNap = 5 * time.Millisecond
)

// backOff naps after the n-th spurious wake in a row, waking early when the
// plugin's end of the socket closes.
func (p *plane) backOff(n int) {
	if n <= freeWakes {
		return
	}
	nap := maxWakeNap
	if shift := n - freeWakes - 1; shift < 8 {
		nap = min(wakeNap<<shift, maxWakeNap)
	}
	fds := []unix.PollFd{{Fd: int32(p.conn.FD()), Events: unix.POLLRDHUP}}
	ts := unix.NsecToTimespec(nap.Nanoseconds())
	_, _ = unix.Ppoll(fds, &ts, nil) // EINTR or a hang-up: the caller looks again
}

// drain delivers the completions already in the ring when the reader token is
// free; a sender waiting for room in the request ring calls it, so that a
// plugin blocked on a full completion ring gets going again.
func (p *plane) drain() {
	select {
	case <-p.lead:
	default:
		return // its holder reads them
	}
	defer func() { p.lead <- struct{}{} }()
	for p.closed() == nil {
		b, in, ok, err := p.done.Next(p.in, wire.MaxDoneBytes)
		p.in = in
		if err != nil {
			p.fail(&ProtocolError{Detail: "completion ring: " + err.Error()})
			return
		}
		if !ok {
			return
		}
		if err := p.deliver(b); err != nil {
			p.fail(err)
			return
		}
	}
}

// roundTrip sends r (with fd, when not -1, riding along) and waits for its
// completion. outputs is the number of output sizes a dispatch completion must
// carry. When ctx ends first the request is cancelled and abandoned.
func (p *plane) roundTrip(ctx context.Context, r *wire.Request, fd int, outputs int) (*wire.Done, error) {
	c, err := p.send(ctx, r, fd, outputs, nil)
	if err != nil {
		return nil, err
	}
	d, _, err := p.wait(ctx, c)
	return d, err
}

// send registers and sends r. release, when not nil, frees what the request
// staged; it runs only if the caller abandons the call (see wait). When ctx
// ends while the request waits to be written (the plugin reads no requests),
// nothing was sent and send returns ctx's error.
func (p *plane) send(ctx context.Context, r *wire.Request, fd int, outputs int, release func()) (*call, error) {
	c := &call{seq: 0, kind: r.Kind, outputs: outputs, ch: make(chan *wire.Done, 1), fin: make(chan struct{}), release: release}
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return nil, p.unavailable()
	}
	p.seq++
	r.Seq, c.seq = p.seq, p.seq
	p.pending[r.Seq] = c
	p.mu.Unlock()
	r.FD = fd >= 0
	b, err := wire.EncodeRequest(r)
	if err != nil {
		p.mu.Lock()
		delete(p.pending, r.Seq)
		p.mu.Unlock()
		if r.Kind == wire.FrameSubmit {
			return nil, &LimitError{What: fmt.Sprintf("submit of %d commands", len(r.Commands)), Size: submitSize(r.Commands), Limit: wire.MaxRequestFrameBytes}
		}
		return nil, pluginapi.Rejected("%v. Fix: split the request", err)
	}
	if err := p.write(ctx, b, r.Kind, fd); err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			p.mu.Lock()
			delete(p.pending, r.Seq)
			p.mu.Unlock()
			return nil, err
		}
		p.fail(err)
	}
	return c, nil
}

// wait returns c's completion as the error kind the plugin returned. owned
// reports that the caller still owns what the request staged (it must release
// it); it is false when ctx ended first: the request is then cancelled and its
// release runs when the plugin is done with it.
func (p *plane) wait(ctx context.Context, c *call) (d *wire.Done, owned bool, err error) {
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
	return d, true, doneErr(d)
}

// finishClosed ends c as failed if the closing plane has not already.
func (p *plane) finishClosed(c *call) {
	p.mu.Lock()
	if !c.abandoned {
		c.deliverLocked(nil)
	}
	p.mu.Unlock()
}

// await waits until c's completion (or the plane's closing) has arrived, or
// ctx ends (ctx's error), reading the completion ring while it holds the
// reader token. Unlike wait it leaves the completion to c's owner, and ctx
// ending neither abandons nor cancels the request: a caller that only orders
// its own work after c waits this way.
func (p *plane) await(ctx context.Context, c *call) error {
	for {
		select {
		case <-c.fin:
			return nil
		case <-p.lead:
			p.readFor(ctx, c)
			p.lead <- struct{}{}
			if !c.ready() && p.closed() != nil {
				p.finishClosed(c)
			}
		case <-ctx.Done():
		}
		if !c.ready() && ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// write sends one frame of kind. The hello frame goes on the socket with the
// ring segment's descriptor fd; every other frame goes into the request ring,
// and a descriptor that rides with it goes on the socket first, in a note
// holding the frame's sequence number: the plugin finds it there when it
// reads the frame, in ring order. Waiting for the write lock and for room in
// the ring ends with ctx (ctx's error: nothing was sent) or with the plane.
func (p *plane) write(ctx context.Context, b []byte, kind wire.FrameKind, fd int) error {
	select {
	case p.wlock <- struct{}{}: // a free lock is taken whatever ctx says
	default:
		select {
		case p.wlock <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() { <-p.wlock }()
	if kind == wire.FrameHello {
		return p.conn.Write(b, unix.UnixRights(fd))
	}
	if p.req == nil {
		return errPlaneClosed
	}
	if len(b) > p.req.Size() {
		return fmt.Errorf("frame of %d bytes, more than the request ring's %d", len(b), p.req.Size())
	}
	// The whole frame must fit before its descriptor's note goes out: a note
	// whose frame never follows would break the order the plugin reads them in.
	if err := p.room(ctx, uint64(len(b))); err != nil {
		return err
	}
	if fd >= 0 {
		if err := p.conn.Write(b[8:wire.FrameHeaderBytes], unix.UnixRights(fd)); err != nil {
			return err
		}
	}
	if err := p.req.Put(b); err != nil {
		return &ProtocolError{Detail: "request ring: " + err.Error()}
	}
	return nil
}

// Waiting for room in the request ring: after wire.SpinWait of yielding, the writer
// naps, from wire.RingNap up to maxRingNap while the plugin takes nothing.
const maxRingNap = 2 * time.Millisecond

// room waits until the request ring has n free bytes, while ctx lasts and the
// plane is open; the caller holds the write lock. While the ring is full it
// records since when the plugin has taken nothing from it (see stalled).
func (p *plane) room(ctx context.Context, n uint64) error {
	spinUntil := time.Now().Add(wire.SpinWait)
	nap := wire.RingNap
	for {
		free, err := p.req.Free()
		if err != nil {
			return &ProtocolError{Detail: "request ring: " + err.Error()}
		}
		if free >= n {
			if p.wasFull {
				p.wasFull = false
				p.full(false, 0)
			}
			return nil
		}
		if err := p.closed(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// The plugin is behind: let it answer what it has (it may wait for
		// room in the completion ring), and poll, then nap, until there is
		// room; a nap grows while the plugin takes nothing.
		p.wasFull = true
		if p.full(true, p.req.Peer()) {
			nap = wire.RingNap
		}
		p.drain()
		if time.Now().Before(spinUntil) {
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) // cannot fail on Linux
			continue
		}
		time.Sleep(nap)
		nap = min(2*nap, maxRingNap)
	}
}

// full records whether a writer found the request ring full, with the
// plugin's tail at tail; it reports whether the plugin took a frame since the
// last record.
func (p *plane) full(full bool, tail uint64) (moved bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !full:
		p.fullSince = time.Time{}
	case p.fullSince.IsZero() || p.fullTail != tail:
		moved = !p.fullSince.IsZero()
		p.fullSince, p.fullTail = time.Now(), tail
	}
	return moved
}

// stalled is how long the request ring has been full without the plugin
// taking a frame from it: since a writer found it full, while the plugin's
// tail has not moved; 0 when a write found room last, or the plane is closed.
func (p *plane) stalled() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fullSince.IsZero() || p.err != nil || p.req == nil || atomic.LoadUint64(p.req.Tail()) != p.fullTail {
		return 0
	}
	return time.Since(p.fullSince)
}

// newSegment creates a shared segment, registered so that it is orphaned when
// the plane closes; the caller sends fd with a frame and closes it.
func (p *plane) newSegment(size uint64) (*wire.Segment, int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, -1, unavailableErr(p.err)
	}
	p.nextSeg++
	s, fd, err := wire.CreateSegment(p.nextSeg, size)
	if err != nil {
		return nil, -1, err
	}
	p.segs[s.ID] = s
	return s, fd, nil
}

// dropSegment unmaps a segment and forgets it.
func (p *plane) dropSegment(s *wire.Segment) {
	p.mu.Lock()
	delete(p.segs, s.ID)
	p.mu.Unlock()
	s.Unmap()
}

// lease returns a staging segment of at least size bytes for one request,
// attaching a new one to the plugin when no idle one is large enough.
func (p *plane) lease(ctx context.Context, size uint64) (*wire.Segment, error) {
	p.mu.Lock()
	if n := len(p.idleSmall); n > 0 && size <= minStagingBytes {
		s := p.idleSmall[n-1]
		p.idleSmall = p.idleSmall[:n-1]
		p.mu.Unlock()
		return s, nil
	}
	best := -1
	for i, s := range p.idle {
		if uint64(len(s.Mem)) >= size && (best < 0 || len(s.Mem) < len(p.idle[best].Mem)) {
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
	_, err = p.roundTrip(ctx, &wire.Request{Kind: wire.FrameAttach, Segment: s.ID, Size: want}, fd, 0)
	unix.Close(fd)
	if err != nil {
		p.dropSegment(s)
		return nil, err
	}
	return s, nil
}

// unlease returns a staging segment. It never writes to the socket (the reader
// goroutine calls it): segments beyond the idle policy go to the janitor.
func (p *plane) unlease(s *wire.Segment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		delete(p.segs, s.ID)
		s.Unmap()
		return
	}
	if len(s.Mem) == minStagingBytes && len(p.idleSmall) < maxIdleSmall {
		p.idleSmall = append(p.idleSmall, s)
		return
	}
	if len(s.Mem) > maxIdleBytes || len(p.idle) >= maxIdleSegments {
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
		_, _ = p.roundTrip(context.Background(), &wire.Request{Kind: wire.FrameDetach, Segment: s.ID}, -1, 0)
		p.dropSegment(s)
	}
}

// close ends the plane from the host's side.
func (p *plane) close() { p.fail(errPlaneClosed) }

// allocOnPlane allocates a buffer over the data plane; a UsageMap buffer is
// offered a shared segment, which it keeps when the plugin maps it (seg is then
// returned for the host's table).
func allocOnPlane(ctx context.Context, pl *plane, adapter uint32, req *pluginapi.AllocRequest) (*pluginapi.AllocResult, *wire.Segment, error) {
	r := &wire.Request{Kind: wire.FrameAlloc, Adapter: adapter, Usage: uint32(req.Usage), Size: req.Size}
	var seg *wire.Segment
	fd := -1
	if req.Usage&pluginapi.UsageMap != 0 && req.Size > 0 {
		var err error
		if seg, fd, err = pl.newSegment(req.Size); err != nil {
			return nil, nil, err
		}
		r.Segment = seg.ID
	}
	d, err := pl.roundTrip(ctx, r, fd, 0)
	if fd >= 0 {
		unix.Close(fd)
	}
	if err == nil && d.Mapped && seg == nil {
		err = &ResultError{Detail: fmt.Sprintf("the plugin reports buffer %d as mapped, but no shared memory was offered for it", d.Buffer)}
	}
	if err != nil || !d.Mapped {
		if seg != nil {
			pl.dropSegment(seg)
		}
		if err != nil {
			return nil, nil, err
		}
		seg = nil
	}
	return &pluginapi.AllocResult{Buffer: d.Buffer, Mapped: d.Mapped}, seg, nil
}

// transferOnPlane writes or reads b through a staging segment.
func transferOnPlane(ctx context.Context, pl *plane, kind wire.FrameKind, buffer, offset uint64, b []byte) error {
	s, err := pl.lease(ctx, uint64(len(b)))
	if err != nil {
		return err
	}
	if kind == wire.FrameWrite {
		copy(s.Mem, b)
	}
	c, err := pl.send(ctx, &wire.Request{Kind: kind, Buffer: buffer, Offset: offset, Data: wire.SegRange{Segment: s.ID, Size: uint64(len(b))}}, -1, 0, func() { pl.unlease(s) })
	if err != nil {
		pl.unlease(s)
		return err
	}
	_, owned, err := pl.wait(ctx, c)
	if owned {
		if err == nil && kind == wire.FrameRead {
			copy(b, s.Mem)
		}
		pl.unlease(s)
	}
	return err
}

// stagingAlign aligns every staged range, so interpreters can use inputs in
// place.
const stagingAlign = 64

func alignUp(n uint64) uint64 { return (n + stagingAlign - 1) &^ (stagingAlign - 1) }

// SmallDispatch reports whether a dispatch's inputs and outputs (outputs: each
// output's bytes) fit together in one small staging segment, the kind the
// plane keeps many of idle. A host sends such a v1 dispatch to a plugin with
// pluginapi.Capabilities.PipelinedDispatch as one dispatch request, which the
// plugin starts without waiting for the earlier ones, instead of a write, a
// submit and a read of scratch buffers (three round trips).
func SmallDispatch(req *pluginapi.DispatchRequest, outputs []int) bool {
	var total uint64
	for _, in := range req.Inputs {
		total += alignUp(uint64(len(in)))
	}
	for _, size := range outputs {
		if size < 0 {
			return false
		}
		total += alignUp(uint64(size))
	}
	return total <= minStagingBytes
}

// dispatchOnPlane runs Backend.Dispatch with inputs and outputs staged in one
// shared segment.
func dispatchOnPlane(ctx context.Context, pl *plane, req *pluginapi.DispatchRequest, outputs []int) (*DispatchResult, error) {
	n := max(len(req.Inputs), len(req.OutputCounts))
	if n > wire.MaxBindings || len(outputs) > wire.MaxBindings {
		return nil, pluginapi.Rejected("dispatch with %d bindings and %d outputs, more than %d. Fix: use fewer buffers", n, len(outputs), wire.MaxBindings)
	}
	var total uint64
	for _, in := range req.Inputs {
		total += alignUp(uint64(len(in)))
	}
	for _, size := range outputs {
		if size < 0 {
			return nil, pluginapi.Rejected("output size %d is negative", size)
		}
		total += alignUp(uint64(size))
	}
	var s *wire.Segment
	if total > 0 {
		var err error
		if s, err = pl.lease(ctx, total); err != nil {
			return nil, err
		}
	}
	r := &wire.Request{Kind: wire.FrameDispatch, Dispatch: dispatchToWire(req), Inputs: make([]wire.SegRange, n), Outputs: make([]wire.SegRange, len(outputs))}
	var at uint64
	for i, in := range req.Inputs {
		if len(in) == 0 {
			continue
		}
		copy(s.Mem[at:], in)
		r.Inputs[i] = wire.SegRange{Segment: s.ID, Offset: at, Size: uint64(len(in))}
		at += alignUp(uint64(len(in)))
	}
	for i, size := range outputs {
		if size > 0 {
			r.Outputs[i] = wire.SegRange{Segment: s.ID, Offset: at, Size: uint64(size)}
			at += alignUp(uint64(size))
		}
	}
	var release func()
	if s != nil {
		release = func() { pl.unlease(s) }
	}
	c, err := pl.send(ctx, r, -1, len(outputs), release)
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
	res := &DispatchResult{DispatchResult: pluginapi.DispatchResult{HostNanos: d.HostNanos, DeviceNanos: d.DeviceNanos, Outputs: make([][]byte, len(outputs))}, Spans: spansFromWire(d.Spans)}
	for i, size := range d.Sizes {
		if size > uint64(outputs[i]) {
			return nil, &ResultError{Detail: fmt.Sprintf("output %d is %d bytes, the launch makes it %d; the host refused it unread", i, size, outputs[i])}
		}
		out := []byte{}
		if size > 0 {
			// A clone allocates without zeroing first.
			o := r.Outputs[i].Offset
			out = bytes.Clone(s.Mem[o : o+size])
		}
		res.Outputs[i] = out
	}
	return res, nil
}

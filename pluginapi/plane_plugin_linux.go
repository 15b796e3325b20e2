//go:build linux

package pluginapi

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/wire"
)

// acceptTimeout bounds how long an opened data plane waits for its host.
const acceptTimeout = 30 * time.Second

// planeQueueDepth bounds the requests waiting in one queue of the plugin's data
// plane; the request reader waits when a queue is full, so a busy adapter
// holds back the host's callers instead of the plugin's memory growing.
const planeQueueDepth = 64

// maxPlaneQueues bounds the per-adapter queues: requests for an adapter index
// beyond it (which the SDK rejects anyway) share the unbound queue.
const maxPlaneQueues = 64

// unboundQueue is the key of the queue of requests tied to no adapter
// (dispatches, and transfers of a buffer the plane does not know).
const unboundQueue = ^uint32(0)

// planeJob is one request waiting in a queue, with its descriptor and the
// context that Cancel ends.
type planeJob struct {
	req   *wire.Request
	fd    int
	ctx   context.Context
	spans jobSpans // when the host asked for spans
}

// planeServer is the plugin's side of the data plane: it accepts the host's one
// connection on a private unix socket, receives the ring segment with the hello
// frame, and reads the request frames of the request ring on one goroutine,
// which hands each to a queue without waiting for earlier ones to finish. A
// backend that implements [ConcurrentAdapters] gets a queue per adapter (and one
// for requests tied to no adapter), each drained in order by a goroutine of its
// own, so adapters run in parallel; any other backend gets one queue, so its
// calls stay serial in the host's order. Staging segments are attached and
// detached by the reader itself for a concurrent backend (the host uses a
// staging segment for one request at a time and detaches only idle ones), and
// in the one queue otherwise. Completions go onto the completion ring in the
// order requests finish. Requests go through the SDK's device, so a backend
// sees only checked requests and []byte views of the shared segments.
type planeServer struct {
	dev        *device
	dir        string
	ln         *net.UnixListener
	token      []byte
	concurrent bool
	// pipelined is the backend's [Pipelined], when it is also
	// ConcurrentAdapters and no spans were asked for: its submits and
	// transfers are started by a queue's goroutine and completed by another.
	pipelined Pipelined
	// dispatcher is the backend's [DispatchStarter] under the same
	// conditions: its v1 dispatches go to their pipeline's adapter queue
	// and are started there.
	dispatcher DispatchStarter
	timer      *spanTimer // nil unless the host asked for spans (SpansEnv)

	mu      sync.Mutex
	conn    *wire.RawConn
	closed  bool
	running map[uint64]context.CancelFunc

	// gone is set once the host's end of the socket closed or close was
	// called; a wait on the request ring ends then.
	gone atomic.Bool

	segMu      sync.Mutex               // guards the three maps below
	segs       map[uint32]*wire.Segment // staging segments and mapped buffers' segments
	bufSeg     map[uint64]*wire.Segment // mapped buffer → its segment
	bufAdapter map[uint64]uint32        // live buffer → the adapter it was allocated on

	// doneMu serializes the producers of the completion ring (the queues'
	// goroutines and the reader).
	doneMu sync.Mutex

	// Owned by the serving goroutine.
	queues  map[uint32]chan planeJob
	workers sync.WaitGroup
	rings   []byte     // the ring segment's mapping (set under mu)
	req     *wire.Ring // consumer side
	done    *wire.Ring // producer side (under doneMu once the queues run)
	in      []byte     // the request frame being read
}

// listenPlane opens a unix socket in a new private directory and serves the
// first connection that presents the token.
func listenPlane(dev *device) (*planeServer, error) {
	dir, err := os.MkdirTemp("", "kiln-plane-")
	if err != nil {
		return nil, fmt.Errorf("data plane directory: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("data plane socket: %w", err)
	}
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		ln.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("data plane token: %w", err)
	}
	c, ok := dev.impl.(ConcurrentAdapters)
	p := &planeServer{dev: dev, dir: dir, ln: ln, token: token, concurrent: ok && c.ConcurrentAdapters(), timer: newSpanTimer(),
		running: map[uint64]context.CancelFunc{}, segs: map[uint32]*wire.Segment{}, bufSeg: map[uint64]*wire.Segment{},
		bufAdapter: map[uint64]uint32{}, queues: map[uint32]chan planeJob{}}
	if pl, ok := dev.impl.(Pipelined); ok && p.concurrent && p.timer == nil {
		p.pipelined = pl
	}
	if ds, ok := dev.impl.(DispatchStarter); ok && p.concurrent && p.timer == nil {
		p.dispatcher = ds
	}
	go p.serve()
	return p, nil
}

func (p *planeServer) socketPath() string { return filepath.Join(p.dir, "s") }

// cancel cancels the running request seq.
func (p *planeServer) cancel(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.running[seq]; c != nil {
		c()
	}
}

// close ends the data plane; the serving goroutine unmaps the staging segments.
func (p *planeServer) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.gone.Store(true)
	p.ln.Close()
	if p.conn != nil {
		p.conn.Shutdown()
	}
}

func (p *planeServer) serve() {
	_ = p.ln.SetDeadline(time.Now().Add(acceptTimeout))
	uc, err := p.ln.AcceptUnix()
	p.ln.Close()
	os.RemoveAll(p.dir)
	if err != nil {
		return
	}
	conn, err := wire.RawFrom(uc)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		conn.Close()
		return
	}
	p.conn = conn
	p.mu.Unlock()
	r := &fdReader{conn: conn}
	watched := make(chan struct{})
	defer p.shutdown(conn, r, watched)
	if err := wire.CheckPeer(conn.FD()); err != nil {
		close(watched)
		return
	}
	if !p.hello(r) {
		close(watched)
		return
	}
	go p.watch(conn, watched)
	defer p.stopQueues()
	spin := false
	for {
		b, err := p.nextRequest(spin)
		if err != nil {
			return
		}
		var js jobSpans
		if p.timer != nil {
			js.read = p.timer.clock.now()
		}
		req, err := wire.DecodeRequest(b)
		if err != nil {
			return
		}
		if p.timer != nil {
			js.decoded = p.timer.clock.now()
		}
		fd := -1
		if req.FD {
			if fd, err = r.note(req.Seq); err != nil {
				return
			}
		}
		job := planeJob{req: req, fd: fd, ctx: p.start(req.Seq), spans: js}
		if p.concurrent && (req.Kind == wire.FrameAttach || req.Kind == wire.FrameDetach) {
			if err := p.answer(wire.EncodeDone(req.Kind, p.handle(job))); err != nil {
				return
			}
		} else if !p.enqueue(p.queueFor(req), job, watched) {
			p.finish(req.Seq)
			if fd >= 0 {
				unix.Close(fd)
			}
			return
		}
		// Let the queue's goroutine, readied by the send, run now on this
		// P: the reader's spin and futex sleep below never give the P back
		// to the scheduler, so without this it waited for the end of the
		// spin and for sysmon to take the P from the sleeping reader (about
		// 100 µs of every 1-element round trip, measured).
		runtime.Gosched()
		// The host's next request tends to follow at once (a loop of small
		// dispatches): poll for it a while before sleeping.
		spin = true
	}
}

// queueFor returns the key of the queue req goes to: the one queue of a
// backend that is not [ConcurrentAdapters]; else the queue of the adapter it
// names (alloc, submit) or of the adapter its buffer was allocated on (write,
// read, free; a copy's destination), so that the host's order on one adapter holds;
// a dispatch of a [DispatchStarter] to its pipeline's adapter, whose queue
// alone starts work on it; else the unbound queue.
func (p *planeServer) queueFor(req *wire.Request) uint32 {
	if !p.concurrent {
		return 0
	}
	a := unboundQueue
	switch req.Kind {
	case wire.FrameAlloc, wire.FrameSubmit:
		a = req.Adapter
	case wire.FrameWrite, wire.FrameRead, wire.FrameFree, wire.FrameCopy:
		buffer := req.Buffer
		if req.Kind == wire.FrameCopy {
			buffer = req.Dst.Buffer
		}
		p.segMu.Lock()
		if known, ok := p.bufAdapter[buffer]; ok {
			a = known
		}
		p.segMu.Unlock()
	case wire.FrameDispatch:
		if p.dispatcher != nil {
			if known, ok := p.dev.pipelineAdapter(req.Dispatch.Pipeline); ok {
				a = uint32(known)
			}
		}
	}
	if a >= maxPlaneQueues {
		return unboundQueue
	}
	return a
}

// enqueue hands job to queue key, starting the queue's goroutine on first use;
// it waits while the queue is full, and gives up (false) when the host's end of
// the socket closed (watched is closed then).
func (p *planeServer) enqueue(key uint32, job planeJob, watched <-chan struct{}) bool {
	q := p.queues[key]
	if q == nil {
		q = make(chan planeJob, planeQueueDepth)
		p.queues[key] = q
		p.workers.Add(1)
		go p.drain(q)
	}
	select {
	case q <- job:
		return true
	case <-watched:
		return false
	}
}

// drain runs the jobs of one queue in order, answering each; once the plane is
// gone, or an answer could not be put, the rest are dropped unrun. On a
// [Pipelined] backend it starts submits and transfers and hands their
// completions to the queue's completer, and runs any other job only once the
// completer has answered everything started before it.
func (p *planeServer) drain(q <-chan planeJob) {
	defer p.workers.Done()
	var c *completer // started on the first pipelined job
	defer func() {
		if c != nil {
			c.stop()
		}
	}()
	for {
		job, ok := p.receive(q)
		if !ok {
			return
		}
		if p.gone.Load() {
			p.finish(job.req.Seq)
			if job.fd >= 0 {
				unix.Close(job.fd)
			}
			continue
		}
		if p.pipelined != nil || p.dispatcher != nil {
			w, started, err := p.startJob(job)
			if started {
				if err != nil {
					p.answerJob(job, err)
					continue
				}
				j := startedJob{seq: job.req.Seq, kind: job.req.Kind, began: time.Now(), fill: w}
				if len(q) == 0 && (c == nil || c.idle()) {
					// Nothing to start meanwhile and nothing started
					// before: complete it here, without handing it to
					// the completer (a thread wake-up on the way of a
					// lone caller's every request).
					p.complete(j)
					continue
				}
				if c == nil {
					c = p.newCompleter()
				}
				c.push(j)
				continue
			}
		}
		if c != nil {
			c.barrier()
		}
		if err := p.answer(wire.EncodeDone(job.req.Kind, p.handle(job))); err != nil {
			p.hangUp()
		}
	}
}

// startJob starts job on the [Pipelined] backend when it is a submit, a write or
// a read, and on the [DispatchStarter] when it is a dispatch; started is false
// for every other job (and for a submit that must run blocking), which the
// caller runs itself. w fills the job's completion once its work is done.
func (p *planeServer) startJob(job planeJob) (w func(*wire.Done) error, started bool, err error) {
	req := job.req
	switch {
	case req.Kind == wire.FrameSubmit && p.pipelined != nil:
		c, started, err := p.dev.startSubmit(job.ctx, p.pipelined, &SubmitRequest{Adapter: int(req.Adapter), Commands: commandsFromWire(req.Commands)})
		return submitted(c), started, err
	case (req.Kind == wire.FrameWrite || req.Kind == wire.FrameRead) && p.pipelined != nil:
		view, err := p.view(req.Data)
		var c Completion
		if err == nil {
			c, err = p.dev.startTransfer(job.ctx, p.pipelined, req.Kind == wire.FrameWrite, req.Buffer, req.Offset, view)
		}
		return submitted(c), true, err
	case req.Kind == wire.FrameDispatch && p.dispatcher != nil:
		w, err := p.startDispatch(job.ctx, req)
		return w, true, err
	}
	return nil, false, nil
}

// submitted fills a completion from a started submit's or transfer's result.
func submitted(c Completion) func(*wire.Done) error {
	return func(d *wire.Done) error {
		res, err := c()
		if err == nil && res != nil {
			d.HostNanos, d.DeviceNanos = res.HostNanos, res.DeviceNanos
		}
		return err
	}
}

// startDispatch starts a dispatch on the [DispatchStarter] with its staged
// inputs and outputs, as dispatch runs one: the completion reports every
// output's true size and copies each that fits into its staged range unless
// the backend put it there.
func (p *planeServer) startDispatch(ctx context.Context, req *wire.Request) (func(*wire.Done) error, error) {
	dr, outs, err := p.stagedDispatch(req)
	if err != nil {
		return nil, err
	}
	c, err := p.dev.startDispatch(ctx, p.dispatcher, dr, outs)
	if err != nil {
		return nil, err
	}
	return func(d *wire.Done) error {
		res, err := c()
		if err != nil {
			return err
		}
		return fillDispatch(d, res, outs)
	}, nil
}

// answerJob answers a job that failed to start.
func (p *planeServer) answerJob(job planeJob, err error) {
	p.finish(job.req.Seq)
	d := &wire.Done{Seq: job.req.Seq, Status: statusOf(err), Msg: err.Error()}
	if err := p.answer(wire.EncodeDone(job.req.Kind, d)); err != nil {
		p.hangUp()
	}
}

// complete waits for a started job's completion and answers its request
// (unless the host is gone).
func (p *planeServer) complete(j startedJob) {
	d := &wire.Done{Seq: j.seq}
	err := j.fill(d)
	p.finish(j.seq)
	if err != nil {
		*d = wire.Done{Seq: j.seq, Status: statusOf(err), Msg: err.Error()}
	}
	if d.Status == 0 && d.HostNanos == 0 {
		d.HostNanos = max(time.Since(j.began).Nanoseconds(), 1)
	}
	if !p.gone.Load() {
		if err := p.answer(wire.EncodeDone(j.kind, d)); err != nil {
			p.hangUp()
		}
	}
}

// startedJob is work a [Pipelined] backend started, waiting for its completion.
type startedJob struct {
	seq   uint64
	kind  wire.FrameKind
	began time.Time
	// fill waits for the work and fills the completion's result fields.
	fill func(*wire.Done) error
}

// completer is the goroutine of one queue that calls the completions of the
// work its queue started, in start order, and answers each request. Its
// channel holds at most planeQueueDepth started jobs: the queue's goroutine
// waits when it is full, so started work stays bounded too.
type completer struct {
	p    *planeServer
	jobs chan startedJob
	// busy counts the jobs pushed and not yet answered (or dropped), and
	// pending too, for idle.
	busy    sync.WaitGroup
	pending atomic.Int64
	done    chan struct{}
}

func (p *planeServer) newCompleter() *completer {
	c := &completer{p: p, jobs: make(chan startedJob, planeQueueDepth), done: make(chan struct{})}
	go c.run()
	return c
}

// push hands a started job to the completer.
func (c *completer) push(j startedJob) {
	c.busy.Add(1)
	c.pending.Add(1)
	c.jobs <- j
}

// barrier waits until every pushed job was answered.
func (c *completer) barrier() { c.busy.Wait() }

// idle reports whether every pushed job was answered.
func (c *completer) idle() bool { return c.pending.Load() == 0 }

// stop lets the completer finish what was pushed and waits for it.
func (c *completer) stop() {
	close(c.jobs)
	<-c.done
}

func (c *completer) run() {
	defer close(c.done)
	p := c.p
	for {
		j, ok := spinReceive(p, c.jobs)
		if !ok {
			return
		}
		p.complete(j)
		c.pending.Add(-1)
		c.busy.Done()
	}
}

// receive returns the next job of q (false once q is closed). On a machine
// where the ring sides spin (p.req.Busy() > 0: enough CPUs that the reader runs
// elsewhere) it polls q for wire.SpinWait first, yielding to the scheduler between
// polls, so that in a loop of small requests the next one finds its goroutine
// running instead of parked: a parked one costs the reader a thread wake-up and
// the request a scheduling delay on its way to the backend. A queue's completer
// receives its started jobs the same way.
func (p *planeServer) receive(q <-chan planeJob) (planeJob, bool) { return spinReceive(p, q) }

func spinReceive[T any](p *planeServer, q <-chan T) (T, bool) {
	if p.req.Busy() > 0 {
		until := time.Now().Add(wire.SpinWait)
		for time.Now().Before(until) {
			select {
			case v, ok := <-q:
				return v, ok
			default:
			}
			runtime.Gosched()
		}
	}
	v, ok := <-q
	return v, ok
}

// stopQueues closes every queue and waits until their goroutines have run or
// dropped what was in them.
func (p *planeServer) stopQueues() {
	p.gone.Store(true) // an answer waiting for room in the completion ring gives up
	for _, q := range p.queues {
		close(q)
	}
	p.workers.Wait()
}

// hangUp ends the plane from the plugin's side: the reader wakes and returns.
func (p *planeServer) hangUp() {
	p.gone.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		p.conn.Shutdown()
	}
}

// watch sleeps until the host's end of the socket closes (or close shuts it
// down), then wakes the serving goroutine.
func (p *planeServer) watch(conn *wire.RawConn, watched chan struct{}) {
	defer close(watched)
	fds := []unix.PollFd{{Fd: int32(conn.FD()), Events: unix.POLLRDHUP}}
	for {
		_, err := unix.Poll(fds, -1)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	p.gone.Store(true)
	p.req.Interrupt()
}

// hello reads the first frame from the socket, which must carry the token and
// the ring segment, maps the rings and answers on the completion ring.
func (p *planeServer) hello(r *fdReader) bool {
	b, err := r.frame(wire.MaxRequestFrameBytes)
	if err != nil {
		return false
	}
	req, err := wire.DecodeRequest(b)
	if err != nil || req.Kind != wire.FrameHello {
		return false
	}
	fd := r.popFD()
	if fd < 0 {
		return false
	}
	if subtle.ConstantTimeCompare(req.Token, p.token) != 1 {
		unix.Close(fd)
		return false
	}
	mem, err := wire.MapRingSegment(fd)
	if err != nil {
		return false
	}
	p.mu.Lock()
	p.rings = mem
	p.mu.Unlock()
	p.req, p.done = wire.RingPair(mem)
	return p.answer(wire.EncodeDone(wire.FrameHello, &wire.Done{Seq: req.Seq})) == nil
}

// nextRequest returns the next request frame, copied out of the request ring
// (valid until the next call), waiting for it; with spin it polls the ring for
// wire.SpinWait before it sleeps. It fails when the host is gone or its ring breaks
// the format.
func (p *planeServer) nextRequest(spin bool) ([]byte, error) {
	until := time.Now().Add(wire.SpinWait)
	for {
		b, in, ok, err := p.req.Next(p.in, wire.MaxRequestFrameBytes)
		p.in = in
		switch {
		case err != nil:
			return nil, err
		case ok:
			return b, nil
		case spin:
			spin = false
			if p.req.Spin(until) {
				continue
			}
		}
		if p.gone.Load() {
			return nil, errPlaneClosed
		}
		p.req.Sleep(wire.RingWaitTimeout, p.gone.Load)
		if !p.req.Pending() && wire.HungUp(p.conn.FD()) {
			return nil, io.EOF
		}
	}
}

// answer puts a completion frame into the completion ring, waiting for room
// while the host is there; one producer at a time.
func (p *planeServer) answer(b []byte) error {
	p.doneMu.Lock()
	defer p.doneMu.Unlock()
	var until time.Time
	for {
		err := p.done.Put(b)
		if err != wire.ErrRingFull {
			return err
		}
		if p.gone.Load() {
			return errPlaneClosed
		}
		wire.WaitForRoom(&until)
	}
}

// shutdown closes the connection, the descriptors never claimed by a frame,
// the ring segment and the staging segments. Mapped buffers' segments stay: the
// backend may still hold them until it is closed.
func (p *planeServer) shutdown(conn *wire.RawConn, r *fdReader, watched chan struct{}) {
	p.gone.Store(true)
	conn.Shutdown()
	<-watched
	if p.rings != nil {
		_ = unix.Munmap(p.rings) // fails only for a mapping unix.Mmap did not make
		p.mu.Lock()
		p.rings = nil
		p.mu.Unlock()
		p.req, p.done = nil, nil
	}
	conn.Close()
	for fd := r.popFD(); fd >= 0; fd = r.popFD() {
		unix.Close(fd)
	}
	p.segMu.Lock()
	var staging []*wire.Segment
	for id, s := range p.segs {
		if !p.isBufferSegment(s) {
			staging = append(staging, s)
		}
		delete(p.segs, id)
	}
	p.segMu.Unlock()
	for _, s := range staging {
		_ = p.detach(context.Background(), s) // the host is gone: nobody to tell
	}
}

// isBufferSegment reports whether s is a mapped buffer's segment; segMu is held.
func (p *planeServer) isBufferSegment(s *wire.Segment) bool {
	for _, b := range p.bufSeg {
		if b == s {
			return true
		}
	}
	return false
}

// start returns the context of request seq, which Cancel ends from the moment
// the request is read, queued or running.
func (p *planeServer) start(seq uint64) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	p.running[seq] = cancel
	p.mu.Unlock()
	return ctx
}

// finish forgets request seq and ends its context.
func (p *planeServer) finish(seq uint64) {
	p.mu.Lock()
	cancel := p.running[seq]
	delete(p.running, seq)
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// handle runs one request and returns its completion.
func (p *planeServer) handle(job planeJob) *wire.Done {
	defer p.finish(job.req.Seq)
	d := &wire.Done{Seq: job.req.Seq}
	timed := p.timer != nil && (job.req.Kind == wire.FrameSubmit || job.req.Kind == wire.FrameDispatch)
	var began int64
	ctx, mark := job.ctx, (*launchMark)(nil)
	if timed {
		ctx, mark = p.timer.withLaunchMark(ctx)
		began = p.timer.clock.now()
	}
	err := p.run(ctx, job.req, job.fd, d)
	if err != nil {
		d.Status, d.Msg = statusOf(err), err.Error()
	} else if timed {
		d.Spans = spansToWire(p.timer.spans(job.spans, began, p.timer.clock.now(), d.DeviceNanos, mark))
	}
	return d
}

// run executes req, filling d's result fields.
func (p *planeServer) run(ctx context.Context, req *wire.Request, fd int, d *wire.Done) error {
	switch req.Kind {
	case wire.FrameAttach:
		if p.attached(req.Segment) {
			unix.Close(fd)
			return Rejected("segment %d is already attached", req.Segment)
		}
		s, err := p.attach(ctx, req.Segment, fd, req.Size)
		if err != nil {
			return err
		}
		p.segMu.Lock()
		p.segs[req.Segment] = s
		p.segMu.Unlock()
		return nil
	case wire.FrameDetach:
		p.segMu.Lock()
		s, ok := p.segs[req.Segment]
		staging := ok && !p.isBufferSegment(s)
		if staging {
			delete(p.segs, req.Segment)
		}
		p.segMu.Unlock()
		if !staging {
			return Rejected("detach of segment %d, which is not a staging segment", req.Segment)
		}
		return p.detach(ctx, s)
	case wire.FrameAlloc:
		return p.alloc(ctx, req, fd, d)
	case wire.FrameFree:
		if err := p.dev.free(ctx, req.Buffer); err != nil {
			return err
		}
		p.segMu.Lock()
		s := p.bufSeg[req.Buffer]
		delete(p.bufAdapter, req.Buffer)
		if s != nil {
			delete(p.bufSeg, req.Buffer)
			delete(p.segs, s.ID)
		}
		p.segMu.Unlock()
		if s != nil {
			return p.detach(ctx, s)
		}
		return nil
	case wire.FrameWrite, wire.FrameRead:
		view, err := p.view(req.Data)
		if err != nil {
			return err
		}
		if req.Kind == wire.FrameWrite {
			return p.dev.write(ctx, req.Buffer, req.Offset, view)
		}
		return p.dev.read(ctx, req.Buffer, req.Offset, view)
	case wire.FrameSubmit:
		res, err := p.dev.submit(ctx, &SubmitRequest{Adapter: int(req.Adapter), Commands: commandsFromWire(req.Commands)})
		if err != nil {
			return err
		}
		d.HostNanos, d.DeviceNanos = res.HostNanos, res.DeviceNanos
		return nil
	case wire.FrameDispatch:
		return p.dispatch(ctx, req, d)
	case wire.FrameCopy:
		return p.dev.copyPeer(ctx, rangeFromWire(req.Dst), rangeFromWire(req.Src))
	}
	return Rejected("request kind %d is not served on the data plane", req.Kind)
}

func (p *planeServer) alloc(ctx context.Context, req *wire.Request, fd int, d *wire.Done) error {
	var s *wire.Segment
	if req.Segment != 0 {
		if p.attached(req.Segment) {
			unix.Close(fd)
			return Rejected("segment %d is already attached", req.Segment)
		}
		if req.Size == 0 {
			unix.Close(fd)
			return Rejected("a shared segment for an empty buffer")
		}
		var err error
		if s, err = p.attach(ctx, req.Segment, fd, req.Size); err != nil {
			return err
		}
	}
	ar := &AllocRequest{Adapter: int(req.Adapter), Size: req.Size, Usage: BufferUsage(req.Usage)}
	if s != nil {
		ar.Shared, ar.SharedSegment = s.Mem[:req.Size:req.Size], uint64(s.ID)
	}
	res, err := p.dev.alloc(ctx, ar)
	if err != nil {
		if s != nil {
			_ = p.detach(ctx, s) // the allocation's error says more
		}
		return err
	}
	d.Buffer, d.Mapped = res.Buffer, res.Mapped
	p.segMu.Lock()
	p.bufAdapter[res.Buffer] = req.Adapter
	if s != nil && res.Mapped {
		p.segs[s.ID] = s
		p.bufSeg[res.Buffer] = s
	}
	p.segMu.Unlock()
	if s != nil && !res.Mapped {
		if err := p.detach(ctx, s); err != nil {
			return fmt.Errorf("buffer %d was allocated, but detaching the shared memory it declined failed: %w", res.Buffer, err)
		}
	}
	return nil
}

// attached reports whether segment id is attached.
func (p *planeServer) attached(id uint32) bool {
	p.segMu.Lock()
	defer p.segMu.Unlock()
	_, ok := p.segs[id]
	return ok
}

// attach maps a received segment and announces it to the backend
// ([Segments.AttachSegment]); when the backend refuses it, it is unmapped again.
func (p *planeServer) attach(ctx context.Context, id uint32, fd int, size uint64) (*wire.Segment, error) {
	s, err := wire.MapSegment(id, fd, size)
	if err != nil {
		return nil, err
	}
	if err := p.dev.attachSegment(ctx, uint64(id), s.Mem); err != nil {
		s.Unmap()
		return nil, err
	}
	return s, nil
}

// detach ends a segment for the backend ([Segments.DetachSegment]) and unmaps
// it, whatever the backend answered.
func (p *planeServer) detach(ctx context.Context, s *wire.Segment) error {
	err := p.dev.detachSegment(ctx, uint64(s.ID))
	s.Unmap()
	return err
}

// view returns a staged range, or a RejectedError when it lies outside its
// segment or names none.
func (p *planeServer) view(r wire.SegRange) ([]byte, error) {
	if r.Size == 0 {
		return []byte{}, nil
	}
	p.segMu.Lock()
	s, ok := p.segs[r.Segment]
	staging := ok && !p.isBufferSegment(s)
	p.segMu.Unlock()
	if !staging {
		return nil, Rejected("staged range names segment %d, which is not a staging segment", r.Segment)
	}
	v, ok := s.View(r.Offset, r.Size)
	if !ok {
		return nil, Rejected("staged range [%d, %d+%d) lies outside segment %d of %d bytes", r.Offset, r.Offset, r.Size, r.Segment, len(s.Mem))
	}
	return v, nil
}

// dispatch runs Backend.Dispatch on staged inputs and copies each output into its
// staged range, reporting every output's true size; an output longer than its
// range is not copied, and the host refuses it.
func (p *planeServer) dispatch(ctx context.Context, req *wire.Request, d *wire.Done) error {
	dr, outs, err := p.stagedDispatch(req)
	if err != nil {
		return err
	}
	res, err := p.dev.dispatch(ctx, dr)
	if err != nil {
		return err
	}
	return fillDispatch(d, res, outs)
}

// stagedDispatch returns a dispatch request with its inputs' staged views, and
// the staged ranges of its outputs.
func (p *planeServer) stagedDispatch(req *wire.Request) (*DispatchRequest, [][]byte, error) {
	dr := req.Dispatch
	for i, in := range req.Inputs {
		if dr.Inputs[i] == nil {
			continue
		}
		v, err := p.view(in)
		if err != nil {
			return nil, nil, err
		}
		dr.Inputs[i] = v
	}
	outs := make([][]byte, len(req.Outputs))
	for i, o := range req.Outputs {
		v, err := p.view(o)
		if err != nil {
			return nil, nil, err
		}
		outs[i] = v
	}
	return dispatchFromWire(dr), outs, nil
}

// fillDispatch reports a dispatch's result in d: every output's true size, and
// each output that fits copied into its staged range (unless it is there
// already).
func fillDispatch(d *wire.Done, res *DispatchResult, outs [][]byte) error {
	if len(res.Outputs) != len(outs) {
		return &badResult{fmt.Sprintf("%d outputs, the host expects %d", len(res.Outputs), len(outs))}
	}
	d.Sizes = make([]uint64, len(outs))
	for i, o := range res.Outputs {
		d.Sizes[i] = uint64(len(o))
		if len(o) <= len(outs[i]) && !sameStart(o, outs[i]) {
			copy(outs[i], o)
		}
	}
	d.HostNanos, d.DeviceNanos = res.HostNanos, res.DeviceNanos
	return nil
}

// sameStart reports whether a and b are non-empty and start at the same byte.
func sameStart(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// fdReader reads frames from a unix stream socket, collecting the descriptors
// that arrive with them (SCM_RIGHTS) in order.
type fdReader struct {
	conn *wire.RawConn
	buf  []byte
	r, w int
	fds  []int
	oob  []byte
}

// fill reads more bytes, waiting for them; the buffer has room.
func (fr *fdReader) fill() error { return fr.fillFlags(0) }

// fillFlags reads more bytes with recvmsg's extra flags.
func (fr *fdReader) fillFlags(extra int) error {
	if fr.oob == nil {
		fr.oob = make([]byte, unix.CmsgSpace(16*4))
	}
	n, oobn, flags, err := fr.conn.Recv(fr.buf[fr.w:], fr.oob, extra)
	if err == wire.ErrNothingYet {
		return err
	}
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(fr.oob[:oobn])
		if perr != nil {
			return perr
		}
		for i := range msgs {
			fds, perr := unix.ParseUnixRights(&msgs[i])
			if perr != nil {
				return perr
			}
			fr.fds = append(fr.fds, fds...)
		}
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return errors.New("data plane: descriptors were truncated")
	}
	fr.w += n
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("data plane: connection closed")
	}
	return nil
}

// compact makes the buffer on first use and moves what is unread to its start.
func (fr *fdReader) compact() {
	if fr.buf == nil {
		fr.buf = make([]byte, 64<<10)
	}
	if fr.r > 0 {
		copy(fr.buf, fr.buf[fr.r:fr.w])
		fr.w -= fr.r
		fr.r = 0
	}
}

// frame returns the next whole frame, valid until the next call.
func (fr *fdReader) frame(limit int) ([]byte, error) {
	fr.compact()
	for fr.w < wire.FrameHeaderBytes {
		if err := fr.fill(); err != nil {
			return nil, err
		}
	}
	h, err := wire.ParseHeader(fr.buf[:wire.FrameHeaderBytes], limit)
	if err != nil {
		return nil, err
	}
	size := int(h.Size)
	if size > len(fr.buf) {
		grown := make([]byte, size)
		copy(grown, fr.buf[:fr.w])
		fr.buf = grown
	}
	for fr.w < size {
		if err := fr.fill(); err != nil {
			return nil, err
		}
	}
	fr.r = size
	return fr.buf[:size], nil
}

// note returns the descriptor of request seq: the host sends it on the socket,
// in a note of 8 bytes holding seq, before it publishes the frame, so it must be
// there already; a missing or mismatched note breaks the protocol.
func (fr *fdReader) note(seq uint64) (int, error) {
	fr.compact()
	for fr.w < 8 {
		if err := fr.fillFlags(unix.MSG_DONTWAIT); err == wire.ErrNothingYet {
			return -1, fmt.Errorf("request %d carries a descriptor, but none was sent", seq)
		} else if err != nil {
			return -1, err
		}
	}
	got := binary.LittleEndian.Uint64(fr.buf)
	fr.r = 8
	fd := fr.popFD()
	if got != seq || fd < 0 {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("descriptor note for request %d (with descriptor: %v), want one for %d", got, fd >= 0, seq)
	}
	return fd, nil
}

// popFD returns the oldest received descriptor, or -1 when none is left.
func (fr *fdReader) popFD() int {
	if len(fr.fds) == 0 {
		return -1
	}
	fd := fr.fds[0]
	fr.fds = fr.fds[1:]
	return fd
}

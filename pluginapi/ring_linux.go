//go:build linux

package pluginapi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The data plane's rings: two single-producer, single-consumer byte rings in one
// shared memfd segment the host creates and hands to the plugin with its hello
// frame. Requests go host → plugin in one, completions plugin → host in the
// other; each carries the frames of frame.go unchanged. See docs/design.md,
// "Fast path: frames", for the layout and the wake protocol.
//
// Neither side trusts a word the other writes: the indices of the peer are
// checked against this side's own view before use, every frame is copied out
// of the ring into private memory before it is parsed, and a frame is bounded
// by the limit of its direction.

// Ring segment layout. The first page holds a header and one control block per
// ring; the rings' data follow, page-aligned.
const (
	ringMagic   = 0x676e69726e6c696b // "kilnring", little-endian
	ringVersion = 1

	ringRequestCtl  = 256  // control block of the request ring
	ringDoneCtl     = 512  // control block of the completion ring
	ringDataOffset  = 4096 // the request ring's data; the completion ring's follows
	ringRequestSize = 2 << 20
	ringDoneSize    = 64 << 10
	ringSegmentSize = ringDataOffset + ringRequestSize + ringDoneSize

	// Offsets inside a control block; each word has a cache line of its own.
	ctlHead     = 0   // u64, written by the producer: bytes published
	ctlTail     = 64  // u64, written by the consumer: bytes consumed
	ctlSleeping = 128 // u32, written by the consumer: 1 while it may sleep
	ctlWake     = 192 // u32, the futex word: bumped to wake the consumer
)

// ringWaitTimeout bounds one futex sleep: a side that wakes without news checks
// that its peer is still there before it sleeps again.
const ringWaitTimeout = 100 * time.Millisecond

// spinWait is how long a side of the data plane that expects a frame soon polls
// its ring before it sleeps in the kernel: the host after it sent a request,
// the plugin after it answered one. A thread asleep on an idle core takes tens
// of microseconds to wake, which is the whole cost of a small request; the
// bound keeps the polling to that much CPU time per request, and an idle plane
// sleeps.
const spinWait = 50 * time.Microsecond

// ringNap is how long a producer waiting for room in a ring sleeps between
// looks, once it has polled for spinWait.
const ringNap = 100 * time.Microsecond

// waitForRoom is one wait of a producer whose ring is full: it yields the CPU
// for spinWait after the first call (which sets *until), then naps ringNap at a
// time.
func waitForRoom(until *time.Time) {
	if until.IsZero() {
		*until = time.Now().Add(spinWait)
	}
	if time.Now().Before(*until) {
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) // cannot fail on Linux
	} else {
		time.Sleep(ringNap)
	}
}

// busyPolls is how many times a spinning side reads the peer's index before it
// starts yielding the CPU between reads (about a microsecond).
const busyPolls = 64

// busyWaitFor is how long a spinning side reads the peer's index back to back
// before it yields between reads, on a machine of cpus CPUs. With at least
// busyCPUs the peer runs on another CPU, and a yield costs a system call
// (about half a microsecond on a virtual machine) between reads of an index
// that moves a few microseconds later: reading it back to back for the first
// busyWait of the window saved about 2 µs of a 1-element round trip on a
// 16-CPU H200 host. On smaller machines the peer may wait for this very CPU,
// so the side yields after busyPolls reads.
func busyWaitFor(cpus int) time.Duration {
	if cpus >= busyCPUs {
		return busyWait
	}
	return 0
}

const (
	busyCPUs = 4
	busyWait = 20 * time.Microsecond
)

// errRingFull says a frame does not fit into the free part of a ring yet.
var errRingFull = errors.New("ring full")

// ring is one side's handle on one direction of the data plane. The control
// words and data live in shared memory; pos and peer are this side's own,
// private view, which is what every check is made against.
type ring struct {
	head, tail *uint64
	sleeping   *uint32
	wake       *uint32
	data       []byte
	mask       uint64

	// pos is this side's index: the producer's head, or the consumer's tail.
	pos uint64
	// peer is the last index of the other side that passed the checks.
	peer uint64

	// hdr is the consumer's private copy of a frame header.
	hdr [frameHeaderBytes]byte

	// busy is busyWaitFor this machine: how much of a spin reads back to back.
	busy time.Duration
}

// newRing makes a handle on the ring whose control block is at ctl in mem and
// whose data is mem[off:off+size]; size is a power of two. mem must stay
// mapped while the handle is used.
func newRing(mem []byte, ctl, off, size int) *ring {
	word := func(at int) unsafe.Pointer { return unsafe.Pointer(&mem[ctl+at]) }
	return &ring{
		head:     (*uint64)(word(ctlHead)),
		tail:     (*uint64)(word(ctlTail)),
		sleeping: (*uint32)(word(ctlSleeping)),
		wake:     (*uint32)(word(ctlWake)),
		data:     mem[off : off+size : off+size],
		mask:     uint64(size - 1),
		busy:     busyWaitFor(runtime.NumCPU()),
	}
}

// ringPair returns the request and completion rings of a ring segment.
func ringPair(mem []byte) (requests, completions *ring) {
	return newRing(mem, ringRequestCtl, ringDataOffset, ringRequestSize),
		newRing(mem, ringDoneCtl, ringDataOffset+ringRequestSize, ringDoneSize)
}

// initRingSegment writes the header of a new (zeroed) ring segment.
func initRingSegment(mem []byte) {
	binary.LittleEndian.PutUint64(mem[0:], ringMagic)
	binary.LittleEndian.PutUint32(mem[8:], ringVersion)
	binary.LittleEndian.PutUint32(mem[12:], ringRequestSize)
	binary.LittleEndian.PutUint32(mem[16:], ringDoneSize)
}

// checkRingSegment checks the header and the starting indices of a ring segment
// the plugin received.
func checkRingSegment(mem []byte) error {
	if len(mem) < ringSegmentSize {
		return fmt.Errorf("ring segment of %d bytes, want %d", len(mem), ringSegmentSize)
	}
	magic := binary.LittleEndian.Uint64(mem[0:])
	version := binary.LittleEndian.Uint32(mem[8:])
	req, dn := binary.LittleEndian.Uint32(mem[12:]), binary.LittleEndian.Uint32(mem[16:])
	if magic != ringMagic || version != ringVersion || req != ringRequestSize || dn != ringDoneSize {
		return fmt.Errorf("ring segment header %#x version %d with rings of %d and %d bytes, want %#x version %d, %d and %d",
			magic, version, req, dn, uint64(ringMagic), ringVersion, ringRequestSize, ringDoneSize)
	}
	return nil
}

// copyOut copies len(dst) bytes of the ring from index at.
func (r *ring) copyOut(dst []byte, at uint64) {
	o := at & r.mask
	n := copy(dst, r.data[o:])
	copy(dst[n:], r.data)
}

// copyIn copies src into the ring at index at.
func (r *ring) copyIn(src []byte, at uint64) {
	o := at & r.mask
	n := copy(r.data[o:], src)
	copy(r.data, src[n:])
}

// published returns how many bytes the producer published beyond this
// consumer's tail, checking its head: it never moves back, and it is never
// more than a ring ahead.
func (r *ring) published() (uint64, error) {
	h := atomic.LoadUint64(r.head)
	if h < r.peer || h-r.pos > uint64(len(r.data)) {
		return 0, fmt.Errorf("ring head %d is outside [%d, %d]", h, r.peer, r.pos+uint64(len(r.data)))
	}
	r.peer = h
	return h - r.pos, nil
}

// next copies the next whole frame out of the ring into buf (grown when
// needed; at most limit bytes) and consumes it. ok is false when no frame is
// there. A partial frame, a header that breaks the format or a frame larger
// than what was published is an error: producers publish whole frames only.
func (r *ring) next(buf []byte, limit int) (frame, grown []byte, ok bool, err error) {
	n, err := r.published()
	if err != nil || n == 0 {
		return nil, buf, false, err
	}
	if n < frameHeaderBytes {
		return nil, buf, false, fmt.Errorf("%d bytes published, less than a frame header", n)
	}
	r.copyOut(r.hdr[:], r.pos)
	h, err := parseHeader(r.hdr[:], limit)
	if err != nil {
		return nil, buf, false, err
	}
	if uint64(h.size) > n {
		return nil, buf, false, fmt.Errorf("frame of %d bytes, only %d published", h.size, n)
	}
	if int(h.size) > cap(buf) {
		buf = make([]byte, h.size)
	}
	frame = buf[:h.size]
	copy(frame, r.hdr[:])
	r.copyOut(frame[frameHeaderBytes:], r.pos+frameHeaderBytes)
	r.pos += uint64(h.size)
	atomic.StoreUint64(r.tail, r.pos)
	return frame, buf, true, nil
}

// free returns how many bytes the producer may write, checking the consumer's
// tail: it never moves back and never passes the head.
func (r *ring) free() (uint64, error) {
	t := atomic.LoadUint64(r.tail)
	if t < r.peer || t > r.pos {
		return 0, fmt.Errorf("ring tail %d is outside [%d, %d]", t, r.peer, r.pos)
	}
	r.peer = t
	return uint64(len(r.data)) - (r.pos - t), nil
}

// put publishes frame b when it fits (errRingFull when it does not yet), and
// wakes the consumer when it said it may sleep.
func (r *ring) put(b []byte) error {
	if len(b) > len(r.data) {
		return fmt.Errorf("frame of %d bytes, more than the ring's %d", len(b), len(r.data))
	}
	free, err := r.free()
	if err != nil {
		return err
	}
	if free < uint64(len(b)) {
		return errRingFull
	}
	r.copyIn(b, r.pos)
	r.pos += uint64(len(b))
	atomic.StoreUint64(r.head, r.pos)
	if atomic.LoadUint32(r.sleeping) != 0 {
		r.interrupt()
	}
	return nil
}

// pending reports whether the producer's head differs from this consumer's
// tail: a frame (or a broken index, which next reports) is there.
func (r *ring) pending() bool { return atomic.LoadUint64(r.head) != r.pos }

// spin polls the ring until a frame is there or until (the end of a spinWait
// window) has passed; the first busyPolls reads, and every read in the first
// r.busy of the window, are back to back, the rest yield the CPU between reads
// (when the peer waits for this very CPU, a loaded machine, polling would hold
// it off for the whole window).
func (r *ring) spin(until time.Time) bool {
	busy := until.Add(r.busy - spinWait)
	for i := 0; ; i++ {
		if r.pending() {
			return true
		}
		if i < busyPolls {
			continue
		}
		now := time.Now()
		if now.Before(busy) {
			continue
		}
		if !now.Before(until) {
			return false
		}
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) // cannot fail on Linux
	}
}

// sleep waits until the producer publishes, interrupt is called, or timeout
// passes, unless a frame is already there or stop reports true. It announces
// the sleep in the control block first, so that the producer knows to wake it;
// the order (announce, read the futex word, look at the ring, wait on that
// word) leaves no gap in which a publish goes unnoticed. It reports whether it
// waited and was woken (or found the word moved) before timeout: a wake that
// brings no frame is spurious unless stop reports true.
func (r *ring) sleep(timeout time.Duration, stop func() bool) (woken bool) {
	atomic.StoreUint32(r.sleeping, 1)
	w := atomic.LoadUint32(r.wake)
	if !r.pending() && !stop() {
		woken = futexWait(r.wake, w, timeout)
	}
	atomic.StoreUint32(r.sleeping, 0)
	return woken
}

// interrupt wakes whoever sleeps on the ring's futex word.
func (r *ring) interrupt() {
	atomic.AddUint32(r.wake, 1)
	futexWake(r.wake)
}

// Futex operations on a MAP_SHARED word (no FUTEX_PRIVATE_FLAG: the word is
// shared between processes).
const (
	futexWaitOp = 0 // FUTEX_WAIT
	futexWakeOp = 1 // FUTEX_WAKE
)

// futexWait sleeps while *addr is val, at most timeout. Every outcome (woken,
// value changed, timed out, interrupted) returns: callers look again. It
// reports whether it returned before timeout.
func futexWait(addr *uint32, val uint32, timeout time.Duration) bool {
	ts := unix.NsecToTimespec(timeout.Nanoseconds())
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
	return errno != unix.ETIMEDOUT
}

// futexWake wakes every waiter on addr.
func futexWake(addr *uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, math.MaxInt32, 0, 0, 0)
}

// createRingSegment makes and maps the ring segment of a new plane; the caller
// sends fd with the hello frame and closes it.
func createRingSegment() ([]byte, int, error) {
	s, fd, err := createNamed(RingSegmentName, 0, ringSegmentSize)
	if err != nil {
		return nil, -1, fmt.Errorf("ring segment: %w", err)
	}
	initRingSegment(s.mem)
	return s.mem, fd, nil
}

// mapRingSegment maps the ring segment the host sent (and closes fd).
func mapRingSegment(fd int) ([]byte, error) {
	s, err := mapSegment(0, fd, ringSegmentSize)
	if err != nil {
		return nil, err
	}
	if err := checkRingSegment(s.mem); err != nil {
		s.unmap()
		return nil, err
	}
	return s.mem, nil
}

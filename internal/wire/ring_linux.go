//go:build linux

package wire

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
// other; each carries the frames of doc.go unchanged. See docs/design.md,
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
	RingRequestSize = 2 << 20
	RingDoneSize    = 64 << 10
	RingSegmentSize = ringDataOffset + RingRequestSize + RingDoneSize

	// Offsets inside a control block; each word has a cache line of its own.
	ctlHead     = 0   // u64, written by the producer: bytes published
	ctlTail     = 64  // u64, written by the consumer: bytes consumed
	ctlSleeping = 128 // u32, set by the consumer while it may sleep, cleared by it or by the producer that wakes it
	ctlWake     = 192 // u32, the futex word: bumped to wake the consumer
)

// RingWaitTimeout bounds one futex sleep: a side that wakes without news checks
// that its peer is still there before it sleeps again.
const RingWaitTimeout = 100 * time.Millisecond

// SpinWait is how long a side of the data plane that expects a frame soon polls
// its ring before it sleeps in the kernel: the host after it sent a request,
// the plugin after it answered one. A thread asleep on an idle core takes tens
// of microseconds to wake, which is the whole cost of a small request; the
// bound keeps the polling to that much CPU time per request, and an idle plane
// sleeps.
const SpinWait = 50 * time.Microsecond

// RingNap is how long a producer waiting for room in a ring sleeps between
// looks, once it has polled for SpinWait.
const RingNap = 100 * time.Microsecond

// WaitForRoom is one wait of a producer whose ring is full: it yields the CPU
// for SpinWait after the first call (which sets *until), then naps RingNap at a
// time.
func WaitForRoom(until *time.Time) {
	if until.IsZero() {
		*until = time.Now().Add(SpinWait)
	}
	if time.Now().Before(*until) {
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) // cannot fail on Linux
	} else {
		time.Sleep(RingNap)
	}
}

// BusyPolls is how many times a spinning side reads the peer's index before it
// starts yielding the CPU between reads (about a microsecond).
const BusyPolls = 64

// BusyWaitFor is how long a spinning side reads the peer's index back to back
// before it yields between reads, on a machine of cpus CPUs. With at least
// BusyCPUs the peer runs on another CPU, and a yield costs a system call
// (about half a microsecond on a virtual machine) between reads of an index
// that moves a few microseconds later: reading it back to back for the first
// BusyWait of the window saved about 2 µs of a 1-element round trip on a
// 16-CPU H200 host. On smaller machines the peer may wait for this very CPU,
// so the side yields after BusyPolls reads.
func BusyWaitFor(cpus int) time.Duration {
	if cpus >= BusyCPUs {
		return BusyWait
	}
	return 0
}

const (
	BusyCPUs = 4
	BusyWait = 20 * time.Microsecond
)

// ErrRingFull says a frame does not fit into the free part of a ring yet.
var ErrRingFull = errors.New("ring full")

// Ring is one side's handle on one direction of the data plane. The control
// words and data live in shared memory; pos and peer are this side's own,
// private view, which is what every check is made against.
type Ring struct {
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
	hdr [FrameHeaderBytes]byte

	// busy is BusyWaitFor this machine: how much of a spin reads back to back.
	busy time.Duration
}

// NewRing makes a handle on the ring whose control block is at ctl in mem and
// whose data is mem[off:off+size]; size is a power of two. mem must stay
// mapped while the handle is used.
func NewRing(mem []byte, ctl, off, size int) *Ring {
	word := func(at int) unsafe.Pointer { return unsafe.Pointer(&mem[ctl+at]) }
	return &Ring{
		head:     (*uint64)(word(ctlHead)),
		tail:     (*uint64)(word(ctlTail)),
		sleeping: (*uint32)(word(ctlSleeping)),
		wake:     (*uint32)(word(ctlWake)),
		data:     mem[off : off+size : off+size],
		mask:     uint64(size - 1),
		busy:     BusyWaitFor(runtime.NumCPU()),
	}
}

// RingPair returns the request and completion rings of a ring segment.
func RingPair(mem []byte) (requests, completions *Ring) {
	return NewRing(mem, ringRequestCtl, ringDataOffset, RingRequestSize),
		NewRing(mem, ringDoneCtl, ringDataOffset+RingRequestSize, RingDoneSize)
}

// InitRingSegment writes the header of a new (zeroed) ring segment.
func InitRingSegment(mem []byte) {
	binary.LittleEndian.PutUint64(mem[0:], ringMagic)
	binary.LittleEndian.PutUint32(mem[8:], ringVersion)
	binary.LittleEndian.PutUint32(mem[12:], RingRequestSize)
	binary.LittleEndian.PutUint32(mem[16:], RingDoneSize)
}

// CheckRingSegment checks the header and the starting indices of a ring segment
// the plugin received.
func CheckRingSegment(mem []byte) error {
	if len(mem) < RingSegmentSize {
		return fmt.Errorf("ring segment of %d bytes, want %d", len(mem), RingSegmentSize)
	}
	magic := binary.LittleEndian.Uint64(mem[0:])
	version := binary.LittleEndian.Uint32(mem[8:])
	req, dn := binary.LittleEndian.Uint32(mem[12:]), binary.LittleEndian.Uint32(mem[16:])
	if magic != ringMagic || version != ringVersion || req != RingRequestSize || dn != RingDoneSize {
		return fmt.Errorf("ring segment header %#x version %d with rings of %d and %d bytes, want %#x version %d, %d and %d",
			magic, version, req, dn, uint64(ringMagic), ringVersion, RingRequestSize, RingDoneSize)
	}
	return nil
}

// copyOut copies len(dst) bytes of the ring from index at.
func (r *Ring) copyOut(dst []byte, at uint64) {
	o := at & r.mask
	n := copy(dst, r.data[o:])
	copy(dst[n:], r.data)
}

// CopyIn copies src into the ring at index at.
func (r *Ring) CopyIn(src []byte, at uint64) {
	o := at & r.mask
	n := copy(r.data[o:], src)
	copy(r.data, src[n:])
}

// Published returns how many bytes the producer published beyond this
// consumer's tail, checking its head: it never moves back, and it is never
// more than a ring ahead.
func (r *Ring) Published() (uint64, error) {
	h := atomic.LoadUint64(r.head)
	if h < r.peer || h-r.pos > uint64(len(r.data)) {
		return 0, fmt.Errorf("ring head %d is outside [%d, %d]", h, r.peer, r.pos+uint64(len(r.data)))
	}
	r.peer = h
	return h - r.pos, nil
}

// Next copies the next whole frame out of the ring into buf (grown when
// needed; at most limit bytes) and consumes it. ok is false when no frame is
// there. A partial frame, a header that breaks the format or a frame larger
// than what was published is an error: producers publish whole frames only.
func (r *Ring) Next(buf []byte, limit int) (frame, grown []byte, ok bool, err error) {
	n, err := r.Published()
	if err != nil || n == 0 {
		return nil, buf, false, err
	}
	if n < FrameHeaderBytes {
		return nil, buf, false, fmt.Errorf("%d bytes published, less than a frame header", n)
	}
	r.copyOut(r.hdr[:], r.pos)
	h, err := ParseHeader(r.hdr[:], limit)
	if err != nil {
		return nil, buf, false, err
	}
	if uint64(h.Size) > n {
		return nil, buf, false, fmt.Errorf("frame of %d bytes, only %d published", h.Size, n)
	}
	if int(h.Size) > cap(buf) {
		buf = make([]byte, h.Size)
	}
	frame = buf[:h.Size]
	copy(frame, r.hdr[:])
	r.copyOut(frame[FrameHeaderBytes:], r.pos+FrameHeaderBytes)
	r.pos += uint64(h.Size)
	atomic.StoreUint64(r.tail, r.pos)
	return frame, buf, true, nil
}

// Free returns how many bytes the producer may write, checking the consumer's
// tail: it never moves back and never passes the head.
func (r *Ring) Free() (uint64, error) {
	t := atomic.LoadUint64(r.tail)
	if t < r.peer || t > r.pos {
		return 0, fmt.Errorf("ring tail %d is outside [%d, %d]", t, r.peer, r.pos)
	}
	r.peer = t
	return uint64(len(r.data)) - (r.pos - t), nil
}

// Put publishes frame b when it fits (ErrRingFull when it does not yet), and
// wakes the consumer when it said it may sleep, once per announcement.
func (r *Ring) Put(b []byte) error {
	if len(b) > len(r.data) {
		return fmt.Errorf("frame of %d bytes, more than the ring's %d", len(b), len(r.data))
	}
	free, err := r.Free()
	if err != nil {
		return err
	}
	if free < uint64(len(b)) {
		return ErrRingFull
	}
	r.CopyIn(b, r.pos)
	r.pos += uint64(len(b))
	atomic.StoreUint64(r.head, r.pos)
	// The producer that finds the consumer announced asleep clears the
	// announcement and wakes it; a publish right after (another completion
	// of a busy plugin) finds it cleared and makes no system call, the
	// consumer being on its way already.
	if atomic.LoadUint32(r.sleeping) != 0 && atomic.CompareAndSwapUint32(r.sleeping, 1, 0) {
		r.Interrupt()
	}
	return nil
}

// Pending reports whether the producer's head differs from this consumer's
// tail: a frame (or a broken index, which next reports) is there.
func (r *Ring) Pending() bool { return atomic.LoadUint64(r.head) != r.pos }

// Spin polls the ring until a frame is there or until (the end of a SpinWait
// window) has passed; the first BusyPolls reads, and every read in the first
// r.busy of the window, are back to back, the rest yield the CPU between reads
// (when the peer waits for this very CPU, a loaded machine, polling would hold
// it off for the whole window).
func (r *Ring) Spin(until time.Time) bool {
	busy := until.Add(r.busy - SpinWait)
	for i := 0; ; i++ {
		if r.Pending() {
			return true
		}
		if i < BusyPolls {
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

// Sleep waits until the producer publishes, interrupt is called, or timeout
// passes, unless a frame is already there or stop reports true. It announces
// the sleep in the control block first, so that the producer knows to wake it;
// the order (announce, read the futex word, look at the ring, wait on that
// word) leaves no gap in which a publish goes unnoticed. It reports whether it
// waited and was woken (or found the word moved) before timeout: a wake that
// brings no frame is spurious unless stop reports true.
func (r *Ring) Sleep(timeout time.Duration, stop func() bool) (woken bool) {
	atomic.StoreUint32(r.sleeping, 1)
	w := atomic.LoadUint32(r.wake)
	if !r.Pending() && !stop() {
		woken = futexWait(r.wake, w, timeout)
	}
	atomic.StoreUint32(r.sleeping, 0)
	return woken
}

// Interrupt wakes whoever sleeps on the ring's futex word.
func (r *Ring) Interrupt() {
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

// CreateRingSegment makes and maps the ring segment of a new plane; the caller
// sends fd with the hello frame and closes it.
func CreateRingSegment() ([]byte, int, error) {
	s, fd, err := createNamed(RingSegmentName, 0, RingSegmentSize)
	if err != nil {
		return nil, -1, fmt.Errorf("ring segment: %w", err)
	}
	InitRingSegment(s.Mem)
	return s.Mem, fd, nil
}

// MapRingSegment maps the ring segment the host sent (and closes fd).
func MapRingSegment(fd int) ([]byte, error) {
	s, err := MapSegment(0, fd, RingSegmentSize)
	if err != nil {
		return nil, err
	}
	if err := CheckRingSegment(s.Mem); err != nil {
		s.Unmap()
		return nil, err
	}
	return s.Mem, nil
}

// Head is the ring's head word in shared memory (bytes published), which only
// the producer writes; a consumer reads it through Published, which checks it.
func (r *Ring) Head() *uint64 { return r.head }

// Tail is the ring's tail word in shared memory (bytes consumed), which only
// the consumer writes; a producer reads it through Free, which checks it.
func (r *Ring) Tail() *uint64 { return r.tail }

// Pos is this side's own index: the producer's head or the consumer's tail.
func (r *Ring) Pos() uint64 { return r.pos }

// Peer is the last index of the other side that passed this side's checks.
func (r *Ring) Peer() uint64 { return r.peer }

// Size is the number of data bytes the ring holds.
func (r *Ring) Size() int { return len(r.data) }

// Busy is how long this side reads the peer's index back to back before it
// yields between reads ([BusyWaitFor] this machine).
func (r *Ring) Busy() time.Duration { return r.busy }

//go:build linux

package wire

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// testRingData is where a test ring's data starts in its memory (after one
// control block).
const testRingData = 256

// testRings returns a producer's and a consumer's handle on one ring of size
// data bytes in 8-byte aligned memory.
func testRings(t testing.TB, size int) (prod, cons *Ring, mem []byte) {
	t.Helper()
	words := make([]uint64, (testRingData+size)/8)
	mem = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	return NewRing(mem, 0, testRingData, size), NewRing(mem, 0, testRingData, size), mem
}

// TestRingCarriesFramesAcrossTheWrap pins the ring's byte order: frames of
// every size come out as they went in, across the end of the ring, and a
// producer gets ErrRingFull instead of overwriting what the consumer has not
// read.
func TestRingCarriesFramesAcrossTheWrap(t *testing.T) {
	prod, cons, _ := testRings(t, 256)
	var buf []byte
	for i := range 200 {
		msg := bytes.Repeat([]byte{byte(i)}, i%90)
		want := testFrame(FrameDone, uint64(i), msg)
		if err := prod.Put(want); err != nil {
			t.Fatalf("put %d (%d bytes): %v", i, len(want), err)
		}
		got, grown, ok, err := cons.Next(buf, testLimit)
		buf = grown
		if err != nil || !ok || !bytes.Equal(got, want) {
			t.Fatalf("frame %d: %x, %v, %v; want %x", i, got, ok, err, want)
		}
	}
	if prod.pos < 4*256 {
		t.Fatalf("only %d bytes went through: the test never wrapped", prod.pos)
	}
	frame := testFrame(FrameDone, 1, make([]byte, 80))
	n := 0
	for ; prod.Put(frame) == nil; n++ {
	}
	if n != 256/len(frame) {
		t.Fatalf("%d frames of %d bytes fit into 256 bytes", n, len(frame))
	}
	if err := prod.Put(frame); err != ErrRingFull {
		t.Fatalf("put into a full ring: %v, want ErrRingFull", err)
	}
	if _, _, ok, err := cons.Next(nil, testLimit); !ok || err != nil {
		t.Fatalf("next from a full ring: %v, %v", ok, err)
	}
	if err := prod.Put(frame); err != nil {
		t.Fatalf("put after the consumer made room: %v", err)
	}
	if err := prod.Put(make([]byte, 512)); err == nil || err == ErrRingFull {
		t.Fatalf("a frame larger than the ring: %v, want an error", err)
	}
}

// TestRingRefusesWhatItsPeerMakesUp pins the checks on the other side's words:
// a consumer refuses a head that moves back, runs more than a ring ahead, or
// publishes part of a frame, a header that breaks the format or exceeds its
// direction's limit; a producer refuses a tail that moves back or passes its
// head. A refusal consumes nothing.
func TestRingRefusesWhatItsPeerMakesUp(t *testing.T) {
	frame := testFrame(FrameDone, 9, nil)
	consumer := map[string]func(prod *Ring, mem []byte){
		"head moved back": func(prod *Ring, mem []byte) {
			_ = prod.Put(frame)
			atomic.StoreUint64(prod.head, 8)
		},
		"head more than a ring ahead": func(prod *Ring, mem []byte) { atomic.StoreUint64(prod.head, 1<<40) },
		"head ahead by 2^64-1":        func(prod *Ring, mem []byte) { atomic.StoreUint64(prod.head, ^uint64(0)) },
		"part of a header": func(prod *Ring, mem []byte) {
			atomic.StoreUint64(prod.head, atomic.LoadUint64(prod.head)+8)
		},
		"part of a frame": func(prod *Ring, mem []byte) {
			_ = prod.Put(frame)
			atomic.StoreUint64(prod.head, atomic.LoadUint64(prod.head)-8)
		},
		"frame over the limit": func(prod *Ring, mem []byte) {
			big := make([]byte, FrameHeaderBytes)
			PutHeader(big, FrameHeader{Size: testLimit + 8, Kind: FrameDone})
			_ = prod.Put(big)
		},
		"reserved header bits": func(prod *Ring, mem []byte) {
			b := append([]byte(nil), frame...)
			b[6] = 1
			_ = prod.Put(b)
		},
	}
	for name, lie := range consumer {
		t.Run(name, func(t *testing.T) {
			prod, cons, mem := testRings(t, 256)
			_ = prod.Put(frame)
			if _, _, ok, err := cons.Next(nil, testLimit); !ok || err != nil {
				t.Fatalf("first frame: %v, %v", ok, err)
			}
			lie(prod, mem)
			tail := atomic.LoadUint64(cons.tail)
			if _, _, ok, err := cons.Next(nil, testLimit); err == nil || ok {
				t.Fatalf("consumer accepted it: %v, %v", ok, err)
			}
			if atomic.LoadUint64(cons.tail) != tail {
				t.Error("a refused frame moved the tail")
			}
		})
	}
	producer := map[string]func(cons *Ring){
		"tail past the head":  func(cons *Ring) { atomic.StoreUint64(cons.tail, 1<<20) },
		"tail moved back":     func(cons *Ring) { atomic.StoreUint64(cons.tail, 0) },
		"tail at 2^64-1":      func(cons *Ring) { atomic.StoreUint64(cons.tail, ^uint64(0)) },
		"tail one past head":  func(cons *Ring) { atomic.StoreUint64(cons.tail, atomic.LoadUint64(cons.head)+1) },
		"tail one before old": func(cons *Ring) { atomic.StoreUint64(cons.tail, uint64(len(frame))-1) },
	}
	for name, lie := range producer {
		t.Run(name, func(t *testing.T) {
			prod, cons, _ := testRings(t, 256)
			for range 2 {
				_ = prod.Put(frame)
				if _, _, ok, err := cons.Next(nil, testLimit); !ok || err != nil {
					t.Fatalf("setup frame: %v, %v", ok, err)
				}
			}
			_ = prod.Put(frame)
			lie(cons)
			head := atomic.LoadUint64(prod.head)
			if err := prod.Put(frame); err == nil || err == ErrRingFull {
				t.Fatalf("producer accepted it: %v", err)
			}
			if atomic.LoadUint64(prod.head) != head {
				t.Error("a refused tail let the producer publish")
			}
		})
	}
}

// TestRingWakesOnlyASleeper pins the wake protocol's economy: a publish while
// the consumer is awake leaves the futex word alone (no system call on the hot
// path); a publish while it announced a sleep bumps it.
func TestRingWakesOnlyASleeper(t *testing.T) {
	prod, _, _ := testRings(t, 256)
	frame := testFrame(FrameDone, 1, nil)
	_ = prod.Put(frame)
	if w := atomic.LoadUint32(prod.wake); w != 0 {
		t.Fatalf("a publish to an awake consumer moved the futex word to %d", w)
	}
	atomic.StoreUint32(prod.sleeping, 1)
	_ = prod.Put(frame)
	if w := atomic.LoadUint32(prod.wake); w != 1 {
		t.Fatalf("a publish to a sleeping consumer left the futex word at %d, want 1", w)
	}
}

// TestRingWakesASleeperOnce pins coalesced wake-ups: of several publishes
// while the consumer is announced asleep, only the first bumps the futex word
// (and calls FUTEX_WAKE); it clears the announcement, so the others make no
// system call. Before, each publish until the consumer woke made one.
func TestRingWakesASleeperOnce(t *testing.T) {
	prod, _, _ := testRings(t, 256)
	frame := testFrame(FrameDone, 1, nil)
	atomic.StoreUint32(prod.sleeping, 1)
	for range 3 {
		if err := prod.Put(frame); err != nil {
			t.Fatal(err)
		}
	}
	if w := atomic.LoadUint32(prod.wake); w != 1 {
		t.Fatalf("three publishes to one sleeping consumer moved the futex word by %d, want 1", w)
	}
	if atomic.LoadUint32(prod.sleeping) != 0 {
		t.Fatal("the waking publish left the consumer announced asleep")
	}
}

// TestRingSleeperIsWoken pins that a consumer asleep on the futex word wakes
// when the producer publishes (its own timeout is an hour), and that a
// consumer with a frame waiting does not sleep at all.
func TestRingSleeperIsWoken(t *testing.T) {
	prod, cons, _ := testRings(t, 256)
	woke := make(chan struct{})
	go func() {
		cons.Sleep(time.Hour, func() bool { return false })
		close(woke)
	}()
	for atomic.LoadUint32(cons.sleeping) == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // let it reach the futex
	if err := prod.Put(testFrame(FrameDone, 1, nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woke:
	case <-time.After(time.Minute):
		t.Fatal("the sleeping consumer was not woken by a publish")
	}
	if atomic.LoadUint32(cons.sleeping) != 0 {
		t.Error("a woken consumer still announces a sleep")
	}
	cons.Sleep(time.Hour, func() bool { return false }) // returns at once: a frame is there
	stopped := make(chan struct{})
	go func() {
		_, _, _, _ = cons.Next(nil, testLimit)
		cons.Sleep(time.Hour, func() bool { return true })
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("a consumer told to stop went to sleep")
	}
}

// TestRingSpinIsBounded pins the polling before a sleep: it stops at the first
// frame, and gives up once its window has passed.
func TestRingSpinIsBounded(t *testing.T) {
	prod, cons, _ := testRings(t, 256)
	if cons.Spin(time.Now().Add(-time.Second)) {
		t.Error("spin on an empty ring found a frame")
	}
	_ = prod.Put(testFrame(FrameDone, 1, nil))
	if !cons.Spin(time.Now().Add(time.Hour)) {
		t.Error("spin missed a published frame")
	}
}

// TestRingBusyWaitNeedsSpareCPUs pins when a spinning side reads back to back
// beyond BusyPolls: only on machines of at least BusyCPUs CPUs, where the peer
// has a CPU of its own; and a busy spin still ends with its window.
func TestRingBusyWaitNeedsSpareCPUs(t *testing.T) {
	for cpus, want := range map[int]time.Duration{1: 0, 2: 0, 3: 0, 4: BusyWait, 16: BusyWait} {
		if got := BusyWaitFor(cpus); got != want {
			t.Errorf("BusyWaitFor(%d) = %v, want %v", cpus, got, want)
		}
	}
	_, cons, _ := testRings(t, 256)
	if want := BusyWaitFor(runtime.NumCPU()); cons.busy != want {
		t.Errorf("a ring on this %d-CPU machine reads back to back for %v, want %v", runtime.NumCPU(), cons.busy, want)
	}
	cons.busy = BusyWait
	began := time.Now()
	if cons.Spin(began.Add(SpinWait)) {
		t.Error("a busy spin on an empty ring found a frame")
	}
	if took := time.Since(began); took < SpinWait {
		t.Errorf("a busy spin gave up after %v, before its %v window ended", took, SpinWait)
	}
}

// TestRingSegmentHeader pins the plugin's check of the segment it receives.
func TestRingSegmentHeader(t *testing.T) {
	mem := make([]byte, RingSegmentSize)
	InitRingSegment(mem)
	if err := CheckRingSegment(mem); err != nil {
		t.Fatalf("a fresh segment: %v", err)
	}
	if err := CheckRingSegment(mem[:RingSegmentSize-1]); err == nil {
		t.Error("a short segment passed")
	}
	for _, at := range []int{0, 8, 12, 16} {
		bad := bytes.Clone(mem)
		bad[at] ^= 1
		if err := CheckRingSegment(bad); err == nil {
			t.Errorf("a header with byte %d changed passed", at)
		}
	}
}

// wrapped returns the data of a ring of size bytes holding frame at index at.
func wrapped(frame []byte, at, size int) []byte {
	data := make([]byte, size)
	for i, b := range frame {
		data[(at+i)%size] = b
	}
	return data
}

// fuzzRing loads a consumer with a fuzzed ring: its tail at pos, the
// producer's head at head, data bytes in the ring.
func fuzzRing(t *testing.T, pos, head uint64, data []byte) (cons *Ring, mem []byte) {
	_, cons, mem = testRings(t, 512)
	copy(cons.data, data)
	cons.pos, cons.peer = pos, pos
	atomic.StoreUint64(cons.tail, pos)
	atomic.StoreUint64(cons.head, head)
	return cons, mem
}

// checkFuzzedNext checks what next made of a fuzzed ring: a frame is whole,
// within limit and what was published, and consumed exactly; a refusal
// consumes nothing.
func checkFuzzedNext(t *testing.T, cons *Ring, pos, head uint64, limit int) []byte {
	frame, _, ok, err := cons.Next(nil, limit)
	tail := atomic.LoadUint64(cons.tail)
	if err != nil || !ok {
		if tail != pos || cons.pos != pos {
			t.Fatalf("nothing consumed, but the tail moved from %d to %d", pos, tail)
		}
		return nil
	}
	if len(frame) < FrameHeaderBytes || len(frame) > limit || uint64(len(frame)) > head-pos {
		t.Fatalf("a frame of %d bytes from %d published (limit %d)", len(frame), head-pos, limit)
	}
	if binary.LittleEndian.Uint32(frame) != uint32(len(frame)) || tail != pos+uint64(len(frame)) || cons.pos != tail {
		t.Fatalf("frame of %d bytes (header says %d) moved the tail from %d to %d", len(frame), binary.LittleEndian.Uint32(frame), pos, tail)
	}
	return frame
}

// FuzzRingNext is a consumer's reader of a ring, as its peer fills it:
// whatever the indices and bytes, Next either refuses them or returns one whole
// frame within the limit (the completion ring's or the request ring's). The
// frame decoders that come next are fuzzed in pluginapi.
func FuzzRingNext(f *testing.F) {
	seeds := [][]byte{
		testFrame(FrameDone, 1, []byte{5, 0, 0, 0, 0, 0, 0, 0, 1}),
		testFrame(FrameDone, 4, []byte("lost")),
		testFrame(FrameFree, 3, []byte{1}),
	}
	for _, s := range seeds {
		f.Add(uint64(0), uint64(len(s)), s, false)
		f.Add(uint64(500), uint64(500+len(s)), wrapped(s, 500, 512), true)
		f.Add(uint64(510), uint64(510+len(s)), wrapped(s, 510, 512), false)
		f.Add(uint64(1<<40), uint64(1<<40)+8, s, false)
		f.Add(uint64(0), ^uint64(0), s, true)
	}
	f.Add(uint64(64), uint64(63), []byte{}, true)
	f.Add(uint64(0), uint64(513), []byte{}, true)
	f.Fuzz(func(t *testing.T, pos, head uint64, data []byte, requests bool) {
		cons, _ := fuzzRing(t, pos, head, data)
		limit := testLimit
		if requests {
			limit = MaxRequestFrameBytes
		}
		checkFuzzedNext(t, cons, pos, head, limit)
	})
}

// testLimit bounds the frames of the tests' rings, as a direction's limit does.
const testLimit = 16 << 10

// testFrame is a frame of kind with sequence number seq and body, padded to a
// multiple of 8 bytes.
func testFrame(kind FrameKind, seq uint64, body []byte) []byte {
	b := make([]byte, FrameHeaderBytes+(len(body)+7)&^7)
	copy(b[FrameHeaderBytes:], body)
	PutHeader(b, FrameHeader{Size: uint32(len(b)), Kind: kind, Seq: seq})
	return b
}

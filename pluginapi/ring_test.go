//go:build linux

package pluginapi

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
func testRings(t testing.TB, size int) (prod, cons *ring, mem []byte) {
	t.Helper()
	words := make([]uint64, (testRingData+size)/8)
	mem = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	return newRing(mem, 0, testRingData, size), newRing(mem, 0, testRingData, size), mem
}

// TestRingCarriesFramesAcrossTheWrap pins the ring's byte order: frames of
// every size come out as they went in, across the end of the ring, and a
// producer gets errRingFull instead of overwriting what the consumer has not
// read.
func TestRingCarriesFramesAcrossTheWrap(t *testing.T) {
	prod, cons, _ := testRings(t, 256)
	var buf []byte
	for i := range 200 {
		msg := bytes.Repeat([]byte{byte(i)}, i%90)
		want := encodeDone(frameFree, &done{seq: uint64(i), status: statusDevice, msg: string(msg)})
		if err := prod.put(want); err != nil {
			t.Fatalf("put %d (%d bytes): %v", i, len(want), err)
		}
		got, grown, ok, err := cons.next(buf, maxDoneBytes)
		buf = grown
		if err != nil || !ok || !bytes.Equal(got, want) {
			t.Fatalf("frame %d: %x, %v, %v; want %x", i, got, ok, err, want)
		}
	}
	if prod.pos < 4*256 {
		t.Fatalf("only %d bytes went through: the test never wrapped", prod.pos)
	}
	frame := encodeDone(frameFree, &done{seq: 1, msg: string(make([]byte, 80))})
	n := 0
	for ; prod.put(frame) == nil; n++ {
	}
	if n != 256/len(frame) {
		t.Fatalf("%d frames of %d bytes fit into 256 bytes", n, len(frame))
	}
	if err := prod.put(frame); err != errRingFull {
		t.Fatalf("put into a full ring: %v, want errRingFull", err)
	}
	if _, _, ok, err := cons.next(nil, maxDoneBytes); !ok || err != nil {
		t.Fatalf("next from a full ring: %v, %v", ok, err)
	}
	if err := prod.put(frame); err != nil {
		t.Fatalf("put after the consumer made room: %v", err)
	}
	if err := prod.put(make([]byte, 512)); err == nil || err == errRingFull {
		t.Fatalf("a frame larger than the ring: %v, want an error", err)
	}
}

// TestRingRefusesWhatItsPeerMakesUp pins the checks on the other side's words:
// a consumer refuses a head that moves back, runs more than a ring ahead, or
// publishes part of a frame, a header that breaks the format or exceeds its
// direction's limit; a producer refuses a tail that moves back or passes its
// head. A refusal consumes nothing.
func TestRingRefusesWhatItsPeerMakesUp(t *testing.T) {
	frame := encodeDone(frameFree, &done{seq: 9})
	consumer := map[string]func(prod *ring, mem []byte){
		"head moved back": func(prod *ring, mem []byte) {
			_ = prod.put(frame)
			atomic.StoreUint64(prod.head, 8)
		},
		"head more than a ring ahead": func(prod *ring, mem []byte) { atomic.StoreUint64(prod.head, 1<<40) },
		"head ahead by 2^64-1":        func(prod *ring, mem []byte) { atomic.StoreUint64(prod.head, ^uint64(0)) },
		"part of a header": func(prod *ring, mem []byte) {
			atomic.StoreUint64(prod.head, atomic.LoadUint64(prod.head)+8)
		},
		"part of a frame": func(prod *ring, mem []byte) {
			_ = prod.put(frame)
			atomic.StoreUint64(prod.head, atomic.LoadUint64(prod.head)-8)
		},
		"frame over the limit": func(prod *ring, mem []byte) {
			big := make([]byte, frameHeaderBytes)
			putHeader(big, frameHeader{size: maxDoneBytes + 8, kind: frameDone})
			_ = prod.put(big)
		},
		"reserved header bits": func(prod *ring, mem []byte) {
			b := append([]byte(nil), frame...)
			b[6] = 1
			_ = prod.put(b)
		},
	}
	for name, lie := range consumer {
		t.Run(name, func(t *testing.T) {
			prod, cons, mem := testRings(t, 256)
			_ = prod.put(frame)
			if _, _, ok, err := cons.next(nil, maxDoneBytes); !ok || err != nil {
				t.Fatalf("first frame: %v, %v", ok, err)
			}
			lie(prod, mem)
			tail := atomic.LoadUint64(cons.tail)
			if _, _, ok, err := cons.next(nil, maxDoneBytes); err == nil || ok {
				t.Fatalf("consumer accepted it: %v, %v", ok, err)
			}
			if atomic.LoadUint64(cons.tail) != tail {
				t.Error("a refused frame moved the tail")
			}
		})
	}
	producer := map[string]func(cons *ring){
		"tail past the head":  func(cons *ring) { atomic.StoreUint64(cons.tail, 1<<20) },
		"tail moved back":     func(cons *ring) { atomic.StoreUint64(cons.tail, 0) },
		"tail at 2^64-1":      func(cons *ring) { atomic.StoreUint64(cons.tail, ^uint64(0)) },
		"tail one past head":  func(cons *ring) { atomic.StoreUint64(cons.tail, atomic.LoadUint64(cons.head)+1) },
		"tail one before old": func(cons *ring) { atomic.StoreUint64(cons.tail, uint64(len(frame))-1) },
	}
	for name, lie := range producer {
		t.Run(name, func(t *testing.T) {
			prod, cons, _ := testRings(t, 256)
			for range 2 {
				_ = prod.put(frame)
				if _, _, ok, err := cons.next(nil, maxDoneBytes); !ok || err != nil {
					t.Fatalf("setup frame: %v, %v", ok, err)
				}
			}
			_ = prod.put(frame)
			lie(cons)
			head := atomic.LoadUint64(prod.head)
			if err := prod.put(frame); err == nil || err == errRingFull {
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
	frame := encodeDone(frameFree, &done{seq: 1})
	_ = prod.put(frame)
	if w := atomic.LoadUint32(prod.wake); w != 0 {
		t.Fatalf("a publish to an awake consumer moved the futex word to %d", w)
	}
	atomic.StoreUint32(prod.sleeping, 1)
	_ = prod.put(frame)
	if w := atomic.LoadUint32(prod.wake); w != 1 {
		t.Fatalf("a publish to a sleeping consumer left the futex word at %d, want 1", w)
	}
}

// TestRingSleeperIsWoken pins that a consumer asleep on the futex word wakes
// when the producer publishes (its own timeout is an hour), and that a
// consumer with a frame waiting does not sleep at all.
func TestRingSleeperIsWoken(t *testing.T) {
	prod, cons, _ := testRings(t, 256)
	woke := make(chan struct{})
	go func() {
		cons.sleep(time.Hour, func() bool { return false })
		close(woke)
	}()
	for atomic.LoadUint32(cons.sleeping) == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // let it reach the futex
	if err := prod.put(encodeDone(frameFree, &done{seq: 1})); err != nil {
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
	cons.sleep(time.Hour, func() bool { return false }) // returns at once: a frame is there
	stopped := make(chan struct{})
	go func() {
		_, _, _, _ = cons.next(nil, maxDoneBytes)
		cons.sleep(time.Hour, func() bool { return true })
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
	if cons.spin(time.Now().Add(-time.Second)) {
		t.Error("spin on an empty ring found a frame")
	}
	_ = prod.put(encodeDone(frameFree, &done{seq: 1}))
	if !cons.spin(time.Now().Add(time.Hour)) {
		t.Error("spin missed a published frame")
	}
}

// TestRingBusyWaitNeedsSpareCPUs pins when a spinning side reads back to back
// beyond busyPolls: only on machines of at least busyCPUs CPUs, where the peer
// has a CPU of its own; and a busy spin still ends with its window.
func TestRingBusyWaitNeedsSpareCPUs(t *testing.T) {
	for cpus, want := range map[int]time.Duration{1: 0, 2: 0, 3: 0, 4: busyWait, 16: busyWait} {
		if got := busyWaitFor(cpus); got != want {
			t.Errorf("busyWaitFor(%d) = %v, want %v", cpus, got, want)
		}
	}
	_, cons, _ := testRings(t, 256)
	if want := busyWaitFor(runtime.NumCPU()); cons.busy != want {
		t.Errorf("a ring on this %d-CPU machine reads back to back for %v, want %v", runtime.NumCPU(), cons.busy, want)
	}
	cons.busy = busyWait
	began := time.Now()
	if cons.spin(began.Add(spinWait)) {
		t.Error("a busy spin on an empty ring found a frame")
	}
	if took := time.Since(began); took < spinWait {
		t.Errorf("a busy spin gave up after %v, before its %v window ended", took, spinWait)
	}
}

// TestRingSegmentHeader pins the plugin's check of the segment it receives.
func TestRingSegmentHeader(t *testing.T) {
	mem := make([]byte, ringSegmentSize)
	initRingSegment(mem)
	if err := checkRingSegment(mem); err != nil {
		t.Fatalf("a fresh segment: %v", err)
	}
	if err := checkRingSegment(mem[:ringSegmentSize-1]); err == nil {
		t.Error("a short segment passed")
	}
	for _, at := range []int{0, 8, 12, 16} {
		bad := bytes.Clone(mem)
		bad[at] ^= 1
		if err := checkRingSegment(bad); err == nil {
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
func fuzzRing(t *testing.T, pos, head uint64, data []byte) (cons *ring, mem []byte) {
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
func checkFuzzedNext(t *testing.T, cons *ring, pos, head uint64, limit int) []byte {
	frame, _, ok, err := cons.next(nil, limit)
	tail := atomic.LoadUint64(cons.tail)
	if err != nil || !ok {
		if tail != pos || cons.pos != pos {
			t.Fatalf("nothing consumed, but the tail moved from %d to %d", pos, tail)
		}
		return nil
	}
	if len(frame) < frameHeaderBytes || len(frame) > limit || uint64(len(frame)) > head-pos {
		t.Fatalf("a frame of %d bytes from %d published (limit %d)", len(frame), head-pos, limit)
	}
	if binary.LittleEndian.Uint32(frame) != uint32(len(frame)) || tail != pos+uint64(len(frame)) || cons.pos != tail {
		t.Fatalf("frame of %d bytes (header says %d) moved the tail from %d to %d", len(frame), binary.LittleEndian.Uint32(frame), pos, tail)
	}
	return frame
}

// FuzzCompletionRing is the host's reader of the completion ring, as the
// plugin fills it: whatever the indices and bytes, next either refuses them or
// returns one whole frame within the completion limit, which then goes to the
// completion decoder.
func FuzzCompletionRing(f *testing.F) {
	seeds := [][]byte{
		encodeDone(frameAlloc, &done{seq: 1, buffer: 5, mapped: true}),
		encodeDone(frameDispatch, &done{seq: 3, sizes: []uint64{1, 2}}),
		encodeDone(frameFree, &done{seq: 4, status: statusDevice, msg: "lost"}),
	}
	for _, s := range seeds {
		f.Add(uint64(0), uint64(len(s)), s, uint8(frameDispatch), uint8(2))
		f.Add(uint64(500), uint64(500+len(s)), wrapped(s, 500, 512), uint8(frameAlloc), uint8(0))
		f.Add(uint64(1<<40), uint64(1<<40)+8, s, uint8(frameFree), uint8(0))
		f.Add(uint64(0), ^uint64(0), s, uint8(frameFree), uint8(0))
	}
	f.Fuzz(func(t *testing.T, pos, head uint64, data []byte, kind, outputs uint8) {
		cons, _ := fuzzRing(t, pos, head, data)
		if frame := checkFuzzedNext(t, cons, pos, head, maxDoneBytes); frame != nil {
			_, _ = decodeDone(frame, frameKind(kind), int(outputs))
		}
	})
}

// FuzzRequestRing is the plugin's reader of the request ring, as the host
// fills it, followed by the request decoder.
func FuzzRequestRing(f *testing.F) {
	for _, r := range sampleRequests() {
		b, _ := encodeRequest(r)
		if len(b) > 512 {
			continue
		}
		f.Add(uint64(0), uint64(len(b)), b)
		f.Add(uint64(510), uint64(510+len(b)), wrapped(b, 510, 512))
	}
	f.Add(uint64(64), uint64(63), []byte{})
	f.Add(uint64(0), uint64(513), []byte{})
	f.Fuzz(func(t *testing.T, pos, head uint64, data []byte) {
		cons, _ := fuzzRing(t, pos, head, data)
		if frame := checkFuzzedNext(t, cons, pos, head, maxRequestFrameBytes); frame != nil {
			_, _ = decodeRequest(frame)
		}
	})
}

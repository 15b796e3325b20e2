//go:build linux

package pluginapi

import (
	"runtime"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/kiln-dev/kiln/internal/wire"
)

// FuzzCompletionRingProducers pins the plugin's completion ring under several
// producers (the queues' goroutines answering at once through answer): every
// completion arrives once, whole, and each producer's in the order it put
// them, however the frames interleave and wrap a small ring.
func FuzzCompletionRingProducers(f *testing.F) {
	f.Add(uint8(4), uint16(50), []byte("done"))
	f.Add(uint8(8), uint16(3), make([]byte, 300))
	f.Add(uint8(1), uint16(200), []byte{})
	f.Fuzz(func(t *testing.T, producers uint8, each uint16, msg []byte) {
		n, k := int(producers%8)+1, int(each%200)+1
		if len(msg) > 512 {
			msg = msg[:512]
		}
		prod, cons := testRings(t, 1024)
		p := &planeServer{done: prod}
		var wg sync.WaitGroup
		for g := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range k {
					if err := p.answer(wire.EncodeDone(wire.FrameSubmit, &wire.Done{Seq: uint64(g)<<32 | uint64(i), Status: 2, Msg: string(msg)})); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		next := make([]uint64, n)
		var buf []byte
		for got := 0; got < n*k; {
			b, grown, ok, err := cons.Next(buf, wire.MaxDoneBytes)
			buf = grown
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				runtime.Gosched()
				continue
			}
			d, err := wire.DecodeDone(b, wire.FrameSubmit, 0)
			if err != nil {
				t.Fatalf("completion %d: %v", got, err)
			}
			g, i := d.Seq>>32, d.Seq&(1<<32-1)
			if g >= uint64(n) || i != next[g] || d.Msg != string(msg) {
				t.Fatalf("completion %d: seq %#x with %d bytes of message, want producer %d's %d with %d", got, d.Seq, len(d.Msg), g, next[min(g, uint64(n-1))], len(msg))
			}
			next[g]++
			got++
		}
		wg.Wait()
	})
}

// testRings returns a producer's and a consumer's handle on one ring of size
// data bytes in 8-byte aligned memory, its control block first.
func testRings(t testing.TB, size int) (prod, cons *wire.Ring) {
	t.Helper()
	const data = 256
	words := make([]uint64, (data+size)/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	return wire.NewRing(mem, 0, data, size), wire.NewRing(mem, 0, data, size)
}

// BenchmarkSpansOnCompletion is the data plane's part of tracing one submit:
// the plugin's clock readings and spans, the trailer's encoding, and the
// host's decoding of the completion.
func BenchmarkSpansOnCompletion(b *testing.B) {
	timer := &spanTimer{clock: newMonoClock()}
	b.ReportAllocs()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for range b.N {
		js := jobSpans{read: timer.clock.now()}
		js.decoded = timer.clock.now()
		began := timer.clock.now()
		spans := timer.spans(js, began, timer.clock.now(), 100, nil)
		frame := wire.EncodeDone(wire.FrameSubmit, &wire.Done{Seq: 1, HostNanos: 5, DeviceNanos: 100, Spans: spansToWire(spans)})
		if _, err := wire.DecodeDone(frame, wire.FrameSubmit, 0); err != nil {
			b.Fatal(err)
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}

package pluginapi_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/kiln-dev/kiln/pluginapi"
)

// pinnedMemory is the part of a GPU backend that implements
// pluginapi.Segments: it keeps the segments the SDK announces (a real backend
// also registers each with its driver, cuMemHostRegister or an imported Vulkan
// allocation) and finds which one a view the SDK hands over lies in.
type pinnedMemory struct {
	mu       sync.Mutex
	segments map[uint64][]byte
}

func (p *pinnedMemory) AttachSegment(_ context.Context, id uint64, mem []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.segments[id] = mem // register mem with the driver here
	return nil
}

func (p *pinnedMemory) DetachSegment(_ context.Context, id uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.segments, id) // unregister it here
	return nil
}

// locate returns the segment and offset of view, for a direct device copy; ok
// is false for memory the SDK did not announce (a staged copy is needed).
func (p *pinnedMemory) locate(view []byte) (id uint64, offset int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, mem := range p.segments {
		if off, ok := pluginapi.ViewOffset(mem, view); ok {
			return id, off, true
		}
	}
	return 0, 0, false
}

var _ pluginapi.Segments = (*pinnedMemory)(nil)

// A backend that implements Segments learns of every shared segment before any
// view of it arrives; ViewOffset places a WriteBuffer source (or any other
// view) in one.
func ExampleSegments() {
	p := &pinnedMemory{segments: map[uint64][]byte{}}
	segment := make([]byte, 4096) // the SDK passes a mapped memfd
	_ = p.AttachSegment(context.Background(), 7, segment)

	src := segment[256:320] // as WriteBuffer might receive it
	id, off, ok := p.locate(src)
	fmt.Println(id, off, ok)
	_, _, ok = p.locate(make([]byte, 64))
	fmt.Println(ok)
	// Output:
	// 7 256 true
	// false
}

func ExampleViewOffset() {
	mem := make([]byte, 1024)
	fmt.Println(pluginapi.ViewOffset(mem, mem[100:200]))
	fmt.Println(pluginapi.ViewOffset(mem, mem[1000:1024]))
	fmt.Println(pluginapi.ViewOffset(mem, make([]byte, 8)))
	// Output:
	// 100 true
	// 1000 true
	// 0 false
}

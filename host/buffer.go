package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/host/trace"
	"github.com/kiln-dev/kiln/pluginapi"
)

// BufferUsage says how a buffer will be used: a combination of UsageStorage,
// UsageCopySrc, UsageCopyDst and UsageMap; zero means storage and copies.
type BufferUsage = pluginapi.BufferUsage

// The buffer usages (see pluginapi.BufferUsage).
const (
	UsageStorage = pluginapi.UsageStorage
	UsageCopySrc = pluginapi.UsageCopySrc
	UsageCopyDst = pluginapi.UsageCopyDst
	// UsageMap asks for a host-visible buffer that Map can fill in place.
	UsageMap = pluginapi.UsageMap
)

// Buffer is memory of one backend, in the spirit of a wgpu or CUDA buffer: on a
// plugin that keeps buffers (protocol 2 with [pluginapi.Buffers] and
// [pluginapi.Submitter]) it lives in the plugin process — device memory on a GPU —
// until freed, so that dispatches bound to it ([Batch.Dispatch]) move no bytes
// across the process boundary. On any other plugin the host keeps it and sends
// its bytes with each dispatch. A buffer starts zero-filled. [Backend.Alloc]
// makes one.
//
// If the plugin process dies, a buffer it kept is lost with it: every later use
// returns a [*LostBufferError] naming it. A Buffer is safe for concurrent use.
type Buffer struct {
	backend *Backend
	id      int64
	size    int64
	usage   BufferUsage

	mu sync.Mutex
	// proc is the process the buffer lives in; nil when the host keeps it.
	proc   *process
	handle uint64
	// mem is the host's memory of the buffer: the host-kept bytes, or the
	// shared mapping of a mapped plugin buffer; nil otherwise.
	mem   []byte
	freed bool
}

// nextBufferID numbers the plugin's buffers for error messages.
func (p *plugin) nextBufferID() int64 { return p.v2.bufferIDs.Add(1) }

// Name is how errors name the buffer: "buffer #3 (1048576 bytes)".
func (bf *Buffer) Name() string { return fmt.Sprintf("buffer #%d (%d bytes)", bf.id, bf.size) }

// Size is the buffer's length in bytes.
func (bf *Buffer) Size() int64 { return bf.size }

// Usage is the usage the buffer was allocated with.
func (bf *Buffer) Usage() BufferUsage { return bf.usage }

// Resident reports whether the buffer lives in the plugin process (true) or in
// the host (false).
func (bf *Buffer) Resident() bool { return bf.proc != nil }

// BufferError says a buffer was misused: used after Free, a range outside it, a
// buffer of another backend, Map of a buffer that is not host-visible. Nothing
// was sent to the plugin.
type BufferError struct {
	// Buffer names the buffer (Buffer.Name).
	Buffer string
	// Detail says what is wrong and how to fix it.
	Detail string
}

func (e *BufferError) Error() string { return e.Buffer + ": " + e.Detail }

// LostBufferError says buffers lived in a plugin process that has exited (it
// crashed, or the host stopped it: it hung, or its data plane broke): their contents are gone and
// cannot be recovered, unlike pipelines, which the host recompiles. Free them and
// allocate new ones; the relaunched plugin takes new allocations.
type LostBufferError struct {
	// Backend is the backend's name ("cpu-ref:0").
	Backend string
	// Buffers name the lost buffers of the call (Buffer.Name).
	Buffers []string
	// Cause is the crash this call ran into, when it was this call that found
	// the process dead (a *CrashedError, or a *TimeoutError with Hung); nil when
	// the loss was already known. A caller's deadline is never a loss: it is a
	// *TimeoutError, and the buffers stay usable.
	Cause error
}

func (e *LostBufferError) Error() string {
	msg := fmt.Sprintf("backend %s lost %s: the plugin process that held them exited", e.Backend, strings.Join(e.Buffers, ", "))
	if e.Cause != nil {
		msg += " (" + e.Cause.Error() + ")"
	}
	return msg + ". Fix: free them, allocate new buffers and write their data again"
}

// Unwrap returns the crash, if this call found it.
func (e *LostBufferError) Unwrap() error { return e.Cause }

// Alloc creates a buffer of size bytes on the backend. On a plugin that keeps
// buffers it is allocated there, host-visible ([Buffer.Map]) when usage has
// [UsageMap] and the plugin shares memory with the host; elsewhere the host keeps
// it (and Map always works).
func (b *Backend) Alloc(ctx context.Context, size int64, usage BufferUsage) (_ *Buffer, err error) {
	defer func() { err = b.p.stats.failed(err) }()
	bf := &Buffer{backend: b, id: b.p.nextBufferID(), size: size, usage: usage}
	if size < 0 || uint64(size) > pluginapi.MaxBufferBytes {
		return nil, &BufferError{Buffer: bf.Name(), Detail: fmt.Sprintf("size must be within [0, %d]. Fix: allocate a size a binding can address", uint64(pluginapi.MaxBufferBytes))}
	}
	err = b.callAny(ctx, "alloc", bf.Name(), func(ctx context.Context, proc *process, conn *client.Conn) error {
		if !b.p.capsOf(proc).Resident() {
			bf.mem = make([]byte, size)
			return nil
		}
		if _, err := b.p.open(ctx, proc, b.adapter.Index); err != nil {
			return err
		}
		res, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Adapter: b.adapter.Index, Size: uint64(size), Usage: usage})
		if err != nil {
			return err
		}
		bf.proc, bf.handle, bf.mem = proc, res.Buffer, conn.Mapping(res.Buffer)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return bf, nil
}

// live checks that the buffer can be used on the backend's current process and
// returns that process (nil for a host-kept buffer). Call with bf.mu held.
func (bf *Buffer) live() (*process, error) {
	if bf.freed {
		return nil, &BufferError{Buffer: bf.Name(), Detail: "it was freed. Fix: allocate a new buffer"}
	}
	if bf.proc == nil {
		return nil, nil
	}
	if !bf.backend.p.holds(bf.proc) {
		return nil, bf.lost(nil)
	}
	return bf.proc, nil
}

func (bf *Buffer) lost(cause error) *LostBufferError {
	return &LostBufferError{Backend: bf.backend.Name(), Buffers: []string{bf.Name()}, Cause: cause}
}

// checkRange refuses a range outside the buffer.
func (bf *Buffer) checkRange(offset, n int64) error {
	if offset < 0 || n < 0 || offset > bf.size || n > bf.size-offset {
		return &BufferError{Buffer: bf.Name(), Detail: fmt.Sprintf("range [%d, %d+%d) lies outside it. Fix: keep offsets and sizes within the buffer", offset, offset, n)}
	}
	return nil
}

// crashed turns the crash a call ran into into the loss of the buffers it used:
// a CrashedError, a hang (the host killed the process: TimeoutError with Hung)
// or errNothingRan (the process had died before the call). A caller's deadline
// is no loss: the plugin keeps running with the buffers, and the TimeoutError
// passes through.
func crashed(err error, bufs ...*Buffer) error {
	var c *CrashedError
	var t *TimeoutError
	nothingRan := err == errNothingRan
	if !nothingRan && !errors.As(err, &c) && !(errors.As(err, &t) && t.Hung) {
		return err
	}
	var names []string
	for _, bf := range bufs {
		if bf.proc != nil {
			names = append(names, bf.Name())
		}
	}
	if len(names) == 0 {
		return err
	}
	cause := err
	if nothingRan {
		cause = nil
	}
	return &LostBufferError{Backend: bufs[0].backend.Name(), Buffers: names, Cause: cause}
}

// Write copies src into the buffer at offset. It waits for the backend's
// submits still running, so it never races them.
func (bf *Buffer) Write(ctx context.Context, offset int64, src []byte) error {
	return bf.transfer(ctx, "write", offset, src)
}

// Read copies the buffer's bytes at offset into dst, after the backend's submits
// still running are done.
func (bf *Buffer) Read(ctx context.Context, offset int64, dst []byte) error {
	return bf.transfer(ctx, "read", offset, dst)
}

func (bf *Buffer) transfer(ctx context.Context, op string, offset int64, b []byte) (err error) {
	defer func() { err = bf.backend.p.stats.failed(err) }()
	bf.mu.Lock()
	defer bf.mu.Unlock()
	proc, err := bf.live()
	if err != nil {
		return err
	}
	if err := bf.checkRange(offset, int64(len(b))); err != nil {
		return err
	}
	return bf.move(ctx, proc, op, offset, b)
}

// move is transfer once the buffer is locked, live on proc (nil: host-kept)
// and the range checked.
func (bf *Buffer) move(ctx context.Context, proc *process, op string, offset int64, b []byte) (err error) {
	p := bf.backend.p
	if proc == nil {
		if op == "write" {
			copy(bf.mem[offset:], b)
		} else {
			copy(b, bf.mem[offset:])
		}
		return nil
	}
	if err := bf.backend.drain(ctx); err != nil {
		return err
	}
	if tr := p.set.obs.tracer(); tr != nil {
		began := time.Now()
		defer func() {
			if err == nil {
				tr.span(op, began, time.Now(), trace.String("backend", bf.backend.Name()), trace.Int("bytes", int64(len(b))))
			}
		}()
	}
	err = bf.backend.callConn(ctx, proc, op, bf.Name(), func(ctx context.Context, conn *client.Conn) error {
		if op == "write" {
			return conn.WriteBuffer(ctx, bf.handle, uint64(offset), b)
		}
		return conn.ReadBuffer(ctx, bf.handle, uint64(offset), b)
	})
	if err != nil {
		return crashed(err, bf)
	}
	if op == "write" {
		p.v2.toPlugin.Add(int64(len(b)))
	} else {
		p.v2.fromPlugin.Add(int64(len(b)))
	}
	return nil
}

// Map returns the buffer's memory for the host to fill or read in place: a
// host-kept buffer's bytes, or a plugin buffer's shared mapping (UsageMap on a
// plugin with shared memory). Writes through it reach the plugin without a copy
// and without a call; the caller must not touch it while a submit that uses the
// buffer runs (Pending.Wait first), and not after Free. If the plugin dies the
// slice stays valid: it shows the buffer's last contents until the host notices
// the death (within milliseconds, and at once on a Read or Write of a mapped
// buffer), and zeros after; what is written through it after the death is lost.
// Bytes read through it count only once a later call on the buffer (Read,
// Submit, Pending.Wait) succeeded. Read and Write of a mapped buffer check that
// the plugin's end of the data plane is open before they copy, so they return a
// LostBufferError as soon as the death can be seen.
func (bf *Buffer) Map() ([]byte, error) {
	bf.mu.Lock()
	defer bf.mu.Unlock()
	if _, err := bf.live(); err != nil {
		return nil, err
	}
	if bf.mem == nil {
		return nil, &BufferError{Buffer: bf.Name(), Detail: "it is not host-visible (allocated without UsageMap, or the plugin shares no memory with the host). Fix: allocate it with host.UsageMap, or use Write and Read"}
	}
	return bf.mem, nil
}

// Free releases the buffer; using it afterwards is a BufferError. Freeing a lost
// buffer releases what the host held for it and returns nil; freeing twice does
// nothing.
func (bf *Buffer) Free(ctx context.Context) error {
	bf.mu.Lock()
	defer bf.mu.Unlock()
	if bf.freed {
		return nil
	}
	bf.freed = true
	proc := bf.proc
	bf.mem = nil
	if proc == nil {
		return nil
	}
	conn := proc.conn()
	if !bf.backend.p.holds(proc) {
		// The plugin is gone; this releases the host's mapping of the buffer.
		_ = conn.FreeBuffer(ctx, bf.handle)
		return nil
	}
	if err := bf.backend.drain(ctx); err != nil {
		return err
	}
	return bf.backend.callConn(ctx, proc, "free", bf.Name(), func(ctx context.Context, conn *client.Conn) error {
		return conn.FreeBuffer(ctx, bf.handle)
	})
}

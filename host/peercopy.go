package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/pluginapi"
)

// copyThroughHostChunk is the size of the pieces a copy through the host's
// memory moves at a time: two are in flight (one read from the source while the
// previous one is written to the destination), so the host holds at most twice
// this much, whatever the copy's size.
const copyThroughHostChunk = 16 << 20

// CopyBuffer copies n bytes of src, from srcOffset, into dst at dstOffset. The
// buffers may belong to one adapter, to two adapters of one plugin, or to two
// backends of different plugins, and either may be host-kept. It takes the
// fastest path the pair allows (see docs/design.md, "Copies between
// adapters"):
//
//   - one adapter: a one-command batch ([Batch.Copy]) on the device;
//   - two adapters of a plugin that implements [pluginapi.PeerCopier] over the
//     shared-memory data plane: one request, and the bytes stay in the plugin
//     (CUDA: peer access between the GPUs where the driver allows it, else
//     staged through the plugin's pinned memory);
//   - anything else: the host reads the source and writes the destination
//     through the shared-memory segments in chunks of 16 MiB, reading the next
//     chunk while it writes the previous one, so its memory stays bounded.
//
// Like Read and Write it waits for the submits still running on the backends
// first. The ranges must lie inside their buffers and must not overlap when
// src and dst are one buffer (a [*BufferError], nothing sent); a buffer whose
// plugin process died is a [*LostBufferError].
func CopyBuffer(ctx context.Context, dst *Buffer, dstOffset int64, src *Buffer, srcOffset, n int64) (err error) {
	if dst == nil || src == nil {
		return &BufferError{Buffer: "<nil>", Detail: "CopyBuffer needs a source and a destination buffer. Fix: pass buffers from Backend.Alloc"}
	}
	defer func() { err = dst.backend.p.stats.failed(err) }()
	first, second := dst, src
	if copyLockOrder(src, dst) {
		first, second = src, dst
	}
	first.mu.Lock()
	defer first.mu.Unlock()
	if second != first {
		second.mu.Lock()
		defer second.mu.Unlock()
	}
	dstProc, err := dst.live()
	if err != nil {
		return err
	}
	srcProc, err := src.live()
	if err != nil {
		return err
	}
	if err := src.checkRange(srcOffset, n); err != nil {
		return err
	}
	if err := dst.checkRange(dstOffset, n); err != nil {
		return err
	}
	if src == dst && srcOffset < dstOffset+n && dstOffset < srcOffset+n {
		return &BufferError{Buffer: dst.Name(), Detail: fmt.Sprintf("copy from [%d, %d+%d) into [%d, %d+%d) overlaps within the buffer. Fix: copy through a second buffer", srcOffset, srcOffset, n, dstOffset, dstOffset, n)}
	}
	if n == 0 {
		return nil
	}
	switch {
	case srcProc == nil && dstProc == nil:
		copy(dst.mem[dstOffset:dstOffset+n], src.mem[srcOffset:srcOffset+n])
		return nil
	case srcProc == nil:
		return dst.move(ctx, dstProc, "write", dstOffset, src.mem[srcOffset:srcOffset+n])
	case dstProc == nil:
		return src.move(ctx, srcProc, "read", srcOffset, dst.mem[dstOffset:dstOffset+n])
	case srcProc == dstProc && src.backend.adapter.Index == dst.backend.adapter.Index:
		return copyOnDevice(ctx, dstProc, dst, dstOffset, src, srcOffset, n)
	case srcProc == dstProc && dst.backend.p.capsOf(dstProc).PeerCopy:
		err := copyInPlugin(ctx, dstProc, dst, dstOffset, src, srcOffset, n)
		var unsupported *UnsupportedError
		if !errors.As(err, &unsupported) {
			return err
		}
	}
	return copyThroughHost(ctx, dst, dstProc, dstOffset, src, srcProc, srcOffset, n)
}

// copyLockOrder reports whether a's lock is taken before b's, an order every
// CopyBuffer agrees on: by backend id, then by buffer number.
func copyLockOrder(a, b *Buffer) bool {
	if ia, ib := a.backend.p.desc.ID, b.backend.p.desc.ID; ia != ib {
		return ia < ib
	}
	return a.id < b.id
}

// copyOnDevice copies between two buffers of one adapter with a one-command
// submit, after the backend's running submits.
func copyOnDevice(ctx context.Context, proc *process, dst *Buffer, dstOffset int64, src *Buffer, srcOffset, n int64) error {
	b := dst.backend
	if err := b.drain(ctx); err != nil {
		return err
	}
	req := &pluginapi.SubmitRequest{Adapter: b.adapter.Index, Commands: []pluginapi.SubmitCommand{pluginapi.CopyCommand{
		Src: pluginapi.BufferRange{Buffer: src.handle, Offset: uint64(srcOffset), Size: uint64(n)},
		Dst: pluginapi.BufferRange{Buffer: dst.handle, Offset: uint64(dstOffset), Size: uint64(n)},
	}}}
	err := b.callConn(ctx, proc, "copy", dst.Name(), func(ctx context.Context, conn *client.Conn) error {
		_, err := conn.Submit(ctx, req)
		return err
	})
	if err != nil {
		return crashed(err, dst, src)
	}
	return nil
}

// copyInPlugin asks the plugin to copy between two of its buffers on different
// adapters (pluginapi.PeerCopier), after the running submits of both.
func copyInPlugin(ctx context.Context, proc *process, dst *Buffer, dstOffset int64, src *Buffer, srcOffset, n int64) error {
	if err := src.backend.drain(ctx); err != nil {
		return err
	}
	if err := dst.backend.drain(ctx); err != nil {
		return err
	}
	d := pluginapi.BufferRange{Buffer: dst.handle, Offset: uint64(dstOffset), Size: uint64(n)}
	s := pluginapi.BufferRange{Buffer: src.handle, Offset: uint64(srcOffset), Size: uint64(n)}
	err := dst.backend.callConn(ctx, proc, "copy", dst.Name(), func(ctx context.Context, conn *client.Conn) error {
		return conn.PeerCopy(ctx, d, s)
	})
	if err != nil {
		return crashed(err, dst, src)
	}
	return nil
}

// copyThroughHost reads src and writes dst in chunks through the host's memory:
// a goroutine reads chunk i+1 while this one writes chunk i, so two chunks are
// in flight at most. Both buffers are locked by the caller and stay so until
// the reader has stopped.
func copyThroughHost(ctx context.Context, dst *Buffer, dstProc *process, dstOffset int64, src *Buffer, srcProc *process, srcOffset, n int64) error {
	chunk := min(n, copyThroughHostChunk)
	bufs := [2][]byte{make([]byte, chunk)}
	if n > chunk {
		bufs[1] = make([]byte, chunk)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	free := make(chan int, 2)
	free <- 0
	free <- 1
	full := make(chan int, 1)
	var readErr error
	go func() {
		defer close(full)
		for at := int64(0); at < n; at += chunk {
			var i int
			select {
			case i = <-free:
			case <-rctx.Done():
				return
			}
			if err := src.move(rctx, srcProc, "read", srcOffset+at, bufs[i][:min(chunk, n-at)]); err != nil {
				readErr = err
				return
			}
			select {
			case full <- i:
			case <-rctx.Done():
				return
			}
		}
	}()
	for at := int64(0); at < n; at += chunk {
		i, ok := <-full
		if !ok {
			// The reader stopped early; readErr is set before full closed.
			// Without one, the caller's context ended between two chunks.
			if readErr != nil {
				return readErr
			}
			return waitError(ctx, src.backend.Name(), "a copy into "+dst.Name())
		}
		if err := dst.move(ctx, dstProc, "write", dstOffset+at, bufs[i][:min(chunk, n-at)]); err != nil {
			cancel()
			for range full { // wait for the reader to stop
			}
			return err
		}
		free <- i
	}
	return nil
}

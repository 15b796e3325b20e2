package backend

import (
	"context"
	"fmt"
	"time"

	"github.com/kiln-dev/kiln/pluginapi"
)

// The data plane starts an adapter's submits and transfers without waiting
// for them (pluginapi.Pipelined; see docs/design.md, "Ordering on the data
// plane" and "Vulkan"): each is a job recorded and submitted as Submit,
// WriteBuffer and ReadBuffer submit theirs, with the fence of its slot, and
// its completion waits on that fence (and then reads the timestamps, checks
// the loop guard, copies a read out of staging memory) on the SDK's completer
// goroutine while the adapter's queue starts the next ones. The queue runs
// jobs in submission order, and every command buffer begins with a barrier
// after all earlier work, so each started call sees what the ones before it
// wrote. Until its completion returns, a started job keeps its slot (command
// buffer, fence, queries), the descriptor sets it binds (a set bound by a job
// not known to be finished is never rewritten), its scratch and staging
// memory, its pipelines' read locks and the backend's life lock.
var _ pluginapi.Pipelined = (*Backend)(nil)

// maxStartedStaging bounds the staging memory a device's started transfers
// hold at once; a transfer that would exceed it, or that needs more than one
// staging chunk, runs to its end in its Start method instead (chunk by chunk,
// as WriteBuffer and ReadBuffer do), still after the work started before it.
const maxStartedStaging = 4 * stagingChunk

// takeStaging reserves n bytes of the device's started staging memory; false
// when that would exceed maxStartedStaging.
func (d *device) takeStaging(n uint64) bool {
	d.stageMu.Lock()
	defer d.stageMu.Unlock()
	if d.staged+n > maxStartedStaging {
		return false
	}
	d.staged += n
	return true
}

// giveStaging returns what takeStaging reserved.
func (d *device) giveStaging(n uint64) {
	d.stageMu.Lock()
	d.staged -= n
	d.stageMu.Unlock()
}

// alreadyDone is the Completion of work done before its Start method returned.
func alreadyDone(err error) pluginapi.Completion {
	return func() (*pluginapi.SubmitResult, error) { return nil, err }
}

// StartSubmit checks and records the commands as Submit does and submits
// their command buffer; the completion waits for its fence and returns the
// device time, or the error Submit would have returned (a cut loop's
// RejectedError, a lost device's DeviceError, ctx's error when ctx ended
// before the device was done, after the device is done).
func (b *Backend) StartSubmit(ctx context.Context, req *pluginapi.SubmitRequest) (pluginapi.Completion, error) {
	start := time.Now()
	j, d, err := b.submitPrepared(req)
	if err != nil {
		return nil, err
	}
	if err := j.submit(ctx); err != nil {
		b.noteValidation()
		d.recycle(j)
		return nil, err
	}
	return func() (*pluginapi.SubmitResult, error) {
		ns, err := j.complete(ctx, "submit")
		b.noteValidation()
		d.recycle(j)
		if err != nil {
			return nil, err
		}
		return &pluginapi.SubmitResult{HostNanos: max(time.Since(start).Nanoseconds(), 1), DeviceNanos: ns}, nil
	}, nil
}

// StartWrite starts a copy of src into the buffer at offset: in place at once
// where the buffer is mapped and no job uses it, else a copy job (from src's
// data-plane segment, or from staging memory src is copied into now).
func (b *Backend) StartWrite(ctx context.Context, handle, offset uint64, src []byte) (pluginapi.Completion, error) {
	return b.startTransfer(ctx, handle, offset, src, true)
}

// StartRead starts a copy of the buffer at offset into dst: in place at once
// where the buffer is mapped and no job uses it, else a copy job (into dst's
// data-plane segment, or into staging memory the completion copies to dst).
func (b *Backend) StartRead(ctx context.Context, handle, offset uint64, dst []byte) (pluginapi.Completion, error) {
	return b.startTransfer(ctx, handle, offset, dst, false)
}

func (b *Backend) startTransfer(ctx context.Context, handle, offset uint64, host []byte, write bool) (pluginapi.Completion, error) {
	b.life.RLock()
	r, err := b.transferTarget(handle, offset, host)
	if err != nil {
		b.life.RUnlock()
		return nil, err
	}
	if len(host) == 0 {
		b.life.RUnlock()
		return alreadyDone(nil), nil
	}
	d, n := r.d, uint64(len(host))
	if r.s.isMapped() && r.last.Load() <= d.completed() {
		// No job uses the buffer: nothing to wait for.
		err := copyMapped(r, handle, offset, host, write)
		b.life.RUnlock()
		return alreadyDone(err), nil
	}
	// From here on the bytes move by a job after the jobs before it, which
	// holds the life lock until its completion returns.
	done := func() {
		b.noteValidation()
		b.life.RUnlock()
	}
	if seg, segRes, ok := b.segmentView(d, host); ok {
		j, err := segmentCopy(ctx, r, seg, segRes, offset, write)
		if err != nil {
			done()
			return nil, err
		}
		return func() (*pluginapi.SubmitResult, error) {
			defer done()
			if _, err := j.complete(ctx, fmt.Sprintf("copying %d bytes of buffer %d", n, handle)); err != nil {
				return nil, err
			}
			return nil, segmentCopied(d, seg, write)
		}, nil
	}
	if n > stagingChunk || !d.takeStaging(n) {
		if write {
			err = b.writeStaged(ctx, r, handle, offset, host)
		} else {
			err = b.readStaged(ctx, r, handle, offset, host)
		}
		done()
		return alreadyDone(err), nil
	}
	w, err := b.startStaged(ctx, r, handle, offset, host, write)
	if err != nil {
		d.giveStaging(n)
		done()
		return nil, err
	}
	return func() (*pluginapi.SubmitResult, error) {
		defer done()
		defer d.giveStaging(n)
		return nil, w()
	}, nil
}

// startStaged submits the copy of host (at most one staging chunk) into the
// buffer at offset through staging memory, or of the buffer into staging
// memory, and returns what waits for it: for a read, it then copies the
// staging memory into host.
func (b *Backend) startStaged(ctx context.Context, r *resident, handle, offset uint64, host []byte, write bool) (func() error, error) {
	d, n := r.d, uint64(len(host))
	st, err := d.staging.alloc(n)
	if err != nil {
		return nil, d.fail("allocating staging memory", err)
	}
	at := span{b: r.s.b, off: r.s.off + offset, size: n}
	if write {
		copy(st.bytes(), host)
		if err := st.flush(); err != nil {
			d.staging.free(st)
			return nil, d.fail("writing staging memory", err)
		}
		what := fmt.Sprintf("writing %d bytes of buffer %d", n, handle)
		j := &job{d: d, residents: []*resident{r}, scratch: []span{st}, ops: []op{{kind: opCopy, src: st, dst: at}}}
		if err := j.submit(ctx); err != nil {
			return nil, err
		}
		return func() error {
			_, err := j.complete(ctx, what)
			return err
		}, nil
	}
	// The staging span outlives the job: it is read after the fence.
	j := &job{d: d, residents: []*resident{r}, ops: []op{{kind: opCopy, src: at, dst: st}}}
	if err := j.submit(ctx); err != nil {
		d.staging.free(st)
		return nil, err
	}
	return func() error {
		defer d.staging.free(st)
		if _, err := j.complete(ctx, fmt.Sprintf("reading %d bytes of buffer %d", n, handle)); err != nil {
			return err
		}
		if err := st.invalidate(); err != nil {
			return d.fail("reading staging memory", err)
		}
		copy(host, st.bytes())
		return nil
	}, nil
}

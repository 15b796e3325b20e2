//go:build linux

package host

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/ir"
)

// The fault values of fx-resident's fills (host/testdata/fixture/resident.go).
const (
	fillSlow   = 0x5105 // sleeps 1.5s, ignoring its context, then fills
	fillStuck  = 0x57C4 // blocks forever: the plugin stops reading its request ring
	fillUnplug = 0xC105 // shuts down the plugin's end of the data plane; the process lives
)

// deadlineSlack is how far past its deadline a call may return: generous, for
// a loaded machine; not a timing claim.
const deadlineSlack = 500 * time.Millisecond

// fill submits one fill of buf with value under a deadline of d and returns the
// error and how long the call took.
func fill(b *Backend, buf *Buffer, value uint32, d time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var bt Batch
	bt.Fill(Bind(buf), value)
	began := time.Now()
	_, err := b.Submit(ctx, &bt)
	return time.Since(began), err
}

// wantDeadline fails unless err is a caller's deadline: a TimeoutError, not
// Hung, matching context.DeadlineExceeded, and no loss.
func wantDeadline(t *testing.T, what string, err error) {
	t.Helper()
	var timeout *TimeoutError
	var lost *LostBufferError
	if !errors.As(err, &timeout) || timeout.Hung || !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &lost) {
		t.Fatalf("%s: %v (%T), want a TimeoutError for the caller's deadline, not a loss", what, err, err)
	}
}

// TestDeadlineOnResidentBuffersIsNotALoss pins issue 23 item 1: when the
// caller's deadline passes during a submit, read or write over resident buffers
// while the plugin lives (it is busy, answering health checks), the call fails
// with a TimeoutError and the buffers stay usable, their contents intact.
func TestDeadlineOnResidentBuffersIsNotALoss(t *testing.T) {
	h := openHost(t, "fx-resident")
	b := acquire(t, h, "fx-resident")
	ctx := context.Background()
	x, y := alloc(t, b, 64, 0), alloc(t, b, 64, 0)
	want := bytes.Repeat([]byte("resident"), 8)
	if err := x.Write(ctx, 0, want); err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, h, "fx-resident")

	_, err := fill(b, y, fillSlow, 200*time.Millisecond)
	wantDeadline(t, "a submit past its deadline", err)
	// The plugin is still in the slow fill: a read waits behind it.
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = x.Read(rctx, 0, make([]byte, 64))
	cancel()
	wantDeadline(t, "a read past its deadline", err)
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = y.Write(wctx, 0, []byte{1, 2, 3, 4})
	cancel()
	wantDeadline(t, "a write past its deadline", err)

	// A read waits for the backend's submits still running (here one that
	// the caller waits for without a deadline) only as long as its own
	// deadline lasts.
	var slow Batch
	pd, err := b.SubmitAsync(ctx, slow.Fill(Bind(y), fillSlow))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
	err = x.Read(rctx, 0, make([]byte, 64))
	cancel()
	wantDeadline(t, "a read waiting for a submit past its deadline", err)
	if _, err := pd.Wait(ctx); err != nil {
		t.Fatalf("the slow submit: %v", err)
	}

	got := make([]byte, 64)
	if err := x.Read(ctx, 0, got); err != nil {
		t.Fatalf("read after the deadlines: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the buffer reads %q after the deadlines, want %q", got, want)
	}
	if _, err := fill(b, y, 7, 10*time.Second); err != nil {
		t.Fatalf("a submit after the deadlines: %v", err)
	}
	if p := pidOf(t, h, "fx-resident"); p != pid {
		t.Errorf("the plugin was relaunched (pid %d, was %d)", p, pid)
	}
}

// TestLostDataPlaneReturnsByTheCallersDeadline pins issue 23 item 4: when the
// data plane closes while the plugin process lives, a call in flight returns by
// its deadline (not after a fixed wait for the process to exit), as the loss of
// its buffers.
func TestLostDataPlaneReturnsByTheCallersDeadline(t *testing.T) {
	h := openHost(t, "fx-resident")
	b := acquire(t, h, "fx-resident")
	x := alloc(t, b, 64, 0)
	const d = time.Second
	took, err := fill(b, x, fillUnplug, d)
	var lost *LostBufferError
	if !errors.As(err, &lost) {
		t.Fatalf("a submit whose data plane closed: %v (%T), want a LostBufferError", err, err)
	}
	if took > d+deadlineSlack {
		t.Fatalf("the submit returned %v after a %v deadline", took, d)
	}
	t.Logf("returned after %v on a %v deadline: %v", took, d, err)
}

// TestPluginThatStopsReadingItsRingIsHung pins issue 23 item 2: against a
// plugin stuck in a submit that still answers health checks, calls that find
// the request ring full return by their deadlines, and a ring that stays full
// for the hang timeout makes the host treat the plugin as hung.
func TestPluginThatStopsReadingItsRingIsHung(t *testing.T) {
	const hang = 2 * time.Second
	h := openWith(t, Options{HangTimeout: hang}, "fx-resident")
	b := acquire(t, h, "fx-resident")
	x := alloc(t, b, 64, 0)
	var stuck Batch
	stuck.Fill(Bind(x), fillStuck)
	pd, err := b.SubmitAsync(context.Background(), &stuck)
	if err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		n    int
		took time.Duration
		err  error
	}
	full := make(chan outcome, 1)
	go func() {
		var bt Batch
		bt.Fill(Bind(x), 1)
		for n := 0; ; n++ {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			began := time.Now()
			_, err := b.SubmitAsync(ctx, &bt)
			took := time.Since(began)
			cancel()
			if err != nil {
				full <- outcome{n, took, err}
				return
			}
		}
	}()
	var o outcome
	select {
	case o = <-full:
	case <-time.After(time.Minute):
		t.Fatal("SubmitAsync against a plugin that reads no requests never failed")
	}
	t.Logf("the ring took %d submits; the next returned after %v: %v", o.n, o.took, o.err)
	if o.took > 300*time.Millisecond+deadlineSlack {
		t.Fatalf("SubmitAsync on a full ring returned after %v on a 300ms deadline", o.took)
	}
	var timeout *TimeoutError
	if !errors.As(o.err, &timeout) {
		t.Fatalf("SubmitAsync on a full ring: %v (%T), want a TimeoutError", o.err, o.err)
	}

	allocated := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		began := time.Now()
		_, err := b.Alloc(ctx, 64, 0)
		allocated <- outcome{0, time.Since(began), err}
	}()
	select {
	case o = <-allocated:
	case <-time.After(2*time.Second + 5*deadlineSlack):
		t.Fatal("Alloc with a 2s deadline on a full ring did not return")
	}
	if o.took > 2*time.Second+deadlineSlack || !errors.As(o.err, &timeout) {
		t.Fatalf("Alloc on a full ring: %v after %v, want a TimeoutError within its 2s deadline", o.err, o.took)
	}
	t.Logf("Alloc with a 2s deadline on the full ring returned after %v: %v", o.took, o.err)

	waited := make(chan error, 1)
	go func() {
		_, err := pd.Wait(context.Background())
		waited <- err
	}()
	select {
	case err = <-waited:
	case <-time.After(hang + 20*time.Second):
		t.Fatal("the stuck submit never ended: a plugin that stops reading its ring is not found hung")
	}
	var lost *LostBufferError
	if !errors.As(err, &lost) || !errors.As(err, &timeout) || !timeout.Hung {
		t.Fatalf("the stuck submit: %v, want a LostBufferError of a hung plugin (TimeoutError with Hung)", err)
	}
	t.Logf("the stuck submit: %v", err)
}

// TestMappedTransferAfterDeathIsLost pins issue 23 item 6: once the plugin's
// death can be seen (its pidfd is readable), a Read or Write of a mapped
// buffer fails with a LostBufferError instead of moving stale bytes. The test
// transfers in a loop from the kill on with one P, which it keeps: the host's
// goroutines that notice the death run late, as on a loaded host, and a
// transfer that relies on them succeeds after the death (in some of the kills).
func TestMappedTransferAfterDeathIsLost(t *testing.T) {
	h := openHost(t, "cpuref")
	b := acquire(t, h, "cpu-ref")
	ctx := context.Background()
	for i := range 10 {
		x := alloc(t, b, 4096, UsageMap)
		if err := x.Write(ctx, 0, []byte("mapped bytes")); err != nil {
			t.Fatal(err)
		}
		var bt Batch
		if _, err := b.Submit(ctx, bt.Fill(Binding{Buffer: x, Offset: 16}, 1)); err != nil {
			t.Fatal(err) // a success: the relaunch after this kill waits no backoff
		}
		pid := pidOf(t, h, "cpu-ref")
		pidfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Skipf("pidfd_open: %v", err)
		}
		procs := runtime.GOMAXPROCS(1)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		op, stale := "read", 0
		for {
			fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			n, _ := unix.Poll(fds, 0)
			dead := n > 0
			if i%2 == 1 {
				op, err = "write", x.Write(ctx, 0, []byte("stale"))
			} else {
				err = x.Read(ctx, 0, make([]byte, 12))
			}
			if err != nil {
				break
			}
			if dead {
				stale++
			}
		}
		runtime.GOMAXPROCS(procs)
		unix.Close(pidfd)
		var lost *LostBufferError
		if !errors.As(err, &lost) {
			t.Fatalf("kill %d: a mapped %s after the plugin's death: %v, want a LostBufferError", i, op, err)
		}
		if stale > 0 {
			t.Fatalf("kill %d: %d mapped %ss succeeded after the plugin's death was visible", i, stale, op)
		}
		if err := x.Free(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// oneOutput is a program with one write buffer.
func oneOutput(t *testing.T, name string) *ir.Program {
	t.Helper()
	bld := ir.NewBuilder(name, 64, 1, 1)
	out := bld.Buffer("out", ir.U32, ir.Write)
	bld.Store(out, ir.GlobalID(0), ir.LitU32(1))
	p, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDispatchPastItsDeadlineKeepsItsScratchBuffers pins that a v1 dispatch
// over a resident plugin whose deadline passes (the plugin finishes it
// later) does not hand its scratch buffers to the next dispatch: fx-resident's
// fx.scribble program writes 0xff bytes into its bindings after 1.5s, while the
// next dispatch, whose output the plugin leaves as the host cleared it, waits
// behind it.
func TestDispatchPastItsDeadlineKeepsItsScratchBuffers(t *testing.T) {
	h := openHost(t, "fx-resident")
	b := acquire(t, h, "fx-resident")
	ctx := context.Background()
	slow, err := b.Compile(ctx, oneOutput(t, "fx.scribble"), CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := b.Compile(ctx, oneOutput(t, "test.quiet"), CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := Work{Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{64}}
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = b.Dispatch(dctx, slow, w)
	cancel()
	wantDeadline(t, "a dispatch past its deadline", err)
	res, err := b.Dispatch(ctx, quiet, w)
	if err != nil {
		t.Fatal(err)
	}
	if out := res.Outputs[0]; !bytes.Equal(out, make([]byte, len(out))) {
		t.Fatalf("the next dispatch's output was written by the abandoned one: % x", out[:8])
	}
}

//go:build linux

package pluginapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// rawConn is a data-plane socket used with plain blocking system calls instead
// of Go's network poller: each side reads on a goroutine of its own that sleeps
// in the kernel until a frame arrives, which saves the poller's wake-up on every
// hop (measured: a unix-socket round trip between two processes took 17 µs
// through net.UnixConn and 10 µs this way on the 2-core machine).
type rawConn struct {
	fd int

	mu     sync.Mutex
	closed bool
}

// rawFrom takes over a connected unix socket: a blocking duplicate of its
// descriptor replaces it.
func rawFrom(c *net.UnixConn) (*rawConn, error) {
	f, err := c.File()
	c.Close()
	if err != nil {
		return nil, fmt.Errorf("data plane socket: %w", err)
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("data plane socket: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("data plane socket: %w", err)
	}
	return &rawConn{fd: fd}, nil
}

// Read reads what is there, at least one byte; io.EOF when the peer closed.
func (c *rawConn) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(c.fd, b)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// errNothingYet says a read that must not wait found no bytes.
var errNothingYet = errors.New("nothing to read yet")

// spinWait is how long a side of the data plane that expects a frame soon polls
// the socket before it sleeps in the kernel: the host after it sent a request,
// the plugin after it answered one. A thread asleep in a read on an idle core
// takes tens of microseconds to wake (measured on the 2-core machine: a
// round trip fell from about 20 µs to 8 µs polling), which is the whole
// cost of a small request; the bound keeps the polling to that much CPU time
// per request, and an idle plane sleeps.
const spinWait = 50 * time.Microsecond

// readNow is Read without waiting: errNothingYet when no byte is there.
func (c *rawConn) readNow(b []byte) (int, error) {
	n, _, _, err := c.recv(b, nil, unix.MSG_DONTWAIT)
	return n, err
}

// recv reads bytes and any descriptors that came with them, with recvmsg's
// extra flags (MSG_DONTWAIT: errNothingYet when no byte is there).
func (c *rawConn) recv(b, oob []byte, extra int) (n, oobn, flags int, err error) {
	for {
		n, oobn, flags, _, err = unix.Recvmsg(c.fd, b, oob, unix.MSG_CMSG_CLOEXEC|extra)
		if errors.Is(err, unix.EAGAIN) {
			return 0, 0, 0, errNothingYet
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err == nil && n == 0 && len(b) > 0 {
			err = io.EOF
		}
		return n, oobn, flags, err
	}
}

// write sends all of b; oob (descriptors) rides with its first bytes.
func (c *rawConn) write(b, oob []byte) error {
	for len(b) > 0 {
		var n int
		var err error
		if oob != nil {
			n, err = unix.SendmsgN(c.fd, b, oob, nil, unix.MSG_NOSIGNAL)
			if err == nil {
				oob = nil
			}
		} else {
			n, err = unix.SendmsgN(c.fd, b, nil, nil, unix.MSG_NOSIGNAL)
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// shutdown wakes a reader blocked on the socket; the reader closes it.
func (c *rawConn) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		_ = unix.Shutdown(c.fd, unix.SHUT_RDWR) // fails only when the peer is gone already
	}
}

// close releases the descriptor; call it from the reading goroutine once it
// stopped.
func (c *rawConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		unix.Close(c.fd)
	}
}

// checkPeer accepts only a peer running as this process's user.
func checkPeer(fd int) error {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return err
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("data plane peer runs as uid %d, not %d", cred.Uid, os.Getuid())
	}
	return nil
}

// spin calls try, which reports whether it got bytes, until it does or the
// time until has passed, yielding the CPU between attempts; it returns
// false when the time ran out, and try's error.
func spin(until time.Time, try func() (bool, error)) (bool, error) {
	for {
		got, err := try()
		if got || err != nil {
			return got, err
		}
		if !time.Now().Before(until) {
			return false, nil
		}
		// Yield the CPU, not only the goroutine's P: when the peer's thread
		// waits for this very CPU (a loaded machine), polling would hold it
		// off for the whole window.
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) // cannot fail on Linux
	}
}

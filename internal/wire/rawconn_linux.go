//go:build linux

package wire

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// RawConn is a data-plane socket used with plain blocking system calls instead
// of Go's network poller. Since the frames travel through the rings, the socket
// carries only the hello frame and the descriptors that ride with frames, and
// tells each side when the other is gone.
type RawConn struct {
	fd int

	mu     sync.Mutex
	closed bool
}

// RawFrom takes over a connected unix socket: a blocking duplicate of its
// descriptor replaces it.
func RawFrom(c *net.UnixConn) (*RawConn, error) {
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
	return &RawConn{fd: fd}, nil
}

// ErrNothingYet says a read that must not wait found no bytes.
var ErrNothingYet = errors.New("nothing to read yet")

// Recv reads bytes and any descriptors that came with them, with recvmsg's
// extra flags (MSG_DONTWAIT: ErrNothingYet when no byte is there).
func (c *RawConn) Recv(b, oob []byte, extra int) (n, oobn, flags int, err error) {
	for {
		n, oobn, flags, _, err = unix.Recvmsg(c.fd, b, oob, unix.MSG_CMSG_CLOEXEC|extra)
		if errors.Is(err, unix.EAGAIN) {
			return 0, 0, 0, ErrNothingYet
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

// Write sends all of b; oob (descriptors) rides with its first bytes.
func (c *RawConn) Write(b, oob []byte) error {
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

// Shutdown wakes a reader blocked on the socket; the reader closes it.
func (c *RawConn) Shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		_ = unix.Shutdown(c.fd, unix.SHUT_RDWR) // fails only when the peer is gone already
	}
}

// Close releases the descriptor; call it from the reading goroutine once it
// stopped.
func (c *RawConn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		unix.Close(c.fd)
	}
}

// CheckPeer accepts only a peer running as this process's user.
func CheckPeer(fd int) error {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return err
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("data plane peer runs as uid %d, not %d", cred.Uid, os.Getuid())
	}
	return nil
}

// HungUp reports whether the peer closed its end of the socket fd.
func HungUp(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
}

// FD is the socket's descriptor, for poll(2); it stays owned by c.
func (c *RawConn) FD() int { return c.fd }

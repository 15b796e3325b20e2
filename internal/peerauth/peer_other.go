//go:build !linux

package peerauth

import (
	"errors"
	"net"
)

const peerSupported = false

// peerOf fails: this system does not name a unix socket's peer (kiln keeps
// mutual TLS here).
func peerOf(net.Conn) (pid, uid int, err error) {
	return 0, 0, errors.New("kiln peer authentication: this system does not report a unix socket's peer. Fix: use the host's mutual TLS (the default here)")
}

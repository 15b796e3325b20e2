package peerauth

import (
	"fmt"
	"net"
	"syscall"
)

const peerSupported = true

// peerOf returns the process id and user id of the process at the other end
// of the unix socket conn (the one that connected, or the one that listens).
func peerOf(conn net.Conn) (pid, uid int, err error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, 0, &RefusedError{Reason: fmt.Sprintf("a %T is not a unix socket, whose peer the kernel names", conn)}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, fmt.Errorf("kiln peer authentication: %w", err)
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, 0, fmt.Errorf("kiln peer authentication: %w", err)
	}
	if credErr != nil {
		return 0, 0, fmt.Errorf("kiln peer authentication: reading the socket's peer (SO_PEERCRED): %w", credErr)
	}
	return int(cred.Pid), int(cred.Uid), nil
}

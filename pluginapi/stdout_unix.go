//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pluginapi

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// redirectStdout duplicates the real stdout for the handshake line, then points
// file descriptor 1 at stderr so that nothing else ever reaches the host's
// handshake reader. It returns the duplicate.
func redirectStdout() (*os.File, error) {
	fd, err := unix.Dup(1)
	if err != nil {
		return nil, fmt.Errorf("duplicate stdout: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.Dup2(2, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("point stdout at stderr: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/stdout"), nil
}

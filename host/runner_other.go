//go:build !unix

package host

import (
	"errors"
	"os"
	"os/exec"
)

// setProcessGroup does nothing where the system has no process groups.
func setProcessGroup(*exec.Cmd) {}

// killGroup kills proc; this system has no process groups to end with it.
func killGroup(proc *os.Process) error {
	if err := proc.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

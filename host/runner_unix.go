//go:build unix

package host

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup starts the plugin as the leader of a process group of its
// own, so that the host can end it together with every process it started (a
// wrapper script's child keeps the plugin's stdout open after the script dies).
func setProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// killGroup sends SIGKILL to the process group proc leads, then to proc itself
// (the group may already be gone when only the leader is left to reap).
func killGroup(proc *os.Process) error {
	if err := syscall.Kill(-proc.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	if err := proc.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

package pluginapi

import (
	"os"
	"os/exec"
	"strconv"
)

// Command returns the command a host starts the plugin executable path with:
// no stdin (the plugin reads nothing from the host's terminal or pipes), the
// host's pid in [HostPIDEnv], and on Linux a parent-death signal (SIGKILL), so
// the plugin dies with the host even if the host is killed before the
// plugin's own watch runs. Env holds only HostPIDEnv: go-plugin adds the host's
// environment and its own variables when it starts the command, and the host
// appends this entry last so that it wins.
func Command(path string) *exec.Cmd {
	cmd := exec.Command(path)
	cmd.Stdin = nil
	cmd.Env = []string{HostPIDEnv + "=" + strconv.Itoa(os.Getpid())}
	setParentDeathSignal(cmd)
	return cmd
}

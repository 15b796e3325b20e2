package host

import (
	"os"
	"os/exec"
	"strconv"

	"github.com/kiln-dev/kiln/internal/wire"
)

// pluginCommand returns the command the host starts the plugin executable path
// with: no stdin (the plugin reads nothing from the host's terminal or pipes),
// the host's pid in wire.HostPIDEnv, and on Linux a parent-death signal
// (SIGKILL), so the plugin dies with the host even if the host is killed
// before the plugin's own watch runs. Env holds only HostPIDEnv: go-plugin adds
// the host's environment and its own variables when it starts the command, and
// the host appends this entry last so that it wins.
func pluginCommand(path string) *exec.Cmd {
	cmd := exec.Command(path)
	cmd.Stdin = nil
	cmd.Env = []string{wire.HostPIDEnv + "=" + strconv.Itoa(os.Getpid())}
	setParentDeathSignal(cmd)
	return cmd
}

//go:build !linux

package host

import "os/exec"

// setParentDeathSignal does nothing where the kernel has no parent-death signal;
// the plugin's own watch of wire.HostPIDEnv ends it instead.
func setParentDeathSignal(*exec.Cmd) {}

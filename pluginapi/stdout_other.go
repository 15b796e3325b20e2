//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package pluginapi

import "os"

// redirectStdout does nothing where file descriptors cannot be re-pointed; the
// handshake then uses the process's stdout as it is.
func redirectStdout() (*os.File, error) { return nil, nil }

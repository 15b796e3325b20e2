//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || windows)

package filelock

import (
	"fmt"
	"os"
	"runtime"
)

func tryLock(*os.File) error {
	return fmt.Errorf("file locking is not implemented on %s. Fix: run kiln on Linux, macOS, a BSD or Windows", runtime.GOOS)
}

func unlock(*os.File) error { return nil }

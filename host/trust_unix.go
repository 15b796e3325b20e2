//go:build unix

package host

import (
	"io/fs"
	"syscall"
)

// ownershipOf reads the mode and owner from a Stat result.
func ownershipOf(st fs.FileInfo) ownership {
	o := ownership{mode: st.Mode(), uid: -1}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		o.uid = int(sys.Uid)
	}
	return o
}

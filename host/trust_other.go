//go:build !unix

package host

import "io/fs"

// ownershipOf reads the mode; this system has no file owners to check.
func ownershipOf(st fs.FileInfo) ownership {
	return ownership{mode: st.Mode(), uid: -1}
}

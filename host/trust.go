package host

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Discovery trusts a plugin executable only when nobody but this user and root
// can change what the host runs (see docs/design.md, "Plugin trust and
// operation"): the file (a link's target) must not be writable by every user
// nor owned by another user who is not root, and the same holds for the
// plugins directory and for the directory the file really lives in.

// ownership is what the trust check needs to know about a file or directory.
type ownership struct {
	mode fs.FileMode
	uid  int // -1 where the system has no owners
}

// judgeOwnership says what is wrong with an entry of kind ("plugin", "plugins
// directory", "directory of the plugin's target") at path with o, run by user
// me; "" when nothing is.
func judgeOwnership(kind, path string, o ownership, me int) string {
	if o.mode.Perm()&0o002 != 0 {
		return fmt.Sprintf("refused: the %s %s is writable by every user (mode %v), so anyone could replace what the host runs. Fix: chmod o-w %s", kind, path, o.mode.Perm(), path)
	}
	if o.uid >= 0 && o.uid != me && o.uid != 0 {
		return fmt.Sprintf("refused: the %s %s is owned by user %d, neither you (%d) nor root, who could replace what the host runs. Fix: chown it to yourself or root, or install your own copy", kind, path, o.uid, me)
	}
	return ""
}

// untrustedFile says why the executable at path (st is its Stat, through links)
// is not trusted, or "" when it is. For a link it checks the directory the
// target lives in too.
func untrustedFile(path string, st fs.FileInfo) string {
	me := os.Getuid()
	if problem := judgeOwnership("plugin", path, ownershipOf(st), me); problem != "" {
		return problem
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Sprintf("refused: cannot resolve it: %v. Fix: repair or remove the link", err)
	}
	if real != path && filepath.Dir(real) != filepath.Dir(path) {
		if dst, err := os.Stat(filepath.Dir(real)); err == nil {
			return judgeOwnership("directory of the plugin's target", filepath.Dir(real), ownershipOf(dst), me)
		}
	}
	return ""
}

// untrustedDir says why every plugin in the plugins directory dir is refused,
// or "" when the directory is trusted.
func untrustedDir(dir string) string {
	st, err := os.Stat(dir)
	if err != nil {
		return ""
	}
	return judgeOwnership("plugins directory", dir, ownershipOf(st), os.Getuid())
}

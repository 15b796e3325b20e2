package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// File is one entry of the plugins directory and whether it counts as a plugin.
type File struct {
	// Path is the entry's path inside the plugins directory.
	Path string
	// Accepted reports whether the entry is a plugin executable the host starts.
	Accepted bool
	// Reason says why the entry was accepted or rejected.
	Reason string
}

// discover lists dir and decides for every entry whether it is a plugin: a regular
// file (or a link to one) named kiln-backend-<name>, executable by someone, that
// only this user or root can change (see trusted). A missing directory is
// reported as an error; the caller records it and goes on with no plugins.
func discover(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("plugins directory %s does not exist. Fix: create it and copy kiln-backend-* executables into it (make build puts them in bin/plugins), or point %s at a directory that has them", dir, PluginDirEnv)
		}
		return nil, fmt.Errorf("reading plugins directory %s: %w. Fix: make the directory readable by this user", dir, err)
	}
	dirProblem := untrustedDir(dir)
	files := make([]File, 0, len(entries))
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		reason, ok := judge(path, e.Name())
		if ok && dirProblem != "" {
			reason, ok = dirProblem, false
		}
		files = append(files, File{Path: path, Accepted: ok, Reason: reason})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// judge decides whether the entry called name at path is a plugin executable.
func judge(path, name string) (reason string, ok bool) {
	if !strings.HasPrefix(name, PluginPrefix) {
		return fmt.Sprintf("name does not start with %q; only %s<name> executables are plugins", PluginPrefix, PluginPrefix), false
	}
	if name == PluginPrefix {
		return fmt.Sprintf("name %q has nothing after the prefix. Fix: rename it %s<name>", name, PluginPrefix), false
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Sprintf("cannot stat it: %v. Fix: remove the broken entry or repair the link", err), false
	}
	if st.IsDir() {
		return "is a directory, not an executable", false
	}
	if !st.Mode().IsRegular() {
		return fmt.Sprintf("is not a regular file (mode %v)", st.Mode()), false
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fmt.Sprintf("is not executable (mode %v). Fix: chmod +x %s", st.Mode().Perm(), path), false
	}
	if problem := untrustedFile(path, st); problem != "" {
		return problem, false
	}
	return "executable named " + PluginPrefix + "<name>", true
}

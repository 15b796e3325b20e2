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
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		fix := "name the directory that holds the plugin executables"
		if strings.HasPrefix(filepath.Base(dir), PluginPrefix) {
			fix = fmt.Sprintf("name the directory that holds it: --plugins %s (or %s=%s)", filepath.Dir(dir), PluginDirEnv, filepath.Dir(dir))
		}
		return nil, fmt.Errorf("plugins directory %s is a file, not a directory. Fix: %s", dir, fix)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("plugins directory %s does not exist. Fix: create it and copy kiln-backend-* executables into it (make build puts them in bin/plugins), or name a directory that has them (--plugins, %s or Options.PluginDir)", dir, PluginDirEnv)
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
		return "is a directory, not an executable. Fix: move it out of the plugins directory", false
	}
	if !st.Mode().IsRegular() {
		return fmt.Sprintf("is not a regular file (mode %v). Fix: replace it with the plugin executable, or a link to one", st.Mode()), false
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fmt.Sprintf("is not executable (mode %v). Fix: chmod +x %s", st.Mode().Perm(), path), false
	}
	if problem := untrustedFile(path, st); problem != "" {
		return problem, false
	}
	return "executable named " + PluginPrefix + "<name>", true
}

// DiscoveryError says why the backend Name cannot be found when discovery
// knows the reason: the plugins directory is missing, is a file or cannot be
// read, or the plugin file named after the backend was rejected (its
// permissions, its owner, its type). Reason names the path and ends with a Fix.
type DiscoveryError struct {
	// Name is the backend asked for.
	Name string
	// Path is the plugins directory, or the rejected plugin file.
	Path string
	// Reason says what is wrong with Path.
	Reason string
}

func (e *DiscoveryError) Error() string {
	return fmt.Sprintf("backend %q not found: %s", e.Name, e.Reason)
}

// notFound is the error for a backend id no plugin provides: a DiscoveryError
// when the plugins directory is unusable or the file named after id was
// rejected, else a NotFoundError listing what is known.
func (h *Host) notFound(id string) error {
	if h.dirErr != nil {
		return &DiscoveryError{Name: id, Path: h.dir, Reason: h.dirErr.Error()}
	}
	for _, f := range h.files {
		if !f.Accepted && strings.HasPrefix(filepath.Base(f.Path), PluginPrefix) && matchesName(f.Path, id) {
			return &DiscoveryError{Name: id, Path: f.Path, Reason: fmt.Sprintf("its plugin file %s was not accepted: %s", f.Path, strings.TrimPrefix(f.Reason, "refused: "))}
		}
	}
	return &NotFoundError{Name: id, Known: h.IDs(), Failed: len(h.startFailures())}
}

// discoveryFailures lists what discovery refused, for the error of a
// selection that found nothing: the plugins directory's problem, and every
// plugin-named file that was not accepted, with its reason.
func (h *Host) discoveryFailures() []string {
	if h.dirErr != nil {
		return []string{h.dirErr.Error()}
	}
	var out []string
	for _, f := range h.files {
		if !f.Accepted && strings.HasPrefix(filepath.Base(f.Path), PluginPrefix) {
			out = append(out, fmt.Sprintf("%s not accepted: %s", f.Path, f.Reason))
		}
	}
	return out
}

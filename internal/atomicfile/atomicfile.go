package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// tempInfix sits between "."+base and the random suffix of a temporary file's
// name, so a temporary file is hidden, names its target and cannot be mistaken
// for one.
const tempInfix = ".tmp-"

// Write replaces path with the bytes write produces, durably: the data is written
// to a new temporary file in path's directory, fsynced, given mode perm (exactly,
// without the umask), renamed over path, and the directory is fsynced. If write
// returns an error or panics, or any step before the rename fails, the temporary
// file is removed and path is left as it was. The directory must exist.
func Write(path string, perm fs.FileMode, write func(io.Writer) error) error {
	return replace(path, perm, write, true)
}

// WriteNoSync is Write without the fsyncs. The replacement is still atomic for
// readers, but after a power loss path may hold an empty or partial file, so use
// it only for files whose content is verified on read, and call Sync on the file
// and its directory to make it durable.
func WriteNoSync(path string, perm fs.FileMode, write func(io.Writer) error) error {
	return replace(path, perm, write, false)
}

// WriteBytes is Write of data.
func WriteBytes(path string, data []byte, perm fs.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

func replace(path string, perm fs.FileMode, write func(io.Writer) error, durable bool) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+tempInfix+"*")
	if err != nil {
		return fmt.Errorf("create a temporary file for %s: %w. Fix: make sure %s exists and is writable", path, err, dir)
	}
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	buf := bufio.NewWriterSize(tmp, 64<<10)
	if err := write(buf); err != nil {
		return err
	}
	if err := buf.Flush(); err != nil {
		return fmt.Errorf("write %s: %w. Fix: free disk space or check the file system", tmp.Name(), err)
	}
	if durable {
		if err := tmp.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w. Fix: check the file system", tmp.Name(), err)
		}
	}
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("set mode %v on %s: %w", perm, tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w. Fix: free disk space or check the file system", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s over %s: %w. Fix: make sure %s is writable", tmp.Name(), path, err, dir)
	}
	renamed = true
	if durable {
		return Sync(dir)
	}
	return nil
}

// Sync flushes a file or a directory to stable storage. A file is opened for
// writing, which Windows needs to flush it; a directory is opened for reading and,
// on Windows, where directories cannot be flushed, skipped.
func Sync(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	flag := os.O_RDWR
	if st.IsDir() {
		if runtime.GOOS == "windows" {
			return nil
		}
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return fmt.Errorf("open %s to fsync it: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w. Fix: check the file system", path, err)
	}
	return nil
}

// IsTemp reports whether name, a base name, is a temporary file made by Write or
// WriteNoSync.
func IsTemp(name string) bool {
	_, ok := TempTarget(name)
	return ok
}

// TempTarget returns the base name of the file a temporary file named name was
// meant to replace; ok is false when name is not a temporary file.
func TempTarget(name string) (target string, ok bool) {
	if !strings.HasPrefix(name, ".") {
		return "", false
	}
	i := strings.LastIndex(name, tempInfix)
	if i <= 1 {
		return "", false
	}
	return name[1:i], true
}

// RemoveTemps removes the temporary files left beside path by writers that died
// before renaming them, and returns how many it removed. Call it only while no
// other writer of path can be running, for example while holding path's file lock.
func RemoveTemps(path string) (int, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("list %s for stale temporary files: %w", dir, err)
	}
	removed := 0
	for _, e := range entries {
		if target, ok := TempTarget(e.Name()); !ok || target != base || e.IsDir() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !os.IsNotExist(err) {
			return removed, fmt.Errorf("remove stale temporary file: %w", err)
		}
		removed++
	}
	return removed, nil
}

// MkdirAll creates dir and any missing parents with mode perm (before the umask)
// and makes each new directory durable: after creating a directory it fsyncs
// its parent, which holds the new entry. Directories that exist already, or
// that another process creates meanwhile, are left as they are.
func MkdirAll(dir string, perm fs.FileMode) error {
	return mkdirAll(dir, perm, Sync)
}

func mkdirAll(dir string, perm fs.FileMode, sync func(string) error) error {
	dir = filepath.Clean(dir)
	var missing []string
	for p := dir; ; {
		st, err := os.Stat(p)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("create directory %s: %s is not a directory. Fix: move it away", dir, p)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("create directory %s: %w. Fix: make every parent of it a searchable directory", dir, err)
		}
		missing = append(missing, p)
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		if err := os.Mkdir(p, perm); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return fmt.Errorf("create directory %s: %w. Fix: make its parent writable", p, err)
		}
		if err := sync(filepath.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}

// maxLinks bounds the symbolic links Resolve follows, as the kernel's ELOOP does.
const maxLinks = 40

// Resolve follows path's final component while it is a symbolic link and
// returns the file a write should replace so that the link stays a link: the
// link's target (relative targets are taken from the link's directory), or path
// itself when it is not a link or does not exist. A dangling link resolves to
// the missing target, which a write then creates.
func Resolve(path string) (string, error) {
	p := path
	for i := 0; i < maxLinks; i++ {
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return p, nil
		}
		if err != nil {
			return "", fmt.Errorf("stat %s: %w", p, err)
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", fmt.Errorf("read symbolic link %s: %w", p, err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = target
	}
	return "", fmt.Errorf("resolve %s: more than %d symbolic links. Fix: remove the link loop", path, maxLinks)
}

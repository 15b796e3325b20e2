package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/internal/atomicfile"
	"github.com/kiln-dev/kiln/internal/xdg"
)

// DefaultMaxBytes is the default cap on the total size of a cache's entry files.
const DefaultMaxBytes = 1 << 30

// MaxBytesEnv is the environment variable that overrides DefaultMaxBytes: a byte
// count, optionally with a KiB, MiB or GiB suffix ("1073741824", "512MiB").
const MaxBytesEnv = "KILN_CACHE_MAX_BYTES"

const (
	// entryExt ends every entry's file name.
	entryExt = ".bin"
	// mtimeInterval is how stale an entry's mtime may get before a hit refreshes
	// it; coarse, as in Go's build cache, so hits rarely write.
	mtimeInterval = time.Hour
	// trimInterval is how often Flush trims when this process has not written
	// much; trimStamp's mtime records the last trim of the directory.
	trimInterval = time.Hour
	trimStamp    = "trim.txt"
	// staleTemp is how old a temporary file must be before Trim and Verify treat
	// it as left by a dead writer.
	staleTemp = time.Hour
	// filePerm and dirPerm are the modes of entries and shard directories.
	filePerm = 0o644
	dirPerm  = 0o755
	// maxSyncWorkers bounds Flush's parallel fsyncs.
	maxSyncWorkers = 16
)

// DiskCache is a directory of compiled-pipeline blobs keyed by Key: one file per
// entry, sharded into subdirectories named by the first two hex digits of the
// key's digest. It is safe for concurrent use by goroutines and by processes
// sharing the directory: entries are installed by atomic rename, every entry
// carries its key and a checksum, and a bad entry is a miss, never an error.
//
// Hits, misses and corrupt entries are counted per DiskCache from Open; entry
// counts and sizes come from the directory (see Stats).
type DiskCache struct {
	root     string
	maxBytes int64

	mu      sync.Mutex
	pending []string // files written since the last Flush
	written int64    // bytes written since the last trim check

	hits, misses, corrupt atomic.Uint64
}

// Options configure OpenOptions.
type Options struct {
	// MaxBytes caps the total size of the entry files. Zero means: the value of
	// MaxBytesEnv read through Getenv, else DefaultMaxBytes.
	MaxBytes int64
	// Getenv reads MaxBytesEnv; nil reads nothing.
	Getenv func(string) string
}

// Open opens (creating it if needed) the cache rooted at root, with its size cap
// from MaxBytesEnv in the process environment, else DefaultMaxBytes.
func Open(root string) (*DiskCache, error) {
	return OpenOptions(root, Options{Getenv: os.Getenv})
}

// OpenOptions opens (creating it if needed) the cache rooted at root.
func OpenOptions(root string, opts Options) (*DiskCache, error) {
	maxBytes := opts.MaxBytes
	switch {
	case maxBytes < 0:
		return nil, fmt.Errorf("pipeline cache size cap %d is negative. Fix: pass a positive Options.MaxBytes, or 0 for the default", maxBytes)
	case maxBytes == 0 && opts.Getenv != nil && opts.Getenv(MaxBytesEnv) != "":
		n, err := ParseBytes(opts.Getenv(MaxBytesEnv))
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w. Fix: set it to a byte count such as 1073741824 or 512MiB, or unset it for the 1 GiB default", MaxBytesEnv, opts.Getenv(MaxBytesEnv), err)
		}
		maxBytes = n
	case maxBytes == 0:
		maxBytes = DefaultMaxBytes
	}
	if err := os.MkdirAll(root, dirPerm); err != nil {
		return nil, fmt.Errorf("create pipeline cache directory %s: %w. Fix: make it writable, or choose another root (XDG_CACHE_HOME)", root, err)
	}
	return &DiskCache{root: root, maxBytes: maxBytes}, nil
}

// ParseBytes reads a positive byte count with an optional KiB, MiB or GiB suffix
// ("1073741824", "512MiB"), as MaxBytesEnv and kiln cache trim --max take it.
func ParseBytes(s string) (int64, error) {
	unit := int64(1)
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, unit = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.size
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("not a byte count")
	}
	if n <= 0 || n > (1<<62)/unit {
		return 0, errors.New("out of range")
	}
	return n * unit, nil
}

// DefaultRoot is $XDG_CACHE_HOME/kiln/pipelines, with xdg's fallbacks
// (~/.cache, ~/Library/Caches on macOS, %LocalAppData% on Windows).
func DefaultRoot() (string, error) { return defaultRoot(xdg.Process()) }

func defaultRoot(env xdg.Env) (string, error) {
	dir, err := xdg.CacheHome(env)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kiln", "pipelines"), nil
}

// Root returns the cache's directory.
func (c *DiskCache) Root() string { return c.root }

// MaxBytes returns the cap on the total size of the entry files.
func (c *DiskCache) MaxBytes() int64 { return c.maxBytes }

// PathFor returns the file that holds key's entry: root/<hh>/<hex>.bin, where hex
// is Key.Hex and hh its first two digits.
func (c *DiskCache) PathFor(key Key) string {
	h := key.Hex()
	return filepath.Join(c.root, h[:2], h+entryExt)
}

// Read returns key's payload. A missing entry is a miss (ok false, nil error); so
// is an entry that is truncated, fails its checksum, or belongs to another key,
// which is also removed and counted as corrupt. A file larger than an entry can
// be is an error, as is a file that exists but cannot be read. A hit refreshes the
// entry's mtime, its last-use time for trimming, when it is over an hour old.
func (c *DiskCache) Read(key Key) (payload []byte, ok bool, err error) {
	path := c.PathFor(key)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		c.misses.Add(1)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read pipeline cache entry %s: %w. Fix: make the cache directory readable, or remove it", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("stat pipeline cache entry %s: %w", path, err)
	}
	if st.Size() > maxFileBytes {
		return nil, false, fmt.Errorf("pipeline cache entry %s is %d bytes, over the %d-byte bound for an entry. Fix: run 'kiln cache verify' to remove it", path, st.Size(), int64(maxFileBytes))
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return nil, false, fmt.Errorf("read pipeline cache entry %s: %w", path, err)
		}
		c.dropCorrupt(path, st)
		return nil, false, nil
	}
	if _, payload, err = decodeEntry(data, key.Encode()); err != nil {
		c.dropCorrupt(path, st)
		return nil, false, nil
	}
	c.hits.Add(1)
	if now := time.Now(); now.Sub(st.ModTime()) > mtimeInterval {
		os.Chtimes(path, now, now)
	}
	return payload, true, nil
}

// dropCorrupt counts a corrupt entry as a miss and removes it, unless another
// process has meanwhile replaced the file (then the new file is left alone).
func (c *DiskCache) dropCorrupt(path string, opened fs.FileInfo) {
	c.misses.Add(1)
	c.corrupt.Add(1)
	if now, err := os.Lstat(path); err == nil && os.SameFile(opened, now) {
		os.Remove(path)
	}
}

// Write installs payload as key's entry, replacing any earlier one atomically:
// readers see the old entry or the new, never a mix. A payload over
// MaxEntryBytes is refused before anything is written. The entry is not yet
// durable; Flush makes it so.
func (c *DiskCache) Write(key Key, payload []byte) error {
	if len(payload) > MaxEntryBytes {
		return fmt.Errorf("pipeline blob of %d bytes for backend %q exceeds the %d-byte cache entry limit. Fix: the backend must return a smaller blob, or none", len(payload), key.BackendID, MaxEntryBytes)
	}
	enc := key.Encode()
	if len(enc) > maxKeyBytes {
		return fmt.Errorf("pipeline cache key for backend %q encodes to %d bytes, over %d. Fix: shorten the backend id and device fingerprint", key.BackendID, len(enc), maxKeyBytes)
	}
	path := c.PathFor(key)
	if err := os.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		return fmt.Errorf("create pipeline cache shard %s: %w. Fix: make %s writable", filepath.Dir(path), err, c.root)
	}
	err := atomicfile.WriteNoSync(path, filePerm, func(w io.Writer) error { return writeEntry(w, enc, payload) })
	if err != nil {
		return fmt.Errorf("write pipeline cache entry: %w", err)
	}
	c.mu.Lock()
	c.pending = append(c.pending, path)
	c.written += int64(headerSize + len(enc) + len(payload))
	c.mu.Unlock()
	return nil
}

// Flush makes the entries written since the last Flush durable: it fsyncs the
// files, then their directories, each step with up to 16 fsyncs in parallel.
// Entries removed meanwhile are skipped. On failure the entries stay pending for
// the next Flush.
//
// Flush then enforces the size cap when a trim is due: when the directory was
// last trimmed over an hour ago (by any process), or this DiskCache has written
// more than a quarter of the cap since its last trim.
func (c *DiskCache) Flush(ctx context.Context) error {
	c.mu.Lock()
	paths := c.pending
	c.pending = nil
	c.mu.Unlock()
	err := syncPaths(ctx, paths)
	if err == nil {
		dirs := map[string]bool{}
		var list []string
		for _, p := range paths {
			if d := filepath.Dir(p); !dirs[d] {
				dirs[d] = true
				list = append(list, d)
			}
		}
		err = syncPaths(ctx, list)
	}
	if err != nil {
		c.mu.Lock()
		c.pending = append(paths, c.pending...)
		c.mu.Unlock()
		return fmt.Errorf("flush pipeline cache %s: %w", c.root, err)
	}
	if c.trimDue() {
		if _, err := c.Trim(ctx, c.maxBytes); err != nil {
			return err
		}
	}
	return nil
}

// syncPaths fsyncs every path, a bounded number at a time; a path that no longer
// exists is skipped.
func syncPaths(ctx context.Context, paths []string) error {
	workers := min(maxSyncWorkers, max(1, runtime.GOMAXPROCS(0)*2))
	sem := make(chan struct{}, workers)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, p := range paths {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := atomicfile.Sync(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}

// trimDue reports whether Flush should trim now (see Flush).
func (c *DiskCache) trimDue() bool {
	c.mu.Lock()
	written := c.written
	c.mu.Unlock()
	if written > c.maxBytes/4 {
		return true
	}
	st, err := os.Stat(filepath.Join(c.root, trimStamp))
	return err != nil || time.Since(st.ModTime()) > trimInterval
}

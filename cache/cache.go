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
	"github.com/kiln-dev/kiln/internal/filelock"
	"github.com/kiln-dev/kiln/internal/xdg"
)

// DefaultMaxBytes is the default cap on the total size of a cache's entry files.
const DefaultMaxBytes = 1 << 30

// MaxBytesEnv is the environment variable that overrides [DefaultMaxBytes]: a
// byte count, optionally with a KiB, MiB or GiB suffix ("1073741824",
// "512MiB").
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

// DiskCache is a directory of compiled-pipeline blobs keyed by [Key]: one file
// per entry, sharded into subdirectories named by the first two hex digits of
// the key's digest. It is safe for concurrent use by goroutines and by
// processes sharing the directory: entries are installed by atomic rename,
// every entry carries its key and a checksum, and a bad entry is a miss, never
// an error.
//
// Hits, misses (by reason) and writes are counted per DiskCache from [Open] and
// added to the directory's usage file at each [DiskCache.Flush]; entry counts
// and sizes come from the directory (see [DiskCache.Stats] and
// [DiskCache.Usage]).
type DiskCache struct {
	root     string
	maxBytes int64

	mu      sync.Mutex
	pending []string // files written since the last Flush
	written int64    // bytes written since the last trim
	// background is closed when the running background flush ends; nil when
	// none runs. bgErr is its error, returned by the next Flush.
	background chan struct{}
	bgErr      error
	// reported is what the usage file has been told of this DiskCache's
	// counts; reportMu guards it, apart from mu, since reporting waits for the
	// usage file's lock.
	reportMu sync.Mutex
	reported TierUsage

	hits, writes, failures, trims, verified atomic.Uint64
	misses                                  [len(missReasonIndex)]atomic.Uint64
}

// missReasonIndex numbers the miss reasons for DiskCache's counters.
var missReasonIndex = [...]MissReason{MissAbsent, MissCorrupt, MissTruncated, MissForeignKey, MissOversize}

func (c *DiskCache) countMiss(r MissReason) {
	for i, m := range missReasonIndex {
		if m == r {
			c.misses[i].Add(1)
			return
		}
	}
}

// Options configure [OpenOptions].
type Options struct {
	// MaxBytes caps the total size of the entry files. Zero means: the value of
	// [MaxBytesEnv] read through Getenv, else [DefaultMaxBytes].
	MaxBytes int64
	// Getenv reads [MaxBytesEnv]; nil reads nothing.
	Getenv func(string) string
}

// Open opens (creating it if needed) the cache rooted at root, with its size cap
// from [MaxBytesEnv] in the process environment, else [DefaultMaxBytes].
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
// ("1073741824", "512MiB"), as [MaxBytesEnv] and kiln cache trim --max take it.
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
	return xdg.Join(xdg.CacheHome, env, "kiln", "pipelines")
}

// Root returns the cache's directory.
func (c *DiskCache) Root() string { return c.root }

// MaxBytes returns the cap on the total size of the entry files.
func (c *DiskCache) MaxBytes() int64 { return c.maxBytes }

// PathFor returns the file that holds key's entry: root/<hh>/<hex>.bin, where hex
// is [Key.Hex] and hh its first two digits.
func (c *DiskCache) PathFor(key Key) string { return c.pathForHex(key.Hex()) }

func (c *DiskCache) pathForHex(h string) string {
	return filepath.Join(c.root, h[:2], h+entryExt)
}

// Lookup is the outcome of a read of the pipeline cache.
type Lookup struct {
	// Payload is the entry's payload on a hit, nil on a miss.
	Payload []byte
	// Miss is [MissNone] on a hit, else why there was no usable entry.
	Miss MissReason
	// Remote is set when the hit came from the fleet tier behind the local
	// cache (package remote) rather than from the local directory.
	Remote bool
}

// Hit reports whether the read found a usable entry.
func (l Lookup) Hit() bool { return l.Miss == MissNone }

// Get returns key's entry. A missing entry is a miss ([MissAbsent]); so is an
// entry that is truncated, fails its checksum, belongs to another key or is
// larger than an entry can be, which is also removed (unless another process
// has meanwhile replaced it) and counted by its reason. A file that exists but
// cannot be read is an error. A hit refreshes the entry's mtime, its last-use
// time for trimming, when it is over an hour old.
func (c *DiskCache) Get(key Key) (Lookup, error) {
	path := c.PathFor(key)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		c.countMiss(MissAbsent)
		return Lookup{Miss: MissAbsent}, nil
	}
	if err != nil {
		c.failures.Add(1)
		return Lookup{}, fmt.Errorf("read pipeline cache entry %s: %w. Fix: make the cache directory readable, or remove it", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		c.failures.Add(1)
		return Lookup{}, fmt.Errorf("stat pipeline cache entry %s: %w", path, err)
	}
	if st.Size() > maxFileBytes {
		return c.drop(path, st, MissOversize), nil
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			c.failures.Add(1)
			return Lookup{}, fmt.Errorf("read pipeline cache entry %s: %w", path, err)
		}
		return c.drop(path, st, MissTruncated), nil
	}
	payload, miss := DecodeEntry(data, key)
	if miss != MissNone {
		return c.drop(path, st, miss), nil
	}
	c.hits.Add(1)
	if now := time.Now(); now.Sub(st.ModTime()) > mtimeInterval {
		os.Chtimes(path, now, now)
	}
	return Lookup{Payload: payload}, nil
}

// drop counts an unusable entry as a miss for its reason and removes it, unless
// another process has meanwhile replaced the file (then the new file is left
// alone).
func (c *DiskCache) drop(path string, opened fs.FileInfo, why MissReason) Lookup {
	c.countMiss(why)
	removeListed(path, opened)
	return Lookup{Miss: why}
}

// Write installs payload as key's entry, replacing any earlier one atomically:
// readers see the old entry or the new, never a mix. A payload over
// [MaxEntryBytes] is refused before anything is written. The entry is not yet
// durable; [DiskCache.Flush] makes it so. Once a quarter of the size cap has
// been written since the last trim, Write starts a background flush, which
// trims: a long-running process keeps its cache bounded without calling Flush.
func (c *DiskCache) Write(key Key, payload []byte) error {
	entry, err := EncodeEntry(key, payload)
	if err != nil {
		return err
	}
	path := c.PathFor(key)
	if err := atomicfile.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		c.failures.Add(1)
		return fmt.Errorf("create pipeline cache shard: %w. Fix: make %s writable", err, c.root)
	}
	err = atomicfile.WriteNoSync(path, filePerm, func(w io.Writer) error {
		_, err := w.Write(entry)
		return err
	})
	if err != nil {
		c.failures.Add(1)
		return fmt.Errorf("write pipeline cache entry: %w", err)
	}
	c.writes.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, path)
	c.written += int64(len(entry))
	if c.written > c.maxBytes/4 && c.background == nil {
		done := make(chan struct{})
		c.background = done
		go c.flushInBackground(done)
	}
	return nil
}

// flushInBackground is Write's background flush; its error waits for the next
// Flush. Writes that pass a quarter of the cap again while it runs start the
// next one as it ends, so a writer that outpaces one trim is still bounded.
func (c *DiskCache) flushInBackground(done chan struct{}) {
	err := c.flush(context.Background())
	c.mu.Lock()
	c.bgErr = errors.Join(c.bgErr, err)
	c.background = nil
	if err == nil && c.written > c.maxBytes/4 {
		next := make(chan struct{})
		c.background = next
		go c.flushInBackground(next)
	}
	c.mu.Unlock()
	close(done)
}

// Flush makes the entries written since the last Flush durable: it fsyncs the
// files, then their directories, each step with up to 16 fsyncs in parallel.
// Entries removed meanwhile are skipped. On failure the entries stay pending
// for the next Flush. It first waits for a background flush [DiskCache.Write]
// started, and returns its error too.
//
// Flush then enforces the size cap when a trim is due: when the directory was
// last trimmed over an hour ago (by any process), or this [DiskCache] has
// written more than a quarter of the cap since its last trim. The trim record
// is taken under the directory's trim lock before the trim starts, so of many
// processes flushing at once one trims and the others see the fresh record.
// Last, Flush adds this DiskCache's counts to the directory's usage file.
func (c *DiskCache) Flush(ctx context.Context) error {
	c.mu.Lock()
	bg := c.background
	c.mu.Unlock()
	if bg != nil {
		select {
		case <-bg:
		case <-ctx.Done():
			return fmt.Errorf("flush pipeline cache %s: wait for the background flush: %w", c.root, ctx.Err())
		}
	}
	err := c.flush(ctx)
	c.mu.Lock()
	bgErr := c.bgErr
	c.bgErr = nil
	c.mu.Unlock()
	return errors.Join(bgErr, err)
}

// flush is Flush without waiting for the background flush.
func (c *DiskCache) flush(ctx context.Context) error {
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
	if err := c.trimIfDue(ctx); err != nil {
		return err
	}
	return c.reportUsage(ctx)
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

// trimIfDue trims to the cap when a trim is due, deciding again under the trim
// lock, where another process may just have trimmed.
func (c *DiskCache) trimIfDue(ctx context.Context) error {
	if !c.trimDue() {
		return nil
	}
	lock, err := filelock.Acquire(ctx, filepath.Join(c.root, trimStamp))
	if err != nil {
		return fmt.Errorf("trim pipeline cache: %w", err)
	}
	defer lock.Unlock()
	if !c.trimDue() {
		return nil
	}
	_, err = c.trimLocked(ctx, c.maxBytes)
	return err
}

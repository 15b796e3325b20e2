package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/kiln-dev/kiln/internal/atomicfile"
	"github.com/kiln-dev/kiln/internal/filelock"
)

// Stats describes a cache, as [DiskCache.Stats] reports it. Entries and Bytes
// are read from the directory, so they include every process's entries; the
// counts are this [DiskCache]'s since [Open].
type Stats struct {
	Root     string
	Entries  int
	Bytes    int64
	MaxBytes int64
	// Hits and Misses count reads; MissesBy splits the misses by reason, and
	// Corrupt counts every miss that found an unusable entry, plus the entries
	// [DiskCache.Verify] removed.
	Hits     uint64
	Misses   uint64
	MissesBy map[MissReason]uint64
	Corrupt  uint64
	// Writes counts entries written, Errors reads and writes that failed.
	Writes, Errors uint64
	// Trims counts the trims this [DiskCache] ran ([DiskCache.Trim], or a due
	// one in [DiskCache.Flush]).
	Trims uint64
}

// Problem is an entry file [DiskCache.Verify] removed, and why.
type Problem struct {
	Path, Reason string
}

// VerifyReport is what [DiskCache.Verify] found.
type VerifyReport struct {
	// Checked is the number of entry files read.
	Checked int
	// Valid and ValidBytes count the entries that passed.
	Valid      int
	ValidBytes int64
	// Removed lists the entries that failed and were removed.
	Removed []Problem
	// TempsRemoved counts temporary files left by writers that died over an hour ago.
	TempsRemoved int
}

// TrimReport is what [DiskCache.Trim] did.
type TrimReport struct {
	// Removed entries freed Freed bytes; Entries and Bytes remain.
	Removed int
	Freed   int64
	Entries int
	Bytes   int64
	// TempsRemoved counts temporary files left by writers that died over an hour ago.
	TempsRemoved int
}

type fileInfo struct {
	path  string
	name  string
	size  int64
	mtime time.Time
	// info is what the scan saw, for removeListed.
	info fs.FileInfo
}

// scan lists the entry files and the temporary files in the shard directories.
// Other files are left out.
func (c *DiskCache) scan(ctx context.Context) (entries, temps []fileInfo, err error) {
	shards, err := os.ReadDir(c.root)
	if err != nil {
		return nil, nil, fmt.Errorf("list pipeline cache %s: %w. Fix: make it readable", c.root, err)
	}
	for _, shard := range shards {
		if !shard.IsDir() || !isHex(shard.Name(), 2) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		dir := filepath.Join(c.root, shard.Name())
		files, err := os.ReadDir(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("list pipeline cache shard %s: %w. Fix: make it readable", dir, err)
		}
		for _, f := range files {
			name := f.Name()
			isEntry := len(name) == 64+len(entryExt) && name[:2] == shard.Name() && isHex(name[:64], 64) && name[64:] == entryExt
			if !f.Type().IsRegular() || (!isEntry && !atomicfile.IsTemp(name)) {
				continue
			}
			info, err := f.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("stat %s: %w", filepath.Join(dir, name), err)
			}
			fi := fileInfo{filepath.Join(dir, name), name, info.Size(), info.ModTime(), info}
			if isEntry {
				entries = append(entries, fi)
			} else {
				temps = append(temps, fi)
			}
		}
	}
	return entries, temps, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// removeFile removes path; one that is already gone counts as removed.
func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w. Fix: make the cache directory writable", path, err)
	}
	return nil
}

// sameFile reports whether a and b describe one file in one state: the same
// file identity, size and mtime (identity alone could be a reused inode).
func sameFile(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// removeListed removes path only if it is still the file listed (see
// sameFile), and reports whether it did. A writer may have renamed a fresh
// entry over path since it was listed; checking and then removing would race
// with that rename, so the file is first renamed aside, which takes exactly one
// file, checked there, and renamed back when it is not the one listed. A reader
// meanwhile sees a miss, never a wrong entry. A path already gone counts as
// not removed.
func removeListed(path string, listed fs.FileInfo) (bool, error) {
	dir, base := filepath.Split(path)
	aside := filepath.Join(dir, "."+base+".tmp-rm"+strconv.FormatUint(rand.Uint64(), 36))
	if err := os.Rename(path, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("remove %s: %w. Fix: make the cache directory writable", path, err)
	}
	st, err := os.Lstat(aside)
	if err == nil && sameFile(st, listed) {
		return true, removeFile(aside)
	}
	if err := os.Rename(aside, path); err != nil {
		return false, fmt.Errorf("put back %s: %w. Fix: make the cache directory writable", path, err)
	}
	return false, nil
}

// sweep scans the cache and removes the stale temporary files it finds; it
// returns the entries and how many temporary files it removed.
func (c *DiskCache) sweep(ctx context.Context) ([]fileInfo, int, error) {
	entries, temps, err := c.scan(ctx)
	if err != nil {
		return nil, 0, err
	}
	removed, err := removeStaleTemps(temps)
	return entries, removed, err
}

// removeStaleTemps removes temporary files older than staleTemp.
func removeStaleTemps(temps []fileInfo) (int, error) {
	n := 0
	for _, t := range temps {
		if time.Since(t.mtime) <= staleTemp {
			continue
		}
		if err := removeFile(t.path); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Stats counts the entries in the directory and reports this [DiskCache]'s
// reads.
func (c *DiskCache) Stats(ctx context.Context) (Stats, error) {
	entries, _, err := c.scan(ctx)
	if err != nil {
		return Stats{}, err
	}
	u := c.counts()
	s := Stats{Root: c.root, Entries: len(entries), MaxBytes: c.maxBytes, Hits: u.Hits, MissesBy: u.Misses,
		Corrupt: c.corruptCount(), Writes: u.Writes, Errors: u.Errors, Trims: c.trims.Load()}
	for _, n := range u.Misses {
		s.Misses += n
	}
	for _, e := range entries {
		s.Bytes += e.size
	}
	return s, nil
}

// corruptCount is every miss that found an unusable entry, plus Verify's
// removals.
func (c *DiskCache) corruptCount() uint64 {
	var n uint64
	for i, r := range missReasonIndex {
		if r != MissAbsent {
			n += c.misses[i].Load()
		}
	}
	return n + c.verified.Load()
}

// Trim removes entries, least recently used first (oldest mtime;
// [DiskCache.Get] refreshes it hourly), until the entry files total at most
// maxBytes, and removes temporary files left by writers that died over an hour
// ago. It holds the directory's trim lock and records the trim time before it
// starts. An entry replaced by a writer after Trim listed it is kept (see
// removeListed).
func (c *DiskCache) Trim(ctx context.Context, maxBytes int64) (TrimReport, error) {
	if maxBytes < 0 {
		return TrimReport{}, fmt.Errorf("trim pipeline cache to %d bytes: negative size. Fix: pass 0 or more", maxBytes)
	}
	lock, err := filelock.Acquire(ctx, filepath.Join(c.root, trimStamp))
	if err != nil {
		return TrimReport{}, fmt.Errorf("trim pipeline cache: %w", err)
	}
	defer lock.Unlock()
	return c.trimLocked(ctx, maxBytes)
}

// trimLocked is Trim under the trim lock.
func (c *DiskCache) trimLocked(ctx context.Context, maxBytes int64) (TrimReport, error) {
	c.trims.Add(1)
	stamp := filepath.Join(c.root, trimStamp)
	if err := os.WriteFile(stamp, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), filePerm); err != nil {
		return TrimReport{}, fmt.Errorf("record the trim time in %s: %w. Fix: make %s writable", stamp, err, c.root)
	}
	c.mu.Lock()
	c.written = 0
	c.mu.Unlock()
	entries, tempsRemoved, err := c.sweep(ctx)
	r := TrimReport{TempsRemoved: tempsRemoved}
	if err != nil {
		return r, err
	}
	sort.Slice(entries, func(i, j int) bool {
		if !entries[i].mtime.Equal(entries[j].mtime) {
			return entries[i].mtime.Before(entries[j].mtime)
		}
		return entries[i].name < entries[j].name
	})
	r.Entries = len(entries)
	for _, e := range entries {
		r.Bytes += e.size
	}
	for _, e := range entries {
		if r.Bytes <= maxBytes {
			break
		}
		if err := ctx.Err(); err != nil {
			return r, err
		}
		removed, err := removeListed(e.path, e.info)
		if err != nil {
			return r, err
		}
		if removed {
			r.Removed++
			r.Freed += e.size
			r.Entries--
			r.Bytes -= e.size
		}
	}
	return r, nil
}

// Verify reads every entry in full and removes each one that is corrupt (bad
// header, length or checksum, a file name that does not match its key, a key of
// another [KeyVersion], or a file too large to be an entry), counting them as
// corrupt in Stats; an entry a writer replaced after Verify read it is kept. It
// also removes temporary files left by writers that died over an hour ago.
func (c *DiskCache) Verify(ctx context.Context) (VerifyReport, error) {
	entries, tempsRemoved, err := c.sweep(ctx)
	r := VerifyReport{TempsRemoved: tempsRemoved}
	if err != nil {
		return r, err
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		reason, opened, err := checkEntryFile(e)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return r, err
		}
		r.Checked++
		if reason == "" {
			r.Valid++
			r.ValidBytes += e.size
			continue
		}
		removed, err := removeListed(e.path, opened)
		if err != nil {
			return r, err
		}
		if removed {
			c.verified.Add(1)
			r.Removed = append(r.Removed, Problem{e.path, reason})
		}
	}
	return r, nil
}

// checkEntryFile returns why an entry file is corrupt, or "" when it is valid,
// and the file it read; the error is for a file that cannot be read at all.
func checkEntryFile(e fileInfo) (reason string, opened fs.FileInfo, err error) {
	f, err := os.Open(e.path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", nil, err
	}
	if st.Size() > maxFileBytes {
		return fmt.Sprintf("%d bytes, over the %d-byte bound for an entry", st.Size(), int64(maxFileBytes)), st, nil
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return "file shrank while being read", st, nil
	}
	key, _, err := decodeEntry(data, nil)
	if err != nil {
		return err.Error(), st, nil
	}
	if _, err := decodeKey(key); err != nil {
		return err.Error(), st, nil
	}
	if sum := sha256.Sum256(key); hex.EncodeToString(sum[:])+entryExt != e.name {
		return "file name does not match the entry's key", st, nil
	}
	return "", st, nil
}

// Clear removes every entry, the temporary files left by writers that died over
// an hour ago, the shard directories once empty, and the trim record, and returns
// how many entries it removed. Files the cache does not know are left alone.
func (c *DiskCache) Clear(ctx context.Context) (int, error) {
	entries, temps, err := c.scan(ctx)
	if err != nil {
		return 0, err
	}
	if _, err := removeStaleTemps(temps); err != nil {
		return 0, err
	}
	removed := 0
	for _, e := range entries {
		if err := removeFile(e.path); err != nil {
			return removed, err
		}
		removed++
	}
	shards, err := os.ReadDir(c.root)
	if err != nil {
		return removed, fmt.Errorf("list pipeline cache %s: %w", c.root, err)
	}
	for _, d := range shards {
		if d.IsDir() && isHex(d.Name(), 2) {
			os.Remove(filepath.Join(c.root, d.Name()))
		}
	}
	return removed, removeFile(filepath.Join(c.root, trimStamp))
}

// InvalidateImpacted removes the entries compiled for the device with the given
// fingerprint (every device when it is "") whose program digest is one of
// digests (every program when digests is empty) and which assume at least one
// of mask's features (any features when mask is zero). It returns how many it
// removed. Use it when a driver update breaks a feature on a device, or when
// programs change meaning. Entries whose header cannot be read are left to
// [DiskCache.Verify], and an entry a writer replaced after its header was read
// is kept.
func (c *DiskCache) InvalidateImpacted(ctx context.Context, mask FeatureFlags, digests [][32]byte, fingerprint string) (int, error) {
	entries, _, err := c.scan(ctx)
	if err != nil {
		return 0, err
	}
	want := make(map[[32]byte]bool, len(digests))
	for _, d := range digests {
		want[d] = true
	}
	removed := 0
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		k, opened, err := readEntryKey(e.path)
		if err != nil ||
			(fingerprint != "" && k.DeviceFingerprint != fingerprint) ||
			(len(want) > 0 && !want[k.ProgramDigest]) ||
			(mask != 0 && k.Features&mask == 0) {
			continue
		}
		gone, err := removeListed(e.path, opened)
		if err != nil {
			return removed, err
		}
		if gone {
			removed++
		}
	}
	return removed, nil
}

// readEntryKey reads just the header and key of an entry file, and returns the
// file it read.
func readEntryKey(path string) (Key, fs.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return Key{}, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Key{}, nil, err
	}
	var head [headerSize]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return Key{}, nil, corrupt(MissTruncated, "header truncated")
	}
	keyLen, _, err := parseHeader(head[:], st.Size())
	if err != nil {
		return Key{}, nil, err
	}
	buf := make([]byte, keyLen)
	if _, err := io.ReadFull(f, buf); err != nil {
		return Key{}, nil, corrupt(MissTruncated, "key truncated")
	}
	k, err := decodeKey(buf)
	if err != nil {
		return Key{}, nil, corrupt(MissCorrupt, "%v", err)
	}
	return k, st, nil
}

// HeaderReport is what [DiskCache.CheckHeaders] found.
type HeaderReport struct {
	// Entries and Bytes count the entry files.
	Entries int
	Bytes   int64
	// Bad lists the entries whose header or key is unreadable or belongs to
	// another file name; [DiskCache.Verify] (or a Read of them) removes them.
	Bad []Problem
}

// CheckHeaders reads the header and key of every entry, not the payloads, and
// changes nothing: the quick health check kiln doctor runs. [DiskCache.Verify]
// reads the payloads as well and removes what fails.
func (c *DiskCache) CheckHeaders(ctx context.Context) (HeaderReport, error) {
	entries, _, err := c.scan(ctx)
	if err != nil {
		return HeaderReport{}, err
	}
	var r HeaderReport
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		k, _, err := readEntryKey(e.path)
		var bad *corruptError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case errors.As(err, &bad):
			r.Bad = append(r.Bad, Problem{e.path, bad.reason})
		case err != nil:
			return r, fmt.Errorf("read pipeline cache entry %s: %w. Fix: make the cache directory readable", e.path, err)
		case k.Hex()+entryExt != e.name:
			r.Bad = append(r.Bad, Problem{e.path, "file name does not match the entry's key"})
		}
		r.Entries++
		r.Bytes += e.size
	}
	return r, nil
}

// Names returns the key hex ([Key.Hex]) of every entry file in the directory,
// valid or not: what `kiln cache pull` need not download again.
func (c *DiskCache) Names(ctx context.Context) (map[string]bool, error) {
	entries, _, err := c.scan(ctx)
	if err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.name[:64]] = true
	}
	return names, nil
}

// Walk calls fn with the key and the whole entry file ([EncodeEntry]'s bytes)
// of every valid entry, as `kiln cache push` uploads them. Entries that are not
// valid are skipped ([DiskCache.Verify] removes them); an error of fn stops the
// walk.
func (c *DiskCache) Walk(ctx context.Context, fn func(key Key, entry []byte) error) error {
	entries, _, err := c.scan(ctx)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.size > maxFileBytes {
			continue
		}
		data, err := os.ReadFile(e.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read pipeline cache entry %s: %w. Fix: make the cache directory readable", e.path, err)
		}
		key, _, miss := ParseEntry(data)
		if miss != MissNone || key.Hex()+entryExt != e.name {
			continue
		}
		if err := fn(key, data); err != nil {
			return err
		}
	}
	return nil
}

package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/kiln-dev/kiln/internal/atomicfile"
	"github.com/kiln-dev/kiln/internal/filelock"
)

// usageFile, in the cache's root, holds the counts every process using the
// cache has added since it was created or zeroed (see [DiskCache.Usage]).
const usageFile = "usage.json"

// usageFormat is the usage file's format number.
const usageFormat = 1

// TierUsage counts the reads and writes of one tier of the pipeline cache.
type TierUsage struct {
	// Hits counts reads that found a usable entry.
	Hits uint64 `json:"hits"`
	// Misses counts the reads that did not, by reason.
	Misses map[MissReason]uint64 `json:"misses"`
	// Errors counts reads and writes that failed: an unreadable file, or for
	// the fleet tier an unreachable, slow or refusing remote.
	Errors uint64 `json:"errors"`
	// Writes counts entries stored (for the fleet tier: uploaded).
	Writes uint64 `json:"writes"`
	// Dropped counts fleet-tier uploads given up: the write-behind queue was
	// full, the remote was down, or the flush ran out of time.
	Dropped uint64 `json:"dropped"`
}

// MissCount is the total of Misses.
func (u TierUsage) MissCount() uint64 {
	var n uint64
	for _, m := range u.Misses {
		n += m
	}
	return n
}

// Add returns u plus d.
func (u TierUsage) Add(d TierUsage) TierUsage {
	out := TierUsage{Hits: u.Hits + d.Hits, Errors: u.Errors + d.Errors, Writes: u.Writes + d.Writes, Dropped: u.Dropped + d.Dropped,
		Misses: maps.Clone(u.Misses)}
	if out.Misses == nil {
		out.Misses = map[MissReason]uint64{}
	}
	for r, n := range d.Misses {
		out.Misses[r] += n
	}
	return out
}

// Sub returns u minus an earlier snapshot of the same counts: what was
// counted since.
func (u TierUsage) Sub(earlier TierUsage) TierUsage {
	out := TierUsage{Hits: u.Hits - earlier.Hits, Errors: u.Errors - earlier.Errors, Writes: u.Writes - earlier.Writes,
		Dropped: u.Dropped - earlier.Dropped, Misses: map[MissReason]uint64{}}
	for r, n := range u.Misses {
		if d := n - earlier.Misses[r]; d > 0 {
			out.Misses[r] = d
		}
	}
	return out
}

// IsZero reports whether nothing was counted.
func (u TierUsage) IsZero() bool {
	return u.Hits == 0 && u.Errors == 0 && u.Writes == 0 && u.Dropped == 0 && u.MissCount() == 0
}

// Usage is what the cache's usage file holds ([DiskCache.Usage] reads it): the
// counts of every process that used the cache since Since, for the local
// directory and for the fleet tier behind it. `kiln cache stats` shows it.
type Usage struct {
	Format int       `json:"format"`
	Since  time.Time `json:"since"`
	Local  TierUsage `json:"local"`
	Remote TierUsage `json:"remote"`
}

// counts returns this DiskCache's counts since Open.
func (c *DiskCache) counts() TierUsage {
	u := TierUsage{Hits: c.hits.Load(), Writes: c.writes.Load(), Errors: c.failures.Load(), Misses: map[MissReason]uint64{}}
	for i, r := range missReasonIndex {
		if n := c.misses[i].Load(); n > 0 {
			u.Misses[r] = n
		}
	}
	return u
}

// reportUsage adds the counts not yet reported to the usage file.
func (c *DiskCache) reportUsage(ctx context.Context) error {
	c.reportMu.Lock()
	defer c.reportMu.Unlock()
	now := c.counts()
	delta := now.Sub(c.reported)
	if delta.IsZero() {
		return nil
	}
	if err := c.AddUsage(ctx, Usage{Local: delta}); err != nil {
		return err
	}
	c.reported = now
	return nil
}

// Usage reads the cache's usage file. A missing file is zero usage; one that
// does not decode is an error (the next [DiskCache.AddUsage] starts it again
// from zero, as it holds counters only).
func (c *DiskCache) Usage() (Usage, error) {
	path := filepath.Join(c.root, usageFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Usage{Format: usageFormat}, nil
	}
	if err != nil {
		return Usage{}, fmt.Errorf("read pipeline cache usage %s: %w. Fix: make it readable", path, err)
	}
	u, err := decodeUsage(data)
	if err != nil {
		return Usage{}, fmt.Errorf("pipeline cache usage %s: %w. Fix: run 'kiln cache stats --zero' to start the counts again", path, err)
	}
	return u, nil
}

// decodeUsage parses a usage file strictly.
func decodeUsage(data []byte) (Usage, error) {
	var u Usage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&u); err != nil {
		return Usage{}, fmt.Errorf("not a usage file: %w", err)
	}
	if dec.Decode(&struct{}{}) != io.EOF {
		return Usage{}, errors.New("not a usage file: data after the object")
	}
	if u.Format != usageFormat {
		return Usage{}, fmt.Errorf("usage format %d, want %d", u.Format, usageFormat)
	}
	for r := range u.Local.Misses {
		if !knownReason(r) {
			return Usage{}, fmt.Errorf("unknown miss reason %q", r)
		}
	}
	for r := range u.Remote.Misses {
		if !knownReason(r) {
			return Usage{}, fmt.Errorf("unknown miss reason %q", r)
		}
	}
	return u, nil
}

func knownReason(r MissReason) bool {
	for _, m := range missReasons {
		if m == r {
			return true
		}
	}
	return false
}

// AddUsage adds delta's counts to the usage file under its lock. The fleet tier
// adds its own counts here, so `kiln cache stats` shows both tiers.
func (c *DiskCache) AddUsage(ctx context.Context, delta Usage) error {
	return c.updateUsage(ctx, func(u *Usage) {
		u.Local = u.Local.Add(delta.Local)
		u.Remote = u.Remote.Add(delta.Remote)
	})
}

// ZeroUsage starts the usage file's counts again from zero, now.
func (c *DiskCache) ZeroUsage(ctx context.Context) error {
	return c.updateUsage(ctx, func(u *Usage) { *u = Usage{Format: usageFormat, Since: time.Now().UTC()} })
}

func (c *DiskCache) updateUsage(ctx context.Context, change func(*Usage)) error {
	path := filepath.Join(c.root, usageFile)
	lock, err := filelock.Acquire(ctx, path)
	if err != nil {
		return fmt.Errorf("update pipeline cache usage: %w", err)
	}
	defer lock.Unlock()
	u, err := c.Usage()
	if err != nil || u.Since.IsZero() {
		u = Usage{Format: usageFormat, Since: time.Now().UTC()}
	}
	change(&u)
	data, err := json.MarshalIndent(u, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteNoSync(path, filePerm, func(w io.Writer) error {
		_, err := w.Write(append(data, '\n'))
		return err
	}); err != nil {
		return fmt.Errorf("update pipeline cache usage: %w", err)
	}
	return lock.Unlock()
}

package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/cmd/kiln/internal/units"
	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/pgo"
	"github.com/kiln-dev/kiln/remote"
)

// cacheStatsJSON is `kiln cache stats --json`.
type cacheStatsJSON struct {
	Root     string `json:"root"`
	Entries  int    `json:"entries"`
	Bytes    int64  `json:"bytes"`
	MaxBytes int64  `json:"max_bytes"`
	// Since is when the counts below started (RFC 3339; empty before any).
	Since string `json:"since"`
	// Local and Remote count every process's reads and writes of the local
	// cache and of the fleet tier behind it.
	Local  tierJSON `json:"local"`
	Remote tierJSON `json:"remote"`
	// RemoteURL is $KILN_REMOTE, empty when no fleet tier is configured.
	RemoteURL   string `json:"remote_url"`
	UsageError  string `json:"usage_error,omitempty"`
	UsageZeroed bool   `json:"usage_zeroed,omitempty"`
}

// tierJSON is one tier's counts.
type tierJSON struct {
	Hits    uint64            `json:"hits"`
	Misses  uint64            `json:"misses"`
	ByCause map[string]uint64 `json:"misses_by_reason"`
	Errors  uint64            `json:"errors"`
	Writes  uint64            `json:"writes"`
	Dropped uint64            `json:"dropped"`
}

func toTierJSON(u cache.TierUsage) tierJSON {
	t := tierJSON{Hits: u.Hits, Misses: u.MissCount(), ByCause: map[string]uint64{}, Errors: u.Errors, Writes: u.Writes, Dropped: u.Dropped}
	for r, n := range u.Misses {
		t.ByCause[string(r)] = n
	}
	return t
}

// cachePushJSON is `kiln cache push --json`.
type cachePushJSON struct {
	Remote           string   `json:"remote"`
	Pipelines        int      `json:"pipelines"`
	PipelinesPresent int      `json:"pipelines_present"`
	Records          int      `json:"records"`
	Routes           int      `json:"routes"`
	Skipped          []string `json:"skipped"`
}

// cachePullJSON is `kiln cache pull --json`.
type cachePullJSON struct {
	Remote           string `json:"remote"`
	Pipelines        int    `json:"pipelines"`
	PipelinesPresent int    `json:"pipelines_present"`
	PipelinesBad     int    `json:"pipelines_bad"`
	Records          int    `json:"records"`
	Routes           int    `json:"routes"`
}

// cacheVerifyJSON is `kiln cache verify --json`.
type cacheVerifyJSON struct {
	Root         string        `json:"root"`
	Checked      int           `json:"checked"`
	Valid        int           `json:"valid"`
	ValidBytes   int64         `json:"valid_bytes"`
	Removed      []problemJSON `json:"removed"`
	TempsRemoved int           `json:"temps_removed"`
}

type problemJSON struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// cacheTrimJSON is `kiln cache trim --json`.
type cacheTrimJSON struct {
	Root         string `json:"root"`
	MaxBytes     int64  `json:"max_bytes"`
	Removed      int    `json:"removed"`
	Freed        int64  `json:"freed"`
	Entries      int    `json:"entries"`
	Bytes        int64  `json:"bytes"`
	TempsRemoved int    `json:"temps_removed"`
}

// cacheClearJSON is `kiln cache clear --json`.
type cacheClearJSON struct {
	Root    string `json:"root"`
	Removed int    `json:"removed"`
}

func (a *app) cacheCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Inspect and maintain the pipeline cache",
		Long: `The pipeline cache holds compiled pipelines (what each backend returns from
a compile) under $XDG_CACHE_HOME/kiln/pipelines, one checksummed file per
entry. Only the host writes it; a truncated or corrupt entry is a miss, never
an error. Its total size is capped (1 GiB, or $KILN_CACHE_MAX_BYTES such as
512MiB) and trimmed least recently used first. KILN_CACHE=off runs without it.

With $KILN_REMOTE set (s3://bucket/prefix?region=..., gs://bucket/prefix,
azblob://container/prefix or file:///shared/dir), a fleet tier shared by many
machines sits behind the local stores: a local miss reads through it, new
entries are uploaded behind the compile, and autotune records and PGO routes
are published to it and read from it. A remote outage never fails a dispatch.

  kiln cache stats    entries, bytes, the cap, and local and remote hits,
                      misses (by reason) and errors (--zero starts them again)
  kiln cache verify   read every entry in full; remove the corrupt ones
  kiln cache trim     remove least recently used entries down to the cap (--max)
  kiln cache clear    remove every entry
  kiln cache push     seed the fleet tier from this machine's stores
  kiln cache pull     seed this machine's stores from the fleet tier

Every subcommand takes --json.`,
	}
	cmd.AddCommand(a.cacheStatsCommand(), a.cacheVerifyCommand(), a.cacheTrimCommand(), a.cacheClearCommand(),
		a.cachePushCommand(), a.cachePullCommand())
	return cmd
}

// openCache opens the pipeline cache at its default root.
func openCache() (*cache.DiskCache, error) {
	root, err := cache.DefaultRoot()
	if err != nil {
		return nil, err
	}
	return cache.Open(root)
}

// cacheStatsOptions are kiln cache stats's flags.
type cacheStatsOptions struct {
	*app
	Zero bool
}

func (a *app) cacheStatsCommand() *cobra.Command {
	return command(&cacheStatsOptions{app: a}, runCacheStats, &cobra.Command{
		Use:   "stats",
		Short: "Show the pipeline cache's entries, size, cap, and local and remote hits, misses and errors",
		Long: `Show the pipeline cache's entries, size and cap, and what every kiln process
has counted since the counts started: hits, misses (by reason: absent,
corrupt, truncated, foreign-key, oversize; and for the fleet tier
unavailable), errors and writes of the local cache, and of the fleet tier
($KILN_REMOTE) behind it, with its uploads dropped. --zero starts the counts
again.`,
		Args: cobra.NoArgs,
	}, func(o *cacheStatsOptions, f *pflag.FlagSet) {
		f.BoolVar(&o.Zero, "zero", false, "start the hit, miss and error counts again from zero")
	})
}

// runCacheStats is kiln cache stats.
func runCacheStats(ctx context.Context, o *cacheStatsOptions) error {
	c, err := openCache()
	if err != nil {
		return err
	}
	if o.Zero {
		if err := c.ZeroUsage(ctx); err != nil {
			return err
		}
	}
	s, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	j := cacheStatsJSON{Root: s.Root, Entries: s.Entries, Bytes: s.Bytes, MaxBytes: s.MaxBytes, RemoteURL: os.Getenv(remote.Env), UsageZeroed: o.Zero}
	u, err := c.Usage()
	if err != nil {
		j.UsageError = err.Error()
	}
	if !u.Since.IsZero() {
		j.Since = u.Since.Format(time.RFC3339)
	}
	j.Local, j.Remote = toTierJSON(u.Local), toTierJSON(u.Remote)
	return o.show(j, func() { o.printCacheStats(j) })
}

func (a *app) printCacheStats(j cacheStatsJSON) {
	fmt.Fprintf(a.out, "pipeline cache %s\n  entries  %d\n  size     %s of %s\n", j.Root, j.Entries, units.Bytes(j.Bytes), units.Bytes(j.MaxBytes))
	if j.UsageError != "" {
		fmt.Fprintf(a.out, "  problem: %s\n", j.UsageError)
	}
	since := "no use counted yet"
	if j.Since != "" {
		since = "since " + j.Since
	}
	fmt.Fprintf(a.out, "counts (%s):\n", since)
	tier := func(name string, t tierJSON, extra string) {
		fmt.Fprintf(a.out, "  %-7s hits %d, misses %d%s, errors %d, writes %d%s\n", name, t.Hits, t.Misses, reasons(t.ByCause), t.Errors, t.Writes, extra)
	}
	tier("local", j.Local, "")
	if j.RemoteURL == "" && j.Remote.Hits+j.Remote.Misses+j.Remote.Errors+j.Remote.Writes == 0 {
		fmt.Fprintf(a.out, "  remote  none configured (%s)\n", remote.Env)
		return
	}
	tier("remote", j.Remote, fmt.Sprintf(", uploads dropped %d", j.Remote.Dropped))
	if j.RemoteURL != "" {
		fmt.Fprintf(a.out, "  remote  %s\n", j.RemoteURL)
	}
}

// reasons prints misses by reason, " (absent 3, corrupt 1)", or nothing.
func reasons(by map[string]uint64) string {
	names := make([]string, 0, len(by))
	for r := range by {
		names = append(names, r)
	}
	sort.Strings(names)
	var parts []string
	for _, r := range names {
		parts = append(parts, fmt.Sprintf("%s %d", r, by[r]))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func (a *app) cacheVerifyCommand() *cobra.Command {
	return command(a, runCacheVerify, &cobra.Command{
		Use:   "verify",
		Short: "Check every entry's checksum and remove the corrupt ones",
		Long: `Read every pipeline cache entry in full and remove each one whose header,
length, checksum or key is wrong, and temporary files left by writers that
died over an hour ago. Removing is safe: a missing entry is compiled again.`,
		Args: cobra.NoArgs,
	}, nil)
}

// runCacheVerify is kiln cache verify (it has no flags of its own).
func runCacheVerify(ctx context.Context, a *app) error {
	c, err := openCache()
	if err != nil {
		return err
	}
	r, err := c.Verify(ctx)
	if err != nil {
		return err
	}
	j := cacheVerifyJSON{Root: c.Root(), Checked: r.Checked, Valid: r.Valid, ValidBytes: r.ValidBytes, Removed: []problemJSON{}, TempsRemoved: r.TempsRemoved}
	for _, p := range r.Removed {
		j.Removed = append(j.Removed, problemJSON{p.Path, p.Reason})
	}
	return a.show(j, func() {
		fmt.Fprintf(a.out, "pipeline cache %s: %d entries checked, %d valid (%s), %d corrupt removed, %d stale temporary files removed\n",
			c.Root(), r.Checked, r.Valid, units.Bytes(r.ValidBytes), len(r.Removed), r.TempsRemoved)
		for _, p := range r.Removed {
			fmt.Fprintf(a.out, "  removed %s: %s\n", p.Path, p.Reason)
		}
	})
}

// cacheTrimOptions are kiln cache trim's flags.
type cacheTrimOptions struct {
	*app
	Max string // --max; empty: the cache's cap
}

func (a *app) cacheTrimCommand() *cobra.Command {
	return command(&cacheTrimOptions{app: a}, runCacheTrim, &cobra.Command{
		Use:   "trim",
		Short: "Remove least recently used entries down to the size cap",
		Args:  cobra.NoArgs,
	}, func(o *cacheTrimOptions, f *pflag.FlagSet) {
		f.StringVar(&o.Max, "max", "", "trim to this size, e.g. 256MiB (default: the cache's cap)")
	})
}

// runCacheTrim is kiln cache trim.
func runCacheTrim(ctx context.Context, o *cacheTrimOptions) error {
	c, err := openCache()
	if err != nil {
		return err
	}
	maxBytes := c.MaxBytes()
	if o.Max != "" {
		if maxBytes, err = cache.ParseBytes(o.Max); err != nil {
			return fmt.Errorf("--max %q: %w. Fix: pass a byte count such as 1073741824 or 512MiB", o.Max, err)
		}
	}
	r, err := c.Trim(ctx, maxBytes)
	if err != nil {
		return err
	}
	j := cacheTrimJSON{Root: c.Root(), MaxBytes: maxBytes, Removed: r.Removed, Freed: r.Freed, Entries: r.Entries, Bytes: r.Bytes, TempsRemoved: r.TempsRemoved}
	return o.show(j, func() {
		fmt.Fprintf(o.out, "pipeline cache %s: removed %d entries (%s); %d entries (%s) remain, cap %s\n",
			c.Root(), r.Removed, units.Bytes(r.Freed), r.Entries, units.Bytes(r.Bytes), units.Bytes(maxBytes))
	})
}

func (a *app) cacheClearCommand() *cobra.Command {
	return command(a, runCacheClear, &cobra.Command{
		Use:   "clear",
		Short: "Remove every entry of the pipeline cache",
		Args:  cobra.NoArgs,
	}, nil)
}

// runCacheClear is kiln cache clear (it has no flags of its own).
func runCacheClear(ctx context.Context, a *app) error {
	c, err := openCache()
	if err != nil {
		return err
	}
	n, err := c.Clear(ctx)
	if err != nil {
		return err
	}
	return a.show(cacheClearJSON{Root: c.Root(), Removed: n}, func() {
		fmt.Fprintf(a.out, "pipeline cache %s: removed %d entries\n", c.Root(), n)
	})
}

// openRemote opens the fleet tier named by --remote, else $KILN_REMOTE.
func openRemote(ctx context.Context, url string) (*remote.Store, error) {
	if url == "" {
		url = os.Getenv(remote.Env)
	}
	if url == "" || url == host.RemoteOff {
		return nil, fmt.Errorf("no fleet tier configured. Fix: set %s (or pass --remote) to s3://bucket/prefix?region=..., gs://bucket/prefix, azblob://container/prefix or file:///shared/dir", remote.Env)
	}
	return remote.Open(ctx, url, remote.Options{})
}

// fleetOptions are the flags of kiln cache push and pull.
type fleetOptions struct {
	*app
	Remote string // --remote; empty: $KILN_REMOTE
}

// fleetCommand is kiln cache push or pull: cmd with --remote, running run.
func (a *app) fleetCommand(cmd *cobra.Command, run func(context.Context, *fleetOptions) error) *cobra.Command {
	cmd.Args = cobra.NoArgs
	return command(&fleetOptions{app: a}, run, cmd, func(o *fleetOptions, f *pflag.FlagSet) {
		f.StringVar(&o.Remote, "remote", "", "fleet tier URL (default $"+remote.Env+")")
	})
}

func (a *app) cachePushCommand() *cobra.Command {
	return a.fleetCommand(&cobra.Command{
		Use:   "push",
		Short: "Seed the fleet tier from this machine: pipelines, autotune records and PGO routes",
		Long: `Upload every valid local pipeline cache entry the fleet tier lacks, and
publish every autotune record and PGO route of this machine, so other machines
sharing the fleet tier start tuned. Records and routes are published, never
overwritten: the newest measurement of each wins.`,
	}, runCachePush)
}

// localStores are this machine's stores that kiln cache push and pull seed
// from and into.
type localStores struct {
	pipelines *cache.DiskCache
	autotune  *autotune.Store
	routes    *pgo.Table
}

// openLocalStores opens the stores at their default paths.
func openLocalStores() (localStores, error) {
	paths, err := host.DefaultStorePaths()
	if err != nil {
		return localStores{}, err
	}
	c, err := cache.Open(paths.PipelineCache)
	if err != nil {
		return localStores{}, err
	}
	tune, err := autotune.Load(paths.Autotune)
	if err != nil {
		return localStores{}, err
	}
	routes, err := pgo.Load(paths.PGO)
	if err != nil {
		return localStores{}, err
	}
	return localStores{c, tune, routes}, nil
}

// runCachePush is kiln cache push.
func runCachePush(ctx context.Context, o *fleetOptions) error {
	r, err := openRemote(ctx, o.Remote)
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	st, err := openLocalStores()
	if err != nil {
		return err
	}
	rep, err := r.Push(ctx, st.pipelines, st.autotune, st.routes)
	if err != nil {
		return err
	}
	j := cachePushJSON{Remote: r.URL(), Pipelines: rep.Pipelines, PipelinesPresent: rep.PipelinesPresent, Records: rep.Records, Routes: rep.Routes, Skipped: append([]string{}, rep.Skipped...)}
	return o.show(j, func() {
		fmt.Fprintf(o.out, "fleet tier %s: uploaded %d pipelines (%d there already), published %d autotune records and %d PGO routes\n",
			j.Remote, j.Pipelines, j.PipelinesPresent, j.Records, j.Routes)
		for _, s := range j.Skipped {
			fmt.Fprintf(o.out, "  skipped %s\n", s)
		}
	})
}

func (a *app) cachePullCommand() *cobra.Command {
	return a.fleetCommand(&cobra.Command{
		Use:   "pull",
		Short: "Seed this machine from the fleet tier: pipelines, autotune records and PGO routes",
		Long: `Download every pipeline cache entry the local cache lacks (each verified),
the newest autotune records measured on this machine's devices, and the newest
PGO routes whose backend is live here (same device and plugin version), when
they are newer than the local ones; then save the local stores. The plugins
are started to learn this machine's devices.`,
	}, runCachePull)
}

// runCachePull is kiln cache pull.
func runCachePull(ctx context.Context, o *fleetOptions) error {
	r, err := openRemote(ctx, o.Remote)
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	h, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	st, err := openLocalStores()
	if err != nil {
		return err
	}
	rep, err := r.Pull(ctx, st.pipelines, st.autotune, st.routes, h.Live())
	if err != nil {
		return err
	}
	j := cachePullJSON{Remote: r.URL(), Pipelines: rep.Pipelines, PipelinesPresent: rep.PipelinesPresent, PipelinesBad: rep.PipelinesBad, Records: rep.Records, Routes: rep.Routes}
	return o.show(j, func() {
		fmt.Fprintf(o.out, "fleet tier %s: downloaded %d pipelines (%d here already, %d not valid entries), took %d autotune records and %d PGO routes\n",
			j.Remote, j.Pipelines, j.PipelinesPresent, j.PipelinesBad, j.Records, j.Routes)
	})
}

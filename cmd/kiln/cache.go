package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kiln-dev/kiln/cache"
)

// cacheStatsJSON is `kiln cache stats --json`.
type cacheStatsJSON struct {
	Root     string `json:"root"`
	Entries  int    `json:"entries"`
	Bytes    int64  `json:"bytes"`
	MaxBytes int64  `json:"max_bytes"`
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

  kiln cache stats    entries, bytes and the cap
  kiln cache verify   read every entry in full; remove the corrupt ones
  kiln cache trim     remove least recently used entries down to the cap (--max)
  kiln cache clear    remove every entry

Every subcommand takes --json.`,
	}
	cmd.AddCommand(a.cacheStatsCommand(), a.cacheVerifyCommand(), a.cacheTrimCommand(), a.cacheClearCommand())
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

func (a *app) cacheStatsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Show the pipeline cache's entries, size and cap",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := openCache()
			if err != nil {
				return err
			}
			s, err := c.Stats(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(cacheStatsJSON{Root: s.Root, Entries: s.Entries, Bytes: s.Bytes, MaxBytes: s.MaxBytes})
			}
			fmt.Fprintf(a.out, "pipeline cache %s\n  entries  %d\n  size     %s of %s\n", s.Root, s.Entries, byteSize(s.Bytes), byteSize(s.MaxBytes))
			return nil
		},
	}
}

func (a *app) cacheVerifyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check every entry's checksum and remove the corrupt ones",
		Long: `Read every pipeline cache entry in full and remove each one whose header,
length, checksum or key is wrong, and temporary files left by writers that
died over an hour ago. Removing is safe: a missing entry is compiled again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := openCache()
			if err != nil {
				return err
			}
			r, err := c.Verify(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				j := cacheVerifyJSON{Root: c.Root(), Checked: r.Checked, Valid: r.Valid, ValidBytes: r.ValidBytes, Removed: []problemJSON{}, TempsRemoved: r.TempsRemoved}
				for _, p := range r.Removed {
					j.Removed = append(j.Removed, problemJSON{p.Path, p.Reason})
				}
				return a.printJSON(j)
			}
			fmt.Fprintf(a.out, "pipeline cache %s: %d entries checked, %d valid (%s), %d corrupt removed, %d stale temporary files removed\n",
				c.Root(), r.Checked, r.Valid, byteSize(r.ValidBytes), len(r.Removed), r.TempsRemoved)
			for _, p := range r.Removed {
				fmt.Fprintf(a.out, "  removed %s: %s\n", p.Path, p.Reason)
			}
			return nil
		},
	}
}

func (a *app) cacheTrimCommand() *cobra.Command {
	var limit string
	cmd := &cobra.Command{
		Use:   "trim",
		Short: "Remove least recently used entries down to the size cap",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := openCache()
			if err != nil {
				return err
			}
			maxBytes := c.MaxBytes()
			if limit != "" {
				if maxBytes, err = cache.ParseBytes(limit); err != nil {
					return fmt.Errorf("--max %q: %w. Fix: pass a byte count such as 1073741824 or 512MiB", limit, err)
				}
			}
			r, err := c.Trim(cmd.Context(), maxBytes)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(cacheTrimJSON{Root: c.Root(), MaxBytes: maxBytes, Removed: r.Removed, Freed: r.Freed, Entries: r.Entries, Bytes: r.Bytes, TempsRemoved: r.TempsRemoved})
			}
			fmt.Fprintf(a.out, "pipeline cache %s: removed %d entries (%s); %d entries (%s) remain, cap %s\n",
				c.Root(), r.Removed, byteSize(r.Freed), r.Entries, byteSize(r.Bytes), byteSize(maxBytes))
			return nil
		},
	}
	cmd.Flags().StringVar(&limit, "max", "", "trim to this size, e.g. 256MiB (default: the cache's cap)")
	return cmd
}

func (a *app) cacheClearCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "clear",
		Short: "Remove every entry of the pipeline cache",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := openCache()
			if err != nil {
				return err
			}
			n, err := c.Clear(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(cacheClearJSON{Root: c.Root(), Removed: n})
			}
			fmt.Fprintf(a.out, "pipeline cache %s: removed %d entries\n", c.Root(), n)
			return nil
		},
	}
}

// byteSize prints n bytes in the largest binary unit that keeps it at 1 or more.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n), ""
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

func (a *app) autotuneCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "autotune",
		Short: "List or forget the autotune records kiln tune saved",
		Long: `The autotune store ($XDG_CONFIG_HOME/kiln/autotune.toml) holds one record per
program variant and device: the workgroup size compiles of that variant on
that device take, and the tunable values kiln tune chose. Records are keyed by
the variant's folded digest and by the device ("cuda/<fingerprint>"), never by
the adapter's index.`,
	}
	cmd.AddCommand(a.autotuneListCommand(), a.autotuneForgetCommand())
	return cmd
}

type autotuneRecordJSON struct {
	Key           string    `json:"key"`
	Adapter       string    `json:"adapter"`
	Kernel        string    `json:"kernel,omitempty"`
	Program       string    `json:"program,omitempty"`
	WorkgroupSize [3]uint32 `json:"workgroup_size"`
	Params        string    `json:"params,omitempty"`
	Unroll        uint32    `json:"unroll"`
	Tile          [3]uint32 `json:"tile"`
	RecordedAt    string    `json:"recorded_at"`
}

// corpusKernelOf names the corpus kernel whose default variant on adapter has
// key, or whose searched options at its default fixed options do (the tile
// record of matmul_tc at type=bf16, whose params are the tile), or "".
func corpusKernelOf(key autotune.Key) string {
	for _, k := range kernels.All() {
		if autotune.KeyFor(k.Program(), ir.SpecMap{}, key.Adapter()) == key {
			return k.Name
		}
		if k.TunedOptions().Len() > 0 && autotune.OptionsKey(k.Name, k.FixedOptions(ir.SpecMap{}), key.Adapter()) == key {
			return k.Name
		}
	}
	return ""
}

func (a *app) autotuneListCommand() *cobra.Command {
	return command(a, runAutotuneList, &cobra.Command{
		Use:   "list",
		Short: "List the autotune records, naming the corpus kernel or the program of each",
		Args:  cobra.NoArgs,
	}, nil)
}

// runAutotuneList is kiln autotune list (it has no flags of its own).
func runAutotuneList(_ context.Context, a *app) error {
	path, st, err := loadAutotune()
	if err != nil {
		return err
	}
	rows := []autotuneRecordJSON{}
	for k, r := range st.Records() {
		rows = append(rows, autotuneRecordJSON{Key: k.Hex(), Adapter: k.Adapter(), Kernel: corpusKernelOf(k), Program: r.Program,
			WorkgroupSize: r.WorkgroupSize, Params: r.Params, Unroll: r.Unroll, Tile: r.Tile, RecordedAt: r.RecordedAt})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Adapter != rows[j].Adapter {
			return rows[i].Adapter < rows[j].Adapter
		}
		return rows[i].Key < rows[j].Key
	})
	v := struct {
		Store   string               `json:"store"`
		Records []autotuneRecordJSON `json:"records"`
	}{path, rows}
	header := fmt.Sprintf("autotune store %s: %d record(s)", path, len(rows))
	return a.showStore(v, header, len(rows), "KEY\tKERNEL\tADAPTER\tWORKGROUP\tPARAMS\tRECORDED", func(tw io.Writer) {
		for _, r := range rows {
			kernel, params := r.Kernel, r.Params
			if kernel == "" {
				kernel = r.Program
			}
			if kernel == "" {
				kernel = "-"
			}
			if params == "" {
				params = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d×%d×%d\t%s\t%s\n", r.Key, kernel, r.Adapter,
				r.WorkgroupSize[0], r.WorkgroupSize[1], r.WorkgroupSize[2], params, r.RecordedAt)
		}
	})
}

// loadAutotune loads the autotune store at its default path.
func loadAutotune() (string, *autotune.Store, error) {
	path, err := autotune.DefaultPath()
	if err != nil {
		return "", nil, err
	}
	st, err := autotune.Load(path)
	return path, st, err
}

// showStore prints a store's listing: v with --json, else header and, when
// the store has rows, the table of head and the lines rows writes.
func (a *app) showStore(v any, header string, n int, head string, rows func(tw io.Writer)) error {
	return a.render(v, func() error {
		fmt.Fprintln(a.out, header)
		if n == 0 {
			return nil
		}
		tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, head)
		rows(tw)
		return tw.Flush()
	})
}

// autotuneForgetOptions are kiln autotune forget's flags and KEY arguments.
type autotuneForgetOptions struct {
	*app
	Kernel  string
	Adapter string
	All     bool
	argList
}

func (a *app) autotuneForgetCommand() *cobra.Command {
	return command(&autotuneForgetOptions{app: a}, runAutotuneForget, &cobra.Command{
		Use:   "forget [KEY[@ADAPTER]...] [--kernel NAME] [--adapter ADAPTER] [--all]",
		Short: "Remove autotune records: by key, by kernel or program, by adapter, or all",
		Long: `Forget removes the records that match: each KEY (32 hex digits, as kiln
autotune list shows, optionally @ADAPTER); with --kernel, the records of a
corpus kernel (its default variant, and every record kiln tune made of it),
of a program file (PROGRAM.json: its default variant, and every record made
of a program of its name) or of a program name as kiln autotune list shows
it; every record of an --adapter ("cuda/<fingerprint>", or a backend id such
as "cuda" for all its devices), or --all. --adapter also narrows KEY and
--kernel. The store is saved under its lock, merged with what other processes
wrote meanwhile.`,
	}, func(o *autotuneForgetOptions, f *pflag.FlagSet) {
		f.StringVar(&o.Kernel, "kernel", "", "forget the records of this corpus kernel, program file (PROGRAM.json) or program name")
		f.StringVar(&o.Adapter, "adapter", "", "forget only records of this adapter (backend/fingerprint, or a backend id)")
		f.BoolVar(&o.All, "all", false, "forget every record (narrowed by --adapter)")
	})
}

// runAutotuneForget is kiln autotune forget.
func runAutotuneForget(ctx context.Context, o *autotuneForgetOptions) error {
	if len(o.Args) == 0 && o.Kernel == "" && o.Adapter == "" && !o.All {
		return errors.New("nothing to forget. Fix: pass a KEY, --kernel NAME, --adapter ADAPTER or --all")
	}
	if o.All && (len(o.Args) > 0 || o.Kernel != "") {
		return errors.New("--all with a KEY or --kernel. Fix: pass one or the other")
	}
	path, st, err := loadAutotune()
	if err != nil {
		return err
	}
	var target *forgetTarget
	if o.Kernel != "" {
		if target, err = resolveForgetTarget(o.Kernel, st.Records()); err != nil {
			return err
		}
	}
	adapterMatches := func(key autotune.Key) bool {
		if o.Adapter == "" {
			return true
		}
		id, _, _ := autotune.SplitDeviceAdapter(key.Adapter())
		return key.Adapter() == o.Adapter || id == o.Adapter
	}
	var forgotten []string
	for key, rec := range st.Records() {
		match := false
		for _, arg := range o.Args {
			hex, ad, hasAdapter := strings.Cut(arg, "@")
			if key.Hex() == hex && (!hasAdapter || key.Adapter() == ad) {
				match = true
			}
		}
		if target != nil && target.matches(key, rec) {
			match = true
		}
		if (o.All || (len(o.Args) == 0 && target == nil)) || match {
			if adapterMatches(key) && st.Forget(key) {
				forgotten = append(forgotten, key.String())
			}
		}
	}
	sort.Strings(forgotten)
	if _, err := st.SaveIfDirty(ctx); err != nil {
		return err
	}
	return o.printForgotten("store", "record(s)", path, forgotten)
}

// forgetTarget is what `kiln autotune forget --kernel` names: records of
// prog's default variant (when the name resolves to a program) and records
// that carry the program name name.
type forgetTarget struct {
	prog *ir.Program
	name string
}

// resolveForgetTarget resolves --kernel s: a corpus kernel, else a program
// file (os.Stat finds it), else a program name some record carries.
func resolveForgetTarget(s string, records map[autotune.Key]autotune.Record) (*forgetTarget, error) {
	if k, ok := kernels.Lookup(s); ok {
		p := k.Program()
		return &forgetTarget{prog: p, name: p.Name}, nil
	}
	if _, err := os.Stat(s); err == nil {
		p, err := loadProgram(s)
		if err != nil {
			return nil, err
		}
		return &forgetTarget{prog: p, name: p.Name}, nil
	}
	for _, r := range records {
		if r.Program == s {
			return &forgetTarget{name: s}, nil
		}
	}
	return nil, fmt.Errorf("unknown kernel %q: no corpus kernel, program file or recorded program has that name. Fix: pass a name from kiln run --list, the path of the JSON program, or a program name kiln autotune list shows", s)
}

// matches reports whether the record rec under key is one of t's.
func (t *forgetTarget) matches(key autotune.Key, rec autotune.Record) bool {
	if rec.Program != "" && rec.Program == t.name {
		return true
	}
	return t.prog != nil && autotune.KeyFor(t.prog, ir.SpecMap{}, key.Adapter()) == key
}

// printForgotten reports what a forget command removed from the file at path:
// with --json an object {where: path, "forgotten": [...]}, else a count of
// what and one line per entry.
func (a *app) printForgotten(where, what, path string, forgotten []string) error {
	if a.json {
		return a.printJSON(map[string]any{where: path, "forgotten": append([]string{}, forgotten...)})
	}
	fmt.Fprintf(a.out, "forgot %d %s in %s\n", len(forgotten), what, path)
	for _, f := range forgotten {
		fmt.Fprintf(a.out, "  %s\n", f)
	}
	return nil
}

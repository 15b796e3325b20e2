package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/pgo"
)

// doctorJSON is `kiln doctor --json`.
type doctorJSON struct {
	PluginsDir string        `json:"plugins_dir"`
	Source     string        `json:"plugins_dir_source"`
	DirError   string        `json:"plugins_dir_error,omitempty"`
	Files      []fileJSON    `json:"files"`
	Plugins    []pluginJSON  `json:"plugins"`
	Stores     *storesJSON   `json:"stores"`
	StoreError string        `json:"stores_error,omitempty"`
	Usable     []string      `json:"usable"`
	Backends   []backendJSON `json:"backends"`
	PinFile    string        `json:"pin_file"`
	Pinning    bool          `json:"pinning"`
	Probes     []probeJSON   `json:"probes"`
	OK         bool          `json:"ok"`
	Problems   []string      `json:"problems"`
}

type fileJSON struct {
	Path     string `json:"path"`
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason"`
}

type pluginJSON struct {
	Path      string `json:"path"`
	Handshake string `json:"handshake"`
	Error     string `json:"error,omitempty"`
	ID        string `json:"id,omitempty"`
	Version   string `json:"version,omitempty"`
	Protocol  int    `json:"protocol,omitempty"`
	Pid       int    `json:"pid,omitempty"`
	StartNs   int64  `json:"start_ns,omitempty"`
	// Stage is where a failed start failed (host.StartStage); State the
	// plugin's state; Pin its pinned SHA-256 when pinning is on.
	Stage string `json:"stage,omitempty"`
	// ShadowedBy is, for a plugin shadowed by another that reports the same
	// backend id (stage "duplicate id"), the plugin that provides it.
	ShadowedBy string `json:"shadowed_by,omitempty"`
	State      string `json:"state"`
	Pin        string `json:"pin,omitempty"`
	// Capabilities is the plugin's optional interfaces and data plane in one
	// line; Missing says what the host does instead of each one it lacks.
	Capabilities string   `json:"capabilities,omitempty"`
	Missing      []string `json:"missing,omitempty"`
}

// doctorOptions are kiln doctor's flags.
type doctorOptions struct {
	*app
	ProbeTimeout time.Duration
}

func (a *app) doctorCommand() *cobra.Command {
	return command(&doctorOptions{app: a}, runDoctor, &cobra.Command{
		Use:   "doctor",
		Short: "Explain what kiln finds: plugins directory, files, handshakes, stores",
		Long: `Diagnose the installation: which plugins directory is used and why, every
file in it and why it was accepted or rejected (only executables named
kiln-backend-<name> are plugins, and only those nobody but you or root can
change: world-writable files or directories and files of other users are
refused), each plugin's handshake result and version — a failed start says
where it failed (exited or hung before the handshake, bad handshake, wrong
protocol version, exited or hung in Describe, refused by pinning) with its own
Fix —, whether pinning is on and each plugin's pin, each adapter's status, a
probe dispatch on every ready backend (repeated while it crashes, so a plugin
that crashes on every call shows as failing with its last exit and stderr
line; each attempt is bounded by --probe-timeout, default 10s), and each
persistent store: its path, size and health
(pipeline cache: entries, bytes and corrupt headers, read-only — kiln cache
verify repairs; autotune store and PGO table: whether they load; PGO routes
that are stale against the live backends, which routing ignores; the fleet
tier named by $KILN_REMOTE: reachable, writable, and its latency).

The exit status is 0 when at least one backend adapter is ready and passes its
probe (the CPU reference counts), 1 otherwise; store problems are reported,
not fatal.`,
		Args: cobra.NoArgs,
	}, func(o *doctorOptions, f *pflag.FlagSet) {
		f.DurationVar(&o.ProbeTimeout, "probe-timeout", defaultProbeTimeout, "give up on each probe dispatch after this long (a plugin that ignores cancellation cannot hang the doctor)")
	})
}

// runDoctor is kiln doctor: the report, the survey, the stores and a probe
// dispatch per ready backend.
func runDoctor(ctx context.Context, o *doctorOptions) error {
	if o.ProbeTimeout <= 0 {
		return fmt.Errorf("--probe-timeout %v is not positive. Fix: give a positive duration, for example --probe-timeout %v", o.ProbeTimeout, defaultProbeTimeout)
	}
	h, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	bar := o.progressBar()
	bar.update(0, 3, "starting the plugins")
	rows, err := h.Survey(ctx)
	if err != nil {
		bar.finish()
		return err
	}
	bar.update(1, 3, "checking the stores")
	d := diagnose(ctx, h.Report(), rows, h.Live())
	bar.update(2, 3, "probing the backends")
	d.Probes = probeBackends(ctx, h, rows, o.ProbeTimeout)
	bar.finish()
	d.settleProbes()
	if err := o.render(d, func() error { return o.printDoctor(d, rows) }); err != nil {
		return err
	}
	if !d.OK {
		return &exitError{code: 1, err: errors.New("nothing usable: no backend adapter is ready. Fix: " + doctorFix(d))}
	}
	return nil
}

// diagnose gathers the report, the survey and the stores' health (stale PGO
// routes are judged against live).
func diagnose(ctx context.Context, r host.Report, rows []host.BackendStatus, live []pgo.Live) doctorJSON {
	d := doctorJSON{PluginsDir: r.Dir, Source: string(r.Source), Files: []fileJSON{}, Plugins: []pluginJSON{}, Usable: []string{}, Problems: []string{},
		PinFile: r.PinFile, Pinning: r.Pinning, Probes: []probeJSON{}}
	if r.DirErr != nil {
		d.DirError = r.DirErr.Error()
		d.Problems = append(d.Problems, d.DirError)
	}
	for _, f := range r.Files {
		d.Files = append(d.Files, fileJSON{Path: f.Path, Accepted: f.Accepted, Reason: f.Reason})
	}
	for _, p := range r.Plugins {
		pj := pluginJSON{Path: p.Path, Handshake: "ok", Pid: p.Pid, StartNs: p.StartTime.Nanoseconds(), State: p.State, Pin: p.Pin}
		if p.Err != nil {
			pj.Handshake, pj.Error, pj.Stage = "failed", p.Err.Error(), pluginStage(p.Err)
			var se *host.StartError
			if errors.As(p.Err, &se) && se.Stage == host.StartDuplicate {
				pj.Handshake, pj.ShadowedBy = "ok", se.ShadowedBy
			}
			d.Problems = append(d.Problems, pj.Error)
		} else {
			pj.ID, pj.Version, pj.Protocol = p.Description.ID, p.Description.Version, p.Protocol
			pj.Capabilities, pj.Missing = p.Capabilities.String(), p.Capabilities.Missing()
		}
		d.Plugins = append(d.Plugins, pj)
	}
	for _, row := range rows {
		d.Backends = append(d.Backends, toBackendJSON(row))
		if row.Status == host.StatusReady {
			d.Usable = append(d.Usable, row.Name())
		}
	}
	if stores, err := host.DefaultStorePaths(); err != nil {
		d.StoreError = err.Error()
		d.Problems = append(d.Problems, d.StoreError)
	} else {
		s, problems := checkStores(ctx, stores, live)
		d.Stores = &s
		d.Problems = append(d.Problems, problems...)
	}
	d.OK = len(d.Usable) > 0
	return d
}

// settleProbes takes the backends whose probe failed out of the usable ones and
// lists the failures as problems.
func (d *doctorJSON) settleProbes() {
	for _, p := range d.Probes {
		if p.OK {
			continue
		}
		d.Problems = append(d.Problems, fmt.Sprintf("probe dispatch on %s: %s", p.Backend, p.Error))
		for i, u := range d.Usable {
			if u == p.Backend {
				d.Usable = append(d.Usable[:i], d.Usable[i+1:]...)
				break
			}
		}
	}
	d.OK = len(d.Usable) > 0
}

// doctorFix is the advice when nothing is usable.
func doctorFix(d doctorJSON) string {
	switch {
	case d.DirError != "":
		return "create the plugins directory and install plugins (make build puts them in bin/plugins), or set --plugins / $KILN_PLUGIN_DIR"
	case len(d.Plugins) == 0:
		return fmt.Sprintf("copy kiln-backend-* executables into %s (make build puts them in bin/plugins)", d.PluginsDir)
	}
	return "repair the failures listed above"
}

func (a *app) printDoctor(d doctorJSON, rows []host.BackendStatus) error {
	fmt.Fprintf(a.out, "plugins directory: %s (from %s)\n", d.PluginsDir, d.Source)
	if d.DirError != "" {
		fmt.Fprintf(a.out, "  problem: %s\n", d.DirError)
	}
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nfiles (%d):\n", len(d.Files))
	for _, f := range d.Files {
		verdict := "rejected"
		if f.Accepted {
			verdict = "accepted"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", filepath.Base(f.Path), verdict, f.Reason)
	}
	fmt.Fprintf(tw, "\nplugins (%d):\n", len(d.Plugins))
	for _, p := range d.Plugins {
		switch {
		case p.ShadowedBy != "":
			fmt.Fprintf(tw, "  %s\tshadowed by %s\t%s\n", filepath.Base(p.Path), filepath.Base(p.ShadowedBy), p.Error)
			continue
		case p.Error != "":
			fmt.Fprintf(tw, "  %s\thandshake failed (%s)\t%s\n", filepath.Base(p.Path), p.Stage, p.Error)
			continue
		}
		fmt.Fprintf(tw, "  %s\thandshake ok (protocol %d)\t%s %s, pid %d, started in %v\n", filepath.Base(p.Path), p.Protocol, p.ID, p.Version, p.Pid, time.Duration(p.StartNs).Round(time.Microsecond))
		fmt.Fprintf(tw, "  \t\t%s\n", p.Capabilities)
		for _, m := range p.Missing {
			fmt.Fprintf(tw, "  \t\t  - %s\n", m)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.out, "\nadapters:")
	listed := false
	for _, r := range rows {
		if !r.Started {
			continue // listed above with its handshake failure
		}
		listed = true
		line := fmt.Sprintf("  %s %q: %s", r.Name(), r.AdapterName, r.Status)
		if r.Reason != "" {
			line += ": " + r.Reason
		}
		if r.ReferenceOracle {
			line += " (reference oracle: used only by explicit --backend)"
		}
		fmt.Fprintln(a.out, line)
	}
	if !listed {
		fmt.Fprintln(a.out, "  none")
	}
	printPinning(a.out, d)
	printProbes(a.out, d.Probes)
	fmt.Fprintln(a.out, "\nstores:")
	if d.Stores != nil {
		a.printStores(*d.Stores)
	} else {
		fmt.Fprintf(a.out, "  problem: %s\n", d.StoreError)
	}
	if d.OK {
		fmt.Fprintf(a.out, "\nok: %d usable adapter(s): %s\n", len(d.Usable), strings.Join(d.Usable, ", "))
	}
	return nil
}

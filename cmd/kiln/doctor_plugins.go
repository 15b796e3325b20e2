package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/kiln-dev/kiln/host"
)

// probeJSON is one probe dispatch of `kiln doctor`.
type probeJSON struct {
	Backend string `json:"backend"`
	OK      bool   `json:"ok"`
	// Attempts counts the probes sent: a crashed probe is repeated, up to the
	// host's failure threshold, to tell a one-off crash from a failing plugin.
	Attempts int    `json:"attempts"`
	Error    string `json:"error,omitempty"`
	// Failing is why the plugin is failing (crash count, last exit, last
	// stderr line) when the probes made it so.
	Failing string `json:"failing,omitempty"`
}

// probeAttempts is how many times a crashing probe is sent: the host's default
// failure threshold, after which the plugin is failing.
const probeAttempts = 3

// defaultProbeTimeout bounds each probe dispatch of `kiln doctor` unless
// --probe-timeout says otherwise: a plugin whose Dispatch ignores
// cancellation must not hang the doctor.
const defaultProbeTimeout = 10 * time.Second

// probeBackends sends the host's probe dispatch to every ready, dispatching
// backend of rows, repeating it while it crashes; each attempt gets at most
// limit (and ends with ctx).
func probeBackends(ctx context.Context, h *host.Host, rows []host.BackendStatus, limit time.Duration) []probeJSON {
	out := []probeJSON{}
	for _, r := range rows {
		if r.Status != host.StatusReady || !r.Dispatches {
			continue
		}
		p := probeJSON{Backend: r.Name()}
		var err error
		for p.Attempts < probeAttempts {
			p.Attempts++
			pctx, cancel := context.WithTimeout(ctx, limit)
			err = h.Probe(pctx, r.Name())
			var timeout *host.TimeoutError
			if pctx.Err() != nil && ctx.Err() == nil && errors.As(err, &timeout) && !timeout.Hung {
				err = fmt.Errorf("backend %s: the probe's %s did not finish within the probe timeout of %v; it was cancelled. Fix: if the backend is only slow, run kiln doctor --probe-timeout with a longer limit; otherwise report the hang to the plugin's author", r.Name(), timeout.Op, limit)
			}
			cancel()
			var crashed *host.CrashedError
			if !errors.As(err, &crashed) {
				break
			}
		}
		p.OK = err == nil
		if err != nil {
			p.Error = err.Error()
		}
		out = append(out, p)
	}
	failing := map[string]string{}
	for _, s := range h.Report().Plugins {
		if s.Description != nil && s.Failing != "" {
			failing[s.Description.ID] = s.Failing
		}
	}
	for i, p := range out {
		for id, why := range failing {
			if len(p.Backend) > len(id) && p.Backend[:len(id)+1] == id+":" {
				out[i].Failing = why
			}
		}
	}
	return out
}

// pluginStage is the start stage of a plugin that did not start ("" when it did).
func pluginStage(err error) string {
	var se *host.StartError
	if errors.As(err, &se) {
		return string(se.Stage)
	}
	return ""
}

// printPinning writes the pinning state of the doctor report.
func printPinning(w io.Writer, d doctorJSON) {
	if !d.Pinning {
		fmt.Fprintf(w, "\npinning: off for this plugins directory (%s has no pins for it); kiln plugins pin turns it on\n", d.PinFile)
		return
	}
	fmt.Fprintf(w, "\npinning: on for this plugins directory (%s): only its pinned plugins that still match run; kiln plugins pin --off turns it off\n", d.PinFile)
	for _, p := range d.Plugins {
		pin := "not pinned"
		if p.Pin != "" {
			pin = "pinned " + p.Pin
		}
		fmt.Fprintf(w, "  %s: %s\n", filepath.Base(p.Path), pin)
	}
}

// printProbes writes the probe results of the doctor report.
func printProbes(w io.Writer, probes []probeJSON) {
	fmt.Fprintln(w, "\nprobe dispatches:")
	if len(probes) == 0 {
		fmt.Fprintln(w, "  none (no ready backend dispatches)")
	}
	for _, p := range probes {
		switch {
		case p.OK:
			fmt.Fprintf(w, "  %s: ok\n", p.Backend)
		case p.Failing != "":
			fmt.Fprintf(w, "  %s: failing: %s\n", p.Backend, p.Failing)
		default:
			fmt.Fprintf(w, "  %s: failed after %d attempt(s): %s\n", p.Backend, p.Attempts, p.Error)
		}
	}
}

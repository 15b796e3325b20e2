package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kiln-dev/kiln/host"
)

// backendJSON is one element of `kiln backends --json`.
type backendJSON struct {
	ID              string  `json:"id"`
	Adapter         int     `json:"adapter"`
	AdapterName     string  `json:"adapter_name"`
	Name            string  `json:"name"`
	Version         string  `json:"version"`
	Status          string  `json:"status"`
	Reason          string  `json:"reason"`
	ReferenceOracle bool    `json:"reference_oracle"`
	Dispatches      bool    `json:"dispatches"`
	Precedence      *uint32 `json:"precedence"`
	CapabilityScore int     `json:"capability_score"`
	TimingQuality   string  `json:"timing_quality"`
	MemBWGBps       float64 `json:"mem_bw_gbps"`
	AcquisitionNs   int64   `json:"acquisition_ns"`
	Preferred       bool    `json:"preferred"`
	Fingerprint     string  `json:"fingerprint,omitempty"`
	Instance        string  `json:"instance,omitempty"`
	// What `kiln devices` shows too: the driver, memory, limits and the
	// bandwidth's status (in profile), and the plugin's note.
	DriverVersion string      `json:"driver_version"`
	Note          string      `json:"note"`
	Profile       profileJSON `json:"profile"`
}

func toBackendJSON(r host.BackendStatus) backendJSON {
	return backendJSON{
		ID: r.ID, Adapter: r.Adapter, AdapterName: r.AdapterName, Name: r.Name(), Version: r.Version,
		Status: r.Status, Reason: r.Reason, ReferenceOracle: r.ReferenceOracle, Dispatches: r.Dispatches,
		Precedence: r.Precedence, CapabilityScore: r.CapabilityScore, TimingQuality: r.TimingQuality.String(),
		MemBWGBps: r.MemBWGBps, AcquisitionNs: r.Acquisition.Nanoseconds(), Preferred: r.Preferred,
		Fingerprint: r.Fingerprint, Instance: r.Instance,
		DriverVersion: r.Identity.DriverVersion, Note: r.Note, Profile: toProfileJSON(r.Profile),
	}
}

func (a *app) backendsCommand() *cobra.Command {
	return a.surveyCommand(&cobra.Command{
		Use:   "backends",
		Short: "List every backend and adapter, and which one is preferred",
		Long: `List every backend adapter found in the plugins directory: its status (ready,
unavailable with the reason, or failed), whether it is a reference oracle, its
precedence, capability score, timing quality, memory bandwidth, device
memory (free of total), limits (invocations per workgroup, subgroup size,
largest storage binding), driver version and measured acquisition time (each
available adapter is opened to measure it). The row marked preferred is what
kiln picks without --backend; reference oracles are never preferred. "kiln
devices" shows each adapter in full.

MEM BW is what the plugin says now: a figure it measured, "~N GB/s est." for
an estimate from the device's attributes, "not measured" where the backend
does not measure it, or "measuring" when its measurement (which plugins run in
the background once started or opened) did not end within --bandwidth-wait.
A value the plugin does not report shows "-".

--json prints an array of objects with the keys id, adapter, adapter_name,
name, version, status, reason, reference_oracle, dispatches, precedence,
capability_score, timing_quality, mem_bw_gbps, acquisition_ns, preferred, and
for a started plugin's adapters fingerprint (the device fingerprint autotune
records and PGO routes are keyed by) and instance (a GPU's UUID, where the
backend reports one), driver_version, note, and profile (the adapter's
DeviceProfile as "kiln devices --json" gives it: limits, features,
mem_bw_gbps with mem_bw_status, memory_bytes and memory_free_bytes, 0 when
unknown). The DEVICE column shows the fingerprint's first 8 digits.`,
	}, runBackends)
}

// runBackends is kiln backends: one row, or JSON object, per adapter.
func runBackends(ctx context.Context, o *surveyOptions) error {
	h, rows, err := o.surveyDevices(ctx, o.BandwidthWait)
	if err != nil {
		return err
	}
	defer h.Close()
	return o.render(mapRows(rows, toBackendJSON), func() error { return o.printBackends(h, rows) })
}

func (a *app) printBackends(h *host.Host, rows []host.BackendStatus) error {
	dir, _ := h.PluginDir()
	if len(rows) == 0 {
		fmt.Fprintf(a.out, "no backends in %s. Fix: run `kiln doctor` to see why\n", dir)
		return nil
	}
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tADAPTER\tDEVICE\tSTATUS\tREFERENCE\tPRECEDENCE\tSCORE\tTIMING\tMEM BW\tMEMORY\tLIMITS\tDRIVER\tACQUISITION\tPREFERRED")
	for _, r := range rows {
		if !r.Started {
			fmt.Fprintf(tw, "%s\t-\t-\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", r.ID, r.Status)
			continue
		}
		prec := "none"
		if r.Precedence != nil {
			prec = fmt.Sprint(*r.Precedence)
		}
		preferred := ""
		if r.Preferred {
			preferred = "yes"
		}
		acq := "-"
		if r.Acquisition > 0 {
			acq = r.Acquisition.Round(time.Microsecond).String()
		}
		adapter := fmt.Sprintf("%d %s", r.Adapter, r.AdapterName)
		device := r.Fingerprint
		if len(device) > 8 {
			device = device[:8]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.ID, adapter, device, r.Status, r.ReferenceOracle, prec, r.CapabilityScore, r.TimingQuality,
			bandwidthText(r.Profile), memoryText(r.Profile), limitsText(r.Profile), orDash(r.Identity.DriverVersion), acq, preferred)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	preferred := false
	for _, r := range rows {
		preferred = preferred || r.Preferred
	}
	if !preferred {
		fmt.Fprintln(a.out, "\nno backend is chosen without --backend (reference oracles never are). Fix: install a GPU backend plugin, or name one, for example --backend cpu-ref")
	}
	for _, r := range rows {
		label := r.Name()
		if !r.Started {
			label = r.ID
		}
		if r.Reason != "" {
			fmt.Fprintf(a.out, "\n%s (%s): %s\n", label, r.Status, r.Reason)
		}
	}
	return nil
}

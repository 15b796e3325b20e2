package host

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/pluginapi"
)

// Backend statuses reported by Survey.
const (
	StatusReady       = "ready"
	StatusUnavailable = "unavailable"
	StatusFailed      = "failed"
)

// BackendStatus is one row of Survey: one adapter of one backend, or one plugin
// that did not start.
type BackendStatus struct {
	// ID is the backend id (for a plugin that did not start, its file name
	// without the kiln-backend- prefix).
	ID string
	// Version is the plugin's version.
	Version string
	// Started is false for a plugin that did not start (it has no adapters).
	Started bool
	// Adapter is the adapter index and AdapterName its name.
	Adapter     int
	AdapterName string
	// Status is StatusReady, StatusUnavailable or StatusFailed; Reason says why
	// it is not ready.
	Status string
	Reason string
	// ReferenceOracle: the backend is a reference oracle (used only by explicit id).
	ReferenceOracle bool
	// Dispatches: the backend can run programs.
	Dispatches bool
	// Precedence is the backend's rank (lower wins); nil when it has none.
	Precedence *uint32
	// CapabilityScore, TimingQuality and MemBWGBps come from the adapter's profile.
	CapabilityScore int
	TimingQuality   pluginapi.TimingQuality
	MemBWGBps       float64
	// Acquisition is the measured time to open the adapter.
	Acquisition time.Duration
	// Preferred marks the adapter AcquirePreferred picks.
	Preferred bool
}

// Name is the row's explicit acquisition name, "id:adapter".
func (s BackendStatus) Name() string { return fmt.Sprintf("%s:%d", s.ID, s.Adapter) }

// Survey opens every available adapter of every running backend (measuring its
// acquisition time) and returns one row per adapter, plus one per plugin that did
// not start, and marks the one AcquirePreferred picks.
func (h *Host) Survey(ctx context.Context) ([]BackendStatus, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	var rows []BackendStatus
	opened := map[string]error{}
	for _, p := range h.plugins {
		d := p.desc
		for _, a := range d.Adapters {
			row := BackendStatus{
				ID: d.ID, Version: d.Version, Started: true, Adapter: a.Index, AdapterName: a.Name,
				ReferenceOracle: IsReferenceOracle(d), Dispatches: d.Dispatches, Precedence: d.Precedence,
				CapabilityScore: a.Profile.CapabilityScore(), TimingQuality: a.Profile.TimingQuality,
				MemBWGBps: a.Profile.MemBWGBps, Status: StatusReady,
			}
			if !a.Available {
				row.Status, row.Reason = StatusUnavailable, a.Reason
			} else if took, err := (&Backend{p: p, adapter: a}).open(ctx); err != nil {
				row.Status, row.Reason = StatusFailed, err.Error()
				opened[row.Name()] = err
			} else {
				row.Acquisition = took
			}
			rows = append(rows, row)
		}
	}
	for _, f := range h.failed {
		rows = append(rows, BackendStatus{
			ID: strings.TrimPrefix(filepath.Base(f.Path), PluginPrefix), Status: StatusFailed, Reason: f.Err.Error(),
		})
	}
	surveyed := func(_ context.Context, id string, adapter int) (time.Duration, error) {
		for _, r := range rows {
			if r.ID == id && r.Adapter == adapter && r.Status == StatusReady {
				return r.Acquisition, nil
			}
		}
		return 0, opened[fmt.Sprintf("%s:%d", id, adapter)]
	}
	if pick, err := choosePreferred(ctx, h.descriptions(), nil, surveyed); err == nil {
		for i := range rows {
			rows[i].Preferred = rows[i].ID == pick.ID && rows[i].Adapter == pick.Adapter && rows[i].Status == StatusReady
		}
	}
	return rows, nil
}

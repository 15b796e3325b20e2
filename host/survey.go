package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kiln-dev/kiln/pluginapi"
)

// Backend statuses reported by Survey.
const (
	StatusReady       = "ready"
	StatusUnavailable = "unavailable"
	StatusFailed      = "failed"
	// StatusFailing: the plugin crashed too often recently (see
	// Options.FailureThreshold); it is not preferred until a dispatch succeeds.
	StatusFailing = "failing"
	// StatusShadowed: the plugin started, but another plugin that outranks it
	// (higher version, then earlier path) provides its backend id; Reason
	// names both.
	StatusShadowed = "shadowed"
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
	// Status is StatusReady, StatusUnavailable, StatusFailing, StatusFailed
	// or StatusShadowed;
	// Reason says why it is not ready (for a failing plugin: its crash count,
	// last exit and last stderr line).
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
	// Fingerprint is the adapter's device fingerprint (distinct for identical
	// GPUs that report an Instance); Instance is that instance id (a UUID).
	Fingerprint, Instance string
	// Preferred marks the adapter AcquirePreferred picks.
	Preferred bool
	// Profile, Identity and Note are the adapter's, as the plugin described
	// it when it started (zero for a plugin that did not start).
	Profile  pluginapi.DeviceProfile
	Identity pluginapi.DeviceIdentity
	Note     string
}

// Name is the row's explicit acquisition name, "id:adapter".
func (s BackendStatus) Name() string { return fmt.Sprintf("%s:%d", s.ID, s.Adapter) }

// Survey opens every available adapter of every running backend (measuring its
// acquisition time) and returns one row per adapter, plus one per plugin that did
// not start, and marks the one AcquirePreferred picks. A failing plugin's
// adapters are reported as failing without being opened. It starts every plugin.
func (h *Host) Survey(ctx context.Context) ([]BackendStatus, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	var rows []BackendStatus
	opened := map[string]error{}
	running := h.running()
	for _, p := range running {
		d := p.desc
		failing := ""
		if p.state() == StateFailing {
			p.mu.Lock()
			failing = p.failures.reason(time.Now(), p.set.failWindow)
			p.mu.Unlock()
		}
		for _, a := range d.Adapters {
			row := BackendStatus{
				ID: d.ID, Version: d.Version, Started: true, Adapter: a.Index, AdapterName: a.Name,
				ReferenceOracle: IsReferenceOracle(d), Dispatches: d.Dispatches, Precedence: d.Precedence,
				CapabilityScore: a.Profile.CapabilityScore(), TimingQuality: a.Profile.TimingQuality,
				MemBWGBps: a.Profile.MemBWGBps, Status: StatusReady,
				Fingerprint: a.Identity.Fingerprint(), Instance: a.Identity.Instance,
				Profile: a.Profile, Identity: a.Identity, Note: a.Note,
			}
			switch {
			case !a.Available:
				row.Status, row.Reason = StatusUnavailable, a.Reason
			case failing != "":
				row.Status, row.Reason = StatusFailing, failing
				opened[row.Name()] = errors.New(failing)
			default:
				if took, err := (&Backend{p: p, adapter: a}).open(ctx); err != nil {
					row.Status, row.Reason = StatusFailed, err.Error()
					opened[row.Name()] = err
				} else {
					row.Acquisition = took
				}
			}
			rows = append(rows, row)
		}
	}
	for _, p := range h.plugins {
		if err := p.startError(); err != nil {
			var closed *ClosedError
			if errors.As(err, &closed) {
				continue
			}
			status := StatusFailed
			var se *StartError
			if errors.As(err, &se) && se.Stage == StartDuplicate {
				status = StatusShadowed
			}
			rows = append(rows, BackendStatus{ID: p.fileID(), Status: status, Reason: err.Error()})
		}
	}
	surveyed := func(_ context.Context, id string, adapter int) (time.Duration, error) {
		for _, r := range rows {
			if r.ID == id && r.Adapter == adapter && r.Status == StatusReady {
				return r.Acquisition, nil
			}
		}
		return 0, opened[fmt.Sprintf("%s:%d", id, adapter)]
	}
	descs := make([]*pluginapi.Description, len(running))
	for i, p := range running {
		descs[i] = p.desc
	}
	if pick, err := choosePreferred(ctx, descs, nil, surveyed, nil); err == nil {
		for i := range rows {
			rows[i].Preferred = rows[i].ID == pick.ID && rows[i].Adapter == pick.Adapter && rows[i].Status == StatusReady
		}
	}
	return rows, nil
}

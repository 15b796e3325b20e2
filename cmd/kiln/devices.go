package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/units"
	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/pluginapi"
)

// defaultBandwidthWait is how long `kiln backends` and `kiln devices` wait for
// the plugins' bandwidth measurements (lavapipe's takes about a second on a
// busy two-core machine, a GPU's a fraction of that).
const defaultBandwidthWait = 5 * time.Second

// profileJSON is an adapter's DeviceProfile in `kiln backends --json` and
// `kiln devices --json`.
type profileJSON struct {
	MaxStorageBufferBindingSize uint64  `json:"max_storage_buffer_binding_size"`
	MaxInvocationsPerWorkgroup  uint32  `json:"max_invocations_per_workgroup"`
	SubgroupSize                uint32  `json:"subgroup_size"`
	SupportsSubgroupOps         bool    `json:"supports_subgroup_ops"`
	HasSubgroupShuffle          bool    `json:"has_subgroup_shuffle"`
	HasSharedMemory             bool    `json:"has_shared_memory"`
	SupportsF16                 bool    `json:"supports_f16"`
	SupportsBF16                bool    `json:"supports_bf16"`
	SupportsTensorCores         bool    `json:"supports_tensor_cores"`
	SupportsIndirectDispatch    bool    `json:"supports_indirect_dispatch"`
	SupportsDeviceTimestamps    bool    `json:"supports_device_timestamps"`
	SupportsHardwareCounters    bool    `json:"supports_hardware_counters"`
	MemBWGBps                   float64 `json:"mem_bw_gbps"`
	MemBWStatus                 string  `json:"mem_bw_status"`
	TimingQuality               string  `json:"timing_quality"`
	MemoryBytes                 uint64  `json:"memory_bytes"`
	MemoryFreeBytes             uint64  `json:"memory_free_bytes"`
}

func toProfileJSON(p pluginapi.DeviceProfile) profileJSON {
	return profileJSON{
		MaxStorageBufferBindingSize: p.MaxStorageBufferBindingSize, MaxInvocationsPerWorkgroup: p.MaxInvocationsPerWorkgroup,
		SubgroupSize: p.SubgroupSize, SupportsSubgroupOps: p.SupportsSubgroupOps, HasSubgroupShuffle: p.HasSubgroupShuffle,
		HasSharedMemory: p.HasSharedMemory, SupportsF16: p.SupportsF16, SupportsBF16: p.SupportsBF16,
		SupportsTensorCores: p.SupportsTensorCores, SupportsIndirectDispatch: p.SupportsIndirectDispatch,
		SupportsDeviceTimestamps: p.SupportsDeviceTimestamps, SupportsHardwareCounters: p.SupportsHardwareCounters,
		MemBWGBps: p.MemBWGBps, MemBWStatus: p.MemBWStatus.String(), TimingQuality: p.TimingQuality.String(),
		MemoryBytes: p.MemoryBytes, MemoryFreeBytes: p.MemoryFreeBytes,
	}
}

// identityJSON is an adapter's identity in `kiln devices --json`.
type identityJSON struct {
	Vendor        string `json:"vendor"`
	Device        string `json:"device"`
	DriverVersion string `json:"driver_version"`
	DeviceType    string `json:"device_type"`
	Instance      string `json:"instance"`
}

// deviceJSON is one element of `kiln devices --json`.
type deviceJSON struct {
	Name            string       `json:"name"`
	ID              string       `json:"id"`
	Version         string       `json:"version"`
	Adapter         int          `json:"adapter"`
	AdapterName     string       `json:"adapter_name"`
	Status          string       `json:"status"`
	Reason          string       `json:"reason"`
	Note            string       `json:"note"`
	ReferenceOracle bool         `json:"reference_oracle"`
	CapabilityScore int          `json:"capability_score"`
	Fingerprint     string       `json:"fingerprint"`
	Identity        identityJSON `json:"identity"`
	Profile         profileJSON  `json:"profile"`
}

// surveyOptions are the flags of kiln devices and kiln backends.
type surveyOptions struct {
	*app
	BandwidthWait time.Duration // --bandwidth-wait
}

// surveyCommand is kiln devices or backends: cmd with --bandwidth-wait,
// running run.
func (a *app) surveyCommand(cmd *cobra.Command, run func(context.Context, *surveyOptions) error) *cobra.Command {
	cmd.Args = cobra.NoArgs
	return command(&surveyOptions{app: a}, run, cmd, func(o *surveyOptions, f *pflag.FlagSet) {
		f.DurationVar(&o.BandwidthWait, "bandwidth-wait", defaultBandwidthWait, "how long to wait for the plugins' bandwidth measurements (0: do not wait)")
	})
}

func (a *app) devicesCommand() *cobra.Command {
	return a.surveyCommand(&cobra.Command{
		Use:   "devices",
		Short: "Show every adapter in detail: identity, driver, memory, limits, features, timing",
		Long: `Show every adapter of every backend plugin in detail, as nvidia-smi or
vulkaninfo would: the device's identity (vendor, device, type, instance UUID)
and fingerprint, the driver version, device memory (free and total, where the
plugin reports them), memory bandwidth and whether it was measured, timing
quality, the limits (largest storage binding, invocations per workgroup,
subgroup size), the features the backend can run and those it lacks, the
capability score, and the plugin's note (for example the float controls a
Vulkan device lacks). A plugin that does not report a value shows "-".

Each available adapter is opened, as by "kiln backends". Plugins measure
memory bandwidth in the background once started or opened; kiln waits up to
--bandwidth-wait for the measurements and otherwise says "measuring".

--json prints an array of objects with the keys name, id, version, adapter,
adapter_name, status, reason, note, reference_oracle, capability_score,
fingerprint, identity {vendor, device, driver_version, device_type,
instance} and profile {max_storage_buffer_binding_size,
max_invocations_per_workgroup, subgroup_size, supports_subgroup_ops,
has_subgroup_shuffle, has_shared_memory, supports_f16, supports_bf16,
supports_tensor_cores, supports_indirect_dispatch, supports_device_timestamps,
supports_hardware_counters, mem_bw_gbps, mem_bw_status (unstated, measuring,
measured, estimated, unmeasured), timing_quality, memory_bytes,
memory_free_bytes (0: unknown)}.`,
	}, runDevices)
}

// runDevices is kiln devices: one block, or JSON object, per adapter.
func runDevices(ctx context.Context, o *surveyOptions) error {
	h, rows, err := o.surveyDevices(ctx, o.BandwidthWait)
	if err != nil {
		return err
	}
	defer h.Close()
	return o.show(mapRows(rows, toDeviceJSON), func() { printDevices(o.out, h, rows) })
}

// mapRows is each survey row as f makes it (an empty list, never null, for
// --json).
func mapRows[T any](rows []host.BackendStatus, f func(host.BackendStatus) T) []T {
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out
}

func toDeviceJSON(r host.BackendStatus) deviceJSON {
	name := r.Name()
	if !r.Started {
		name = r.ID
	}
	id := r.Identity
	return deviceJSON{
		Name: name, ID: r.ID, Version: r.Version, Adapter: r.Adapter, AdapterName: r.AdapterName,
		Status: r.Status, Reason: r.Reason, Note: r.Note, ReferenceOracle: r.ReferenceOracle,
		CapabilityScore: r.CapabilityScore, Fingerprint: r.Fingerprint,
		Identity: identityJSON{Vendor: id.Vendor, Device: id.Device, DriverVersion: id.DriverVersion, DeviceType: id.DeviceType, Instance: id.Instance},
		Profile:  toProfileJSON(r.Profile),
	}
}

// surveyDevices opens a host, surveys every backend and waits up to wait for
// the bandwidth measurements still running (see refreshDevices). The caller
// closes the host.
func (a *app) surveyDevices(ctx context.Context, wait time.Duration) (*host.Host, []host.BackendStatus, error) {
	h, err := a.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	rows, err := h.Survey(ctx)
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	refreshDevices(ctx, h, rows, wait)
	return h, rows, nil
}

// refreshDevices describes every started backend of rows again and puts what
// each adapter says now (free memory, bandwidth, note) into its row; while a
// ready adapter says its bandwidth is being measured it asks again, every
// 100 ms, until wait has passed. A plugin that cannot describe itself keeps
// the description of its start.
func refreshDevices(ctx context.Context, h *host.Host, rows []host.BackendStatus, wait time.Duration) {
	deadline := time.Now().Add(wait)
	pending := map[string]bool{}
	for _, r := range rows {
		if r.Started {
			pending[r.ID] = true
		}
	}
	for len(pending) > 0 {
		for id := range pending {
			d, err := h.DescribeNow(ctx, id)
			measuring := false
			for i := range rows {
				r := &rows[i]
				if err != nil || r.ID != id || !r.Started {
					continue
				}
				for _, ad := range d.Adapters {
					if ad.Index == r.Adapter {
						r.Profile, r.MemBWGBps, r.Note = ad.Profile, ad.Profile.MemBWGBps, ad.Note
					}
				}
				measuring = measuring || r.Status == host.StatusReady && r.Profile.MemBWStatus == pluginapi.BandwidthMeasuring
			}
			if !measuring {
				delete(pending, id)
			}
		}
		if len(pending) == 0 || !time.Now().Add(100*time.Millisecond).Before(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// bandwidthText is the MEM BW column: the figure and what it is.
func bandwidthText(p pluginapi.DeviceProfile) string {
	figure := strconv.FormatFloat(p.MemBWGBps, 'f', -1, 64) + " GB/s"
	switch p.MemBWStatus {
	case pluginapi.BandwidthMeasured:
		return figure
	case pluginapi.BandwidthMeasuring:
		if p.MemBWGBps > 0 {
			return "~" + figure + " est., measuring"
		}
		return "measuring"
	case pluginapi.BandwidthEstimated:
		return "~" + figure + " est."
	case pluginapi.BandwidthUnmeasured:
		return "not measured"
	}
	if p.MemBWGBps > 0 {
		return figure
	}
	return "-"
}

// memoryText is the MEMORY column: free of total, "-" for what is unknown.
func memoryText(p pluginapi.DeviceProfile) string {
	if p.MemoryBytes == 0 {
		return "-"
	}
	free := "-"
	if p.MemoryFreeBytes > 0 {
		free = units.Bytes(int64(p.MemoryFreeBytes))
	}
	return free + " free of " + units.Bytes(int64(p.MemoryBytes))
}

// limitsText is the LIMITS column: invocations per workgroup, subgroup size
// and the largest storage binding.
func limitsText(p pluginapi.DeviceProfile) string {
	if p.MaxInvocationsPerWorkgroup == 0 && p.MaxStorageBufferBindingSize == 0 {
		return "-"
	}
	sg := "-"
	if p.SubgroupSize > 0 {
		sg = fmt.Sprint(p.SubgroupSize)
	}
	return fmt.Sprintf("wg %d, sg %s, bind %s", p.MaxInvocationsPerWorkgroup, sg, units.Bytes(int64(p.MaxStorageBufferBindingSize)))
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printDevices prints one block per adapter.
func printDevices(w io.Writer, h *host.Host, rows []host.BackendStatus) {
	if len(rows) == 0 {
		dir, _ := h.PluginDir()
		fmt.Fprintf(w, "no backends in %s. Fix: run `kiln doctor` to see why\n", dir)
		return
	}
	for i, r := range rows {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if !r.Started {
			fmt.Fprintf(w, "%s  (%s)\n  reason        %s\n", r.ID, r.Status, r.Reason)
			continue
		}
		p, id := r.Profile, r.Identity
		fmt.Fprintf(w, "%s  %s  (%s)\n", r.Name(), r.AdapterName, r.Status)
		line := func(k, v string) { fmt.Fprintf(w, "  %-13s %s\n", k, v) }
		line("plugin", r.ID+" "+r.Version)
		if r.Reason != "" {
			line("reason", r.Reason)
		}
		if r.Status == host.StatusUnavailable {
			continue
		}
		line("vendor", orDash(id.Vendor))
		line("device", orDash(id.Device))
		line("type", orDash(id.DeviceType))
		line("driver", orDash(id.DriverVersion))
		line("instance", orDash(id.Instance))
		line("fingerprint", r.Fingerprint)
		line("memory", memoryText(p))
		bw := bandwidthText(p)
		if p.MemBWStatus == pluginapi.BandwidthMeasured {
			bw += " (measured)"
		}
		line("bandwidth", bw)
		line("timing", p.TimingQuality.String())
		sg := "none"
		if p.SubgroupSize > 0 {
			sg = fmt.Sprint(p.SubgroupSize)
		}
		line("limits", fmt.Sprintf("%s per storage binding, %d invocations per workgroup, subgroup size %s",
			units.Bytes(int64(p.MaxStorageBufferBindingSize)), p.MaxInvocationsPerWorkgroup, sg))
		has, lacks := features(p)
		line("features", orDash(strings.Join(has, ", ")))
		line("lacks", orDash(strings.Join(lacks, ", ")))
		line("score", fmt.Sprint(r.CapabilityScore))
		if r.ReferenceOracle {
			line("oracle", "yes: used only when named")
		}
		if r.Acquisition > 0 {
			line("acquisition", r.Acquisition.Round(time.Microsecond).String())
		}
		line("note", orDash(r.Note))
	}
}

// features splits the profile's feature flags into those it has and lacks.
func features(p pluginapi.DeviceProfile) (has, lacks []string) {
	for _, f := range []struct {
		on   bool
		name string
	}{
		{p.SupportsSubgroupOps, "subgroup ops"}, {p.HasSubgroupShuffle, "subgroup shuffle"},
		{p.HasSharedMemory, "shared memory"}, {p.SupportsF16, "f16"}, {p.SupportsBF16, "bf16"},
		{p.SupportsTensorCores, "tensor cores"}, {p.SupportsIndirectDispatch, "indirect dispatch"},
		{p.SupportsDeviceTimestamps, "device timestamps"}, {p.SupportsHardwareCounters, "hardware counters"},
	} {
		if f.on {
			has = append(has, f.name)
		} else {
			lacks = append(lacks, f.name)
		}
	}
	return has, lacks
}

package main

import (
	"strings"
	"testing"
)

// rowOf returns the `kiln backends --json` row of backend id.
func rowOf(t *testing.T, rows []backendJSON, id string) backendJSON {
	t.Helper()
	for _, r := range rows {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no row for %s in %+v", id, rows)
	return backendJSON{}
}

// TestBackendsShowsDeviceInfo pins the device columns of `kiln backends` on
// cpu-ref and on a plugin that reports none of them (the fx-zeros fixture, as
// a plugin built before them would): cpu-ref's memory is the machine's and its
// bandwidth "not measured"; what a plugin does not report is "-", never a
// made-up 0.
func TestBackendsShowsDeviceInfo(t *testing.T) {
	dir := plugins(t, "cpuref", "fx-zeros")
	var rows []backendJSON
	kilnJSON(t, &rows, "--plugins", dir, "backends", "--json")
	cpu, fx := rowOf(t, rows, "cpu-ref"), rowOf(t, rows, "fx-zeros")
	if cpu.DriverVersion == "" || cpu.Profile.MemoryBytes == 0 || cpu.Profile.MemoryFreeBytes > cpu.Profile.MemoryBytes ||
		cpu.Profile.MemBWStatus != "unmeasured" || cpu.Profile.MaxInvocationsPerWorkgroup != 1024 || cpu.Profile.TimingQuality != "HostOnly" {
		t.Errorf("cpu-ref row %+v", cpu)
	}
	if fx.Profile.MemBWStatus != "unstated" || fx.Profile.MemoryBytes != 0 || fx.Profile.MaxInvocationsPerWorkgroup != 256 {
		t.Errorf("fx-zeros row %+v", fx)
	}
	code, out, errOut := kiln(t, "--plugins", dir, "backends")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"MEM BW", "MEMORY", "LIMITS", "DRIVER", "not measured", " free of ", "wg 1024, sg -, bind 1 GiB", "wg 256, sg -, bind 1 MiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0.0 GB/s") {
		t.Errorf("table shows a bandwidth of 0.0 GB/s nobody measured:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "fx-zeros") && strings.Count(line, " - ") < 3 {
			t.Errorf("fx-zeros reports no bandwidth, memory or driver, which must show as -: %q", line)
		}
	}
}

// TestBackendsShowsTheMeasuredVulkanBandwidth pins that `kiln backends` shows
// the bandwidth the Vulkan plugin measures in the background (it showed 0.0
// GB/s, the figure of the plugin's first Describe), that without waiting it
// says so instead of printing 0, and that the adapter's name no longer
// carries the float-controls note, which `kiln devices` shows as its own line.
func TestBackendsShowsTheMeasuredVulkanBandwidth(t *testing.T) {
	dir := emitterPlugins(t)
	requireVulkanBackend(t, dir)
	var rows []backendJSON
	kilnJSON(t, &rows, "--plugins", dir, "backends", "--json")
	vk := rowOf(t, rows, "vulkan")
	if vk.MemBWGBps <= 0 || vk.Profile.MemBWStatus != "measured" || vk.Profile.MemBWGBps != vk.MemBWGBps {
		t.Errorf("vulkan bandwidth %v (%s): want a measured figure", vk.MemBWGBps, vk.Profile.MemBWStatus)
	}
	if vk.Profile.MemoryBytes == 0 || vk.DriverVersion == "" || strings.Contains(vk.AdapterName, "float controls") {
		t.Errorf("vulkan row %+v: want its memory and driver, and a name without the float-controls note", vk)
	}

	code, out, errOut := kiln(t, "--plugins", dir, "backends", "--bandwidth-wait", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "vulkan") && !strings.Contains(line, "measuring") && !strings.Contains(line, " GB/s") {
			t.Errorf("without waiting the bandwidth is neither measuring nor a figure: %q", line)
		}
		if strings.HasPrefix(line, "vulkan") && (strings.Contains(line, " 0 GB/s") || strings.Contains(line, "[float controls")) {
			t.Errorf("vulkan line %q", line)
		}
	}

	code, out, errOut = kiln(t, "--plugins", dir, "devices")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"vulkan:0  ", "  driver ", "  memory ", "  bandwidth ", "  limits ", "  features ", "  timing ", "  note "} {
		if !strings.Contains(out, want) {
			t.Errorf("devices lacks %q:\n%s", want, out)
		}
	}
	if vk.Note != "" && !strings.Contains(out, "  note          "+vk.Note) {
		t.Errorf("devices does not show the note %q:\n%s", vk.Note, out)
	}
}

// TestDevicesJSON pins the keys of `kiln devices --json`.
func TestDevicesJSON(t *testing.T) {
	dir := plugins(t, "cpuref")
	var devs []deviceJSON
	kilnJSON(t, &devs, "--plugins", dir, "devices", "--json")
	if len(devs) != 1 {
		t.Fatalf("%d devices, want 1", len(devs))
	}
	d := devs[0]
	if d.Name != "cpu-ref:0" || d.Identity.DeviceType != "cpu" || d.Identity.DriverVersion == "" || d.Profile.MemoryBytes == 0 ||
		d.Profile.MemBWStatus != "unmeasured" || !d.ReferenceOracle || d.Status != "ready" || d.Fingerprint == "" {
		t.Errorf("device %+v", d)
	}
	code, out, _ := kiln(t, "--plugins", dir, "devices")
	if code != 0 || !strings.Contains(out, "cpu-ref:0  CPU reference interpreter  (ready)") || !strings.Contains(out, "  bandwidth     not measured") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

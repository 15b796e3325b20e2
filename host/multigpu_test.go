package host

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pgo"
)

// twinDevice returns which of fx-twins' devices ran a launch ("A" or "B").
func twinDevice(t *testing.T, res *Result) string {
	t.Helper()
	if len(res.Outputs) == 0 || len(res.Outputs[0]) < 1 {
		t.Fatalf("no output to read the device from: %+v", res)
	}
	return string(res.Outputs[0][:1])
}

// Two identical GPUs: distinct device fingerprints, one model fingerprint,
// adapter 0 preferred, and each adapter runs on its own device.
func TestIdenticalAdaptersAreDistinctAndOrdered(t *testing.T) {
	h := openWith(t, Options{NoCache: true, NoAutotune: true, NoPGO: true}, "fx-twins")
	ctx := context.Background()
	rows, err := h.Survey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Fingerprint == rows[1].Fingerprint || rows[0].Instance != "GPU-A" || rows[1].Instance != "GPU-B" {
		t.Fatalf("rows %+v: want two adapters with distinct fingerprints and instances GPU-A, GPU-B", rows)
	}
	if !rows[0].Preferred || rows[1].Preferred {
		t.Fatalf("preferred: adapter 0 %v, adapter 1 %v; identical GPUs must come in adapter order", rows[0].Preferred, rows[1].Preferred)
	}
	for name, want := range map[string]string{"fx-twins:0": "A", "fx-twins:1": "B"} {
		res, err := h.Dispatch(ctx, fourBuffers(t), Launch{Backend: name, Work: fixtureWork()})
		if err != nil {
			t.Fatal(err)
		}
		if got := twinDevice(t, res); got != want || res.Backend != name {
			t.Fatalf("%s ran on device %s (%s), want %s", name, got, res.Backend, want)
		}
	}
}

// Autotune records and PGO routes keyed by device fingerprint follow a GPU when
// the driver enumerates the GPUs in another order.
func TestRecordsFollowAGPUAcrossReordering(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	table := pgo.New(filepath.Join(dir, "pgo.toml"))
	store, err := autotune.Load(filepath.Join(dir, "autotune.toml"))
	if err != nil {
		t.Fatal(err)
	}
	prog := fourBuffers(t)
	plugins := pluginDir(t, "fx-twins", "fx-zeros")

	// Measured in the first order: device A is fx-twins:0.
	first, err := Open(ctx, Options{PluginDir: plugins, NoCache: true, PGO: table, Autotune: store})
	if err != nil {
		t.Fatal(err)
	}
	b, err := first.Acquire(ctx, "fx-twins:0")
	if err != nil {
		t.Fatal(err)
	}
	if b.Adapter().Identity.Instance != "GPU-A" {
		t.Fatalf("fx-twins:0 is %q, want GPU-A", b.Adapter().Identity.Instance)
	}
	tuned := [3]uint32{32, 2, 1}
	key := autotune.KeyFor(prog, ir.SpecMap{}, autotune.DeviceAdapter("fx-twins", b.Adapter().Identity.Fingerprint()))
	if err := store.Put(key, autotune.Record{WorkgroupSize: tuned}); err != nil {
		t.Fatal(err)
	}
	if err := table.Set(prog.Name, routeTo(t, first, prog.Name, "fx-twins:0", map[string]int64{"fx-twins:0": 1000, "fx-twins:1": 2000, "fx-zeros:0": 3000})); err != nil {
		t.Fatal(err)
	}
	if _, err := table.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SaveIfDirty(ctx); err != nil {
		t.Fatal(err)
	}
	first.Close()

	// Reordered: device A is now fx-twins:1, and the preferred adapter
	// (fx-twins:0) is device B.
	t.Setenv("KILN_FIXTURE_SWAP", "1")
	reloaded, err := autotune.Load(filepath.Join(dir, "autotune.toml"))
	if err != nil {
		t.Fatal(err)
	}
	routes, err := pgo.Load(filepath.Join(dir, "pgo.toml"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Open(ctx, Options{PluginDir: plugins, NoCache: true, PGO: routes, Autotune: reloaded})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	res, err := second.Dispatch(ctx, prog, Launch{Work: fixtureWorkByInvocations()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != "fx-twins:1" || twinDevice(t, res) != "A" || res.Selection != "pgo route (measured as fx-twins:0, the same device): fastest of 3, median 1.0 µs" {
		t.Fatalf("the route measured on GPU-A ran on %s (device %s) because %q; want fx-twins:1, now GPU-A", res.Backend, twinDevice(t, res), res.Selection)
	}
	if !res.Tuned || res.WorkgroupSize != tuned {
		t.Fatalf("on GPU-A (now fx-twins:1): tuned %v, workgroup %v; want its record %v", res.Tuned, res.WorkgroupSize, tuned)
	}
	other, err := second.Dispatch(ctx, prog, Launch{Backend: "fx-twins:0", Work: fixtureWorkByInvocations()})
	if err != nil {
		t.Fatal(err)
	}
	if twinDevice(t, other) != "B" || other.Tuned {
		t.Fatalf("fx-twins:0 (now GPU-B): device %s, tuned %v; GPU-A's record must not apply to it", twinDevice(t, other), other.Tuned)
	}
}

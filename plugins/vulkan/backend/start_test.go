package backend

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// TestDescribeStartsOnlyWhatTheProfileNeeds pins what the first Describe does
// (see docs/design.md, "Vulkan"): it records the time of each start phase, and
// creates no logical device and allocates no memory; opening the adapter does.
func TestDescribeStartsOnlyWhatTheProfileNeeds(t *testing.T) {
	b := New(testConfig())
	ctx := context.Background()
	defer b.Close(ctx)
	began := time.Now()
	d, err := b.Describe(ctx)
	wall := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Adapters) == 0 || !d.Adapters[0].Available {
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("%s=1 but Vulkan is unusable: %+v", requireEnv, d.Adapters)
		}
		t.Skipf("no usable Vulkan device: %+v", d.Adapters)
	}
	ph := b.phases
	for name, p := range map[string]time.Duration{"load": ph.Load, "version": ph.Version, "instance": ph.Instance,
		"enumerate": ph.Enumerate, "adapters": ph.Adapters, "estimates": ph.Estimates} {
		if p <= 0 {
			t.Errorf("start phase %s = %v, want it timed", name, p)
		}
	}
	if sum := ph.Load + ph.Version + ph.Instance + ph.Enumerate + ph.Adapters + ph.Estimates; sum > wall {
		t.Errorf("start phases sum to %v, more than the whole Describe (%v)", sum, wall)
	}
	for _, a := range b.adapters.List() {
		if a.current() != nil {
			t.Errorf("adapter %d has a logical device after Describe", a.index)
		}
	}
	if err := b.Open(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if b.adapters.List()[0].current() == nil {
		t.Error("Open created no logical device")
	}
	if n, text := b.ValidationMessages(); n != 0 {
		t.Errorf("%d validation messages:\n%s", n, text)
	}
}

// BenchmarkStartPhases starts Vulkan and describes the adapters, as a new
// plugin process does before its first answer, and reports the mean time of
// each phase (see startPhases): load-ns, version-ns, instance-ns,
// enumerate-ns, adapters-ns, nvml-wait-ns, describe-ns (the whole Describe);
// then, untimed in ns/op, what Describe leaves to first use: open-ns (creating
// adapter 0's logical device) and nvml-ns (reading NVML's estimates alone;
// Describe reads them alongside the start and waits at most estimateGrace).
// The bandwidth measurement is left out (Config.NoBandwidth), as in
// BenchmarkStartAndDescribe. Sub-benchmark nvml=on starts as the plugin does;
// nvml=off reads no NVML estimates, to show whether reading them alongside
// slows the driver's own start.
func BenchmarkStartPhases(b *testing.B) {
	for _, withNVML := range []bool{true, false} {
		name := "nvml=on"
		if !withNVML {
			name = "nvml=off"
		}
		b.Run(name, func(b *testing.B) { benchStartPhases(b, withNVML) })
	}
}

func benchStartPhases(b *testing.B, withNVML bool) {
	ctx := context.Background()
	var sum startPhases
	var describe, open, nvml time.Duration
	for range b.N {
		cfg := ConfigFromEnv()
		cfg.NoBandwidth = true
		be := New(cfg)
		if !withNVML {
			be.estimate = func() (map[string]float64, error) { return nil, nil }
		}
		began := time.Now()
		d, err := be.Describe(ctx)
		if err != nil {
			b.Fatal(err)
		}
		describe += time.Since(began)
		b.StopTimer()
		ph := be.phases
		sum.Load += ph.Load
		sum.Version += ph.Version
		sum.Instance += ph.Instance
		sum.Enumerate += ph.Enumerate
		sum.Adapters += ph.Adapters
		sum.Estimates += ph.Estimates
		if len(d.Adapters) > 0 && d.Adapters[0].Available {
			began = time.Now()
			if err := be.Open(ctx, 0); err != nil {
				b.Fatal(err)
			}
			open += time.Since(began)
		}
		be.Close(ctx)
		if withNVML {
			began = time.Now()
			_, _ = vk.NVMLBandwidth()
			nvml += time.Since(began)
		}
		b.StartTimer()
	}
	n := float64(b.N)
	metrics := []struct {
		d    time.Duration
		unit string
	}{
		{sum.Load, "load-ns"}, {sum.Version, "version-ns"}, {sum.Instance, "instance-ns"}, {sum.Enumerate, "enumerate-ns"},
		{sum.Adapters, "adapters-ns"}, {sum.Estimates, "nvml-wait-ns"}, {describe, "describe-ns"}, {open, "open-ns"},
	}
	if withNVML {
		metrics = append(metrics, struct {
			d    time.Duration
			unit string
		}{nvml, "nvml-ns"})
	}
	for _, m := range metrics {
		b.ReportMetric(float64(m.d.Nanoseconds())/n, m.unit)
	}
}

// TestPrestart starts Vulkan before any call: the adapters are listed and no
// device is created; the first Describe then reports them without starting
// again, and a Prestart after Close does nothing.
func TestPrestart(t *testing.T) {
	b := New(testConfig())
	ctx := context.Background()
	b.Prestart()
	b.mu.Lock()
	started, adapters, phases := b.adapters.Started(), b.adapters.List(), b.phases
	b.mu.Unlock()
	if !started || len(adapters) == 0 {
		t.Fatalf("after Prestart: started %v, %d adapters", started, len(adapters))
	}
	for _, a := range adapters {
		if a.current() != nil {
			t.Errorf("adapter %d has a logical device after Prestart", a.index)
		}
	}
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Adapters) != len(adapters) || b.phases != phases {
		t.Errorf("Describe after Prestart started again: %d adapters (had %d), phases %+v (had %+v)", len(d.Adapters), len(adapters), b.phases, phases)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b.Prestart()
	if _, err := b.Describe(ctx); err == nil {
		t.Error("Describe after Close and Prestart succeeded")
	}
	if n, text := b.ValidationMessages(); n != 0 {
		t.Errorf("%d validation messages:\n%s", n, text)
	}
}

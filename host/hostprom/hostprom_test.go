package hostprom

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kiln-dev/kiln/host"
)

// pedantic returns a registry that checks its metrics as it gathers them,
// holding c, failing the test if it refuses c.
func pedantic(t *testing.T, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	return reg
}

// fixedStats is a StatsSource with a fixed snapshot.
type fixedStats host.Stats

func (f fixedStats) Stats() host.Stats { return host.Stats(f) }

func sample() host.Stats {
	bounds := host.LatencyBounds()
	counts := make([]uint64, len(bounds)+1)
	counts[0], counts[6] = 2, 1 // two at ≤10µs, one at ≤1ms
	return host.Stats{Backends: []host.BackendStats{{
		ID: "vulkan", State: host.StateReady, Dispatches: 3, Compiles: 1,
		Errors: map[string]uint64{host.KindCrashed: 2, host.KindTimeout: 1}, Restarts: 2,
		Latency: host.Histogram{Bounds: bounds, Counts: counts, Count: 3, Sum: 1020 * time.Microsecond},
		BytesIn: 100, BytesOut: 50, CacheHits: 1, CacheMisses: 4, LogLinesDropped: 7,
	}}}
}

func TestCollectorExportsTheStats(t *testing.T) {
	c := New(fixedStats(sample()))
	want := `
# HELP kiln_errors_total Errors returned by calls on the backend, by kind.
# TYPE kiln_errors_total counter
kiln_errors_total{backend="vulkan",kind="crashed"} 2
kiln_errors_total{backend="vulkan",kind="timeout"} 1
# HELP kiln_bytes_total Buffer bytes moved by successful dispatches.
# TYPE kiln_bytes_total counter
kiln_bytes_total{backend="vulkan",direction="in"} 100
kiln_bytes_total{backend="vulkan",direction="out"} 50
# HELP kiln_backend_up 1 for the plugin's current state (ready, down, failing, failed, not started, starting, closed).
# TYPE kiln_backend_up gauge
kiln_backend_up{backend="vulkan",state="ready"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "kiln_errors_total", "kiln_bytes_total", "kiln_backend_up"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c); n != 12 {
		t.Errorf("%d metrics, want 12", n)
	}
	families, err := pedantic(t, c).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kiln_dispatch_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 3 || h.GetBucket()[0].GetCumulativeCount() != 2 || h.GetBucket()[6].GetCumulativeCount() != 3 {
			t.Fatalf("histogram %v", h)
		}
		return
	}
	t.Fatal("no kiln_dispatch_seconds")
}

func ExampleNew() {
	reg := prometheus.NewRegistry()
	// In an application: reg.MustRegister(hostprom.New(h)) for a *host.Host.
	reg.MustRegister(New(fixedStats(sample())))
	families, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range families {
		if f.GetName() == "kiln_dispatches_total" {
			m := f.GetMetric()[0]
			fmt.Println(f.GetName(), m.GetLabel()[0].GetValue(), m.GetCounter().GetValue())
		}
	}
	// Output: kiln_dispatches_total vulkan 3
}

// TestCoreHostDoesNotImportPrometheus pins why this package exists: an
// application that embeds package host does not pull in client_golang.
func TestCoreHostDoesNotImportPrometheus(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/kiln-dev/kiln/host").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "prometheus") {
		t.Fatal("package host depends on prometheus; only host/hostprom may")
	}
}

package hostprom

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kiln-dev/kiln/host"
)

// StatsSource is what a Collector reads; *host.Host is one.
type StatsSource interface {
	Stats() host.Stats
}

// Collector is a prometheus.Collector over a host's Stats. Metrics (every one
// labelled with backend, the backend id):
//
//	kiln_dispatches_total                counter
//	kiln_compiles_total                  counter
//	kiln_errors_total{kind}              counter, kind as host.ErrorKind names it
//	kiln_restarts_total                  counter
//	kiln_dispatch_seconds                histogram of dispatch round trips
//	kiln_bytes_total{direction}          counter, direction "in" (to the plugin) or "out"
//	kiln_pipeline_cache_total{result}    counter, result "hit" or "miss"
//	kiln_plugin_log_lines_dropped_total  counter
//	kiln_backend_up{state}               gauge, 1 for the plugin's current state
type Collector struct {
	src StatsSource

	dispatches, compiles, errors, restarts, latency, bytes, cache, dropped, up *prometheus.Desc
}

// New returns a Collector over src.
func New(src StatsSource) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append([]string{"backend"}, labels...), nil)
	}
	return &Collector{
		src:        src,
		dispatches: d("kiln_dispatches_total", "Successful dispatches."),
		compiles:   d("kiln_compiles_total", "Successful compiles."),
		errors:     d("kiln_errors_total", "Errors returned by calls on the backend, by kind.", "kind"),
		restarts:   d("kiln_restarts_total", "Plugin relaunches after crashes, hangs and deaths while idle."),
		latency:    d("kiln_dispatch_seconds", "Host-measured round trip of successful dispatches."),
		bytes:      d("kiln_bytes_total", "Buffer bytes moved by successful dispatches.", "direction"),
		cache:      d("kiln_pipeline_cache_total", "Compiles by pipeline cache result.", "result"),
		dropped:    d("kiln_plugin_log_lines_dropped_total", "Plugin log lines dropped by the rate limit."),
		up:         d("kiln_backend_up", "1 for the plugin's current state (ready, down, failing, failed, not started, starting, closed).", "state"),
	}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.dispatches, c.compiles, c.errors, c.restarts, c.latency, c.bytes, c.cache, c.dropped, c.up} {
		ch <- d
	}
}

// Collect sends the metrics of a fresh Stats snapshot.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, b := range c.src.Stats().Backends {
		counter := func(d *prometheus.Desc, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{b.ID}, labels...)...)
		}
		counter(c.dispatches, b.Dispatches)
		counter(c.compiles, b.Compiles)
		kinds := make([]string, 0, len(b.Errors))
		for k := range b.Errors {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			counter(c.errors, b.Errors[k], k)
		}
		counter(c.restarts, b.Restarts)
		counter(c.bytes, b.BytesIn, "in")
		counter(c.bytes, b.BytesOut, "out")
		counter(c.cache, b.CacheHits, "hit")
		counter(c.cache, b.CacheMisses, "miss")
		counter(c.dropped, b.LogLinesDropped)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1, b.ID, b.State)
		ch <- histogram(c.latency, b)
	}
}

// histogram turns a Stats histogram (per-bucket counts) into Prometheus's
// cumulative buckets, in seconds.
func histogram(d *prometheus.Desc, b host.BackendStats) prometheus.Metric {
	h := b.Latency
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, bound := range h.Bounds {
		cum += h.Counts[i]
		buckets[bound.Seconds()] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets, b.ID)
}

var _ prometheus.Collector = (*Collector)(nil)

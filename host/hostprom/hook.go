package hostprom

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kiln-dev/kiln/host"
)

// Hook is a host.Hook that is also a prometheus.Collector: histograms of the
// device time and the submit latency of every adapter, fed as the host's
// dispatches and submits end. Metrics:
//
//	kiln_device_seconds{backend,op}   histogram of the device-measured time of
//	                                  dispatches and submits (op "dispatch" or
//	                                  "submit"; backends that cannot time their
//	                                  device add nothing)
//	kiln_submit_seconds{backend}      histogram of the host-measured time of
//	                                  submits, from Submit to the completion
//
// backend names the adapter ("vulkan:0"). Register it beside the Collector
// and give it to the host (host.Hooks combines it with another hook):
//
//	hook := hostprom.NewHook()
//	h, _ := host.Open(ctx, host.Options{Hook: hook})
//	prometheus.MustRegister(hostprom.New(h), hook)
type Hook struct {
	device, submit *prometheus.HistogramVec
}

var (
	_ host.Hook            = (*Hook)(nil)
	_ prometheus.Collector = (*Hook)(nil)
)

// timeBuckets span 1 µs to about 16 s, doubling.
var timeBuckets = prometheus.ExponentialBuckets(1e-6, 2, 25)

// NewHook returns a Hook with empty histograms.
func NewHook() *Hook {
	return &Hook{
		device: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kiln_device_seconds", Help: "Device-measured time of successful dispatches and submits.", Buckets: timeBuckets}, []string{"backend", "op"}),
		submit: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kiln_submit_seconds", Help: "Host-measured time of successful submits, from Submit to the completion.", Buckets: timeBuckets}, []string{"backend"}),
	}
}

// Observe implements host.Hook.
func (h *Hook) Observe(_ context.Context, op host.Operation) {
	if op.Err != nil || (op.Kind != host.OpDispatch && op.Kind != host.OpSubmit) {
		return
	}
	if op.DeviceTime > 0 {
		h.device.WithLabelValues(op.Backend, op.Kind).Observe(op.DeviceTime.Seconds())
	}
	if op.Kind == host.OpSubmit && op.Commands > 0 {
		h.submit.WithLabelValues(op.Backend).Observe(op.Took.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (h *Hook) Describe(ch chan<- *prometheus.Desc) {
	h.device.Describe(ch)
	h.submit.Describe(ch)
}

// Collect implements prometheus.Collector.
func (h *Hook) Collect(ch chan<- prometheus.Metric) {
	h.device.Collect(ch)
	h.submit.Collect(ch)
}

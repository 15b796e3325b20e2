package hostprom

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kiln-dev/kiln/host"
)

// TestHookHistograms pins the per-adapter histograms: device time of
// dispatches and submits that timed it, submit latency of submits that ran
// commands; failures, compiles and empty submits add nothing.
func TestHookHistograms(t *testing.T) {
	h := NewHook()
	var hooks host.Hook = host.Hooks{nil, h}
	ctx := context.Background()
	for _, op := range []host.Operation{
		{Kind: host.OpSubmit, Backend: "vulkan:0", Commands: 1, Took: 30 * time.Microsecond, DeviceTime: 3 * time.Microsecond},
		{Kind: host.OpSubmit, Backend: "vulkan:0", Commands: 2, Took: 40 * time.Microsecond, DeviceTime: 5 * time.Microsecond},
		{Kind: host.OpSubmit, Backend: "cpu-ref:0", Commands: 1, Took: 20 * time.Microsecond},
		{Kind: host.OpDispatch, Backend: "vulkan:1", Took: time.Millisecond, DeviceTime: 100 * time.Microsecond},
		{Kind: host.OpSubmit, Backend: "vulkan:0", Commands: 1, Took: time.Second, Err: errors.New("lost")},
		{Kind: host.OpSubmit, Backend: "vulkan:0", Took: time.Second},
		{Kind: host.OpCompile, Backend: "vulkan:0", Took: time.Second},
	} {
		hooks.Observe(ctx, op)
	}
	if n := testutil.CollectAndCount(h, "kiln_device_seconds"); n != 2 {
		t.Errorf("%d device histograms, want 2 (vulkan:0 submit, vulkan:1 dispatch)", n)
	}
	if n := testutil.CollectAndCount(h, "kiln_submit_seconds"); n != 2 {
		t.Errorf("%d submit histograms, want 2 (vulkan:0, cpu-ref:0)", n)
	}
	families, err := pedantic(t, h).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + " "
			}
			if f.GetName() == "kiln_device_seconds" && strings.Contains(labels, "backend=vulkan:0") {
				if got := m.GetHistogram().GetSampleCount(); got != 2 {
					t.Errorf("vulkan:0 device samples %d, want 2", got)
				}
				if got := m.GetHistogram().GetSampleSum(); got < 7.9e-6 || got > 8.1e-6 {
					t.Errorf("vulkan:0 device sum %v, want 8µs", got)
				}
			}
		}
	}
}

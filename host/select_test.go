package host

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/pluginapi"
)

func rank(r uint32) *uint32 { return &r }

// gpu describes a dispatching, non-oracle backend with one available adapter.
func gpu(id string, prec *uint32, profile pluginapi.DeviceProfile) *pluginapi.Description {
	return &pluginapi.Description{
		ID: id, Version: "1", Dispatches: true, Precedence: prec,
		Adapters: []pluginapi.Adapter{{Index: 0, Name: id + " device", Available: true, Profile: profile}},
	}
}

// times is an opener that reports fixed acquisition times and records the calls.
type times struct {
	took   map[string]time.Duration
	errs   map[string]error
	called []string
}

func (t *times) open(_ context.Context, id string, adapter int) (time.Duration, error) {
	name := fmt.Sprintf("%s:%d", id, adapter)
	t.called = append(t.called, name)
	if err := t.errs[name]; err != nil {
		return 0, err
	}
	return t.took[name], nil
}

func pick(t *testing.T, descs []*pluginapi.Description, took map[string]time.Duration) string {
	t.Helper()
	o := &times{took: took}
	c, err := choosePreferred(context.Background(), descs, nil, o.open, nil)
	if err != nil {
		t.Fatalf("choosePreferred: %v", err)
	}
	return c.name()
}

// Mirrors vyre's preferred_selection_uses_typed_capability_before_precedence.
func TestPreferredUsesCapabilityBeforePrecedence(t *testing.T) {
	weakLowRank := gpu("low-rank", rank(1), pluginapi.DeviceProfile{MaxInvocationsPerWorkgroup: 64})
	strongHighRank := gpu("high-rank", rank(50), pluginapi.DeviceProfile{MaxInvocationsPerWorkgroup: 256})
	got := pick(t, []*pluginapi.Description{weakLowRank, strongHighRank}, nil)
	if got != "high-rank:0" {
		t.Fatalf("picked %s. Fix: implicit selection must prefer capability score before precedence", got)
	}
	a := newCandidate(strongHighRank, strongHighRank.Adapters[0], 10)
	b := newCandidate(weakLowRank, weakLowRank.Adapters[0], 10)
	if compareCandidates(a, b) >= 0 || compareCandidates(b, a) <= 0 {
		t.Fatal("compareCandidates must order the stronger adapter first, whatever the argument order")
	}
}

// Mirrors vyre's preferred_selection_uses_measured_acquisition_cost_as_tie_breaker.
func TestPreferredUsesAcquisitionTimeAsTieBreaker(t *testing.T) {
	profile := pluginapi.DeviceProfile{MaxInvocationsPerWorkgroup: 64, TimingQuality: pluginapi.HostEnqueueWait, MemBWGBps: 100}
	faster := gpu("faster", rank(10), profile)
	slower := gpu("slower", rank(10), profile)
	took := map[string]time.Duration{"faster:0": 5, "slower:0": 50}
	if got := pick(t, []*pluginapi.Description{slower, faster}, took); got != "faster:0" {
		t.Fatalf("picked %s. Fix: measured acquisition time must break ties after capability and precedence", got)
	}
	took = map[string]time.Duration{"faster:0": 50, "slower:0": 5}
	if got := pick(t, []*pluginapi.Description{slower, faster}, took); got != "slower:0" {
		t.Fatalf("picked %s; the acquisition time, not the id, must decide", got)
	}
}

// Mirrors vyre's preferred_selection_keeps_precedence_as_tie_breaker.
func TestPreferredKeepsPrecedenceAsTieBreaker(t *testing.T) {
	profile := pluginapi.DeviceProfile{MaxInvocationsPerWorkgroup: 64, TimingQuality: pluginapi.HostEnqueueWait, MemBWGBps: 100}
	rankA := gpu("rank-a", rank(5), profile)
	rankB := gpu("rank-b", rank(10), profile)
	none := gpu("aaa-no-rank", nil, profile)
	// rank-b and the unranked one acquire faster: precedence must still win.
	took := map[string]time.Duration{"rank-a:0": 50, "rank-b:0": 5, "aaa-no-rank:0": 1}
	if got := pick(t, []*pluginapi.Description{none, rankB, rankA}, took); got != "rank-a:0" {
		t.Fatalf("picked %s. Fix: precedence must break ties before acquisition time", got)
	}
	if got := pick(t, []*pluginapi.Description{none, rankB}, took); got != "rank-b:0" {
		t.Fatalf("picked %s; a backend without precedence must sort after every rank", got)
	}
}

func TestPreferredOrderCapabilityTimingBandwidth(t *testing.T) {
	base := pluginapi.DeviceProfile{MaxStorageBufferBindingSize: 1 << 30, MaxInvocationsPerWorkgroup: 256}
	better := base
	better.SupportsDeviceTimestamps = true // +2 capability
	timed := base
	timed.TimingQuality = pluginapi.HardwareCounters
	timed.MemBWGBps = 1
	fast := base
	fast.MemBWGBps = 900
	descs := []*pluginapi.Description{gpu("timed", rank(0), timed), gpu("fast", rank(0), fast), gpu("better", rank(9), better)}
	if got := pick(t, descs, nil); got != "better:0" {
		t.Fatalf("picked %s; capability score comes first", got)
	}
	if got := pick(t, descs[:2], nil); got != "timed:0" {
		t.Fatalf("picked %s; timing quality comes before memory bandwidth", got)
	}
	slow := base
	slow.MemBWGBps = 10
	if got := pick(t, []*pluginapi.Description{gpu("slow", rank(0), slow), gpu("fast", rank(7), fast)}, nil); got != "fast:0" {
		t.Fatalf("picked %s; memory bandwidth comes before precedence", got)
	}
	if got := pick(t, []*pluginapi.Description{gpu("b", nil, base), gpu("a", nil, base)}, nil); got != "a:0" {
		t.Fatalf("picked %s; the id breaks a full tie", got)
	}
}

func TestPreferredConsidersEveryAdapter(t *testing.T) {
	d := gpu("multi", nil, pluginapi.DeviceProfile{})
	d.Adapters = append(d.Adapters,
		pluginapi.Adapter{Index: 1, Name: "busy", Available: false, Reason: "device busy. Fix: wait"},
		pluginapi.Adapter{Index: 2, Name: "big", Available: true, Profile: pluginapi.DeviceProfile{MaxInvocationsPerWorkgroup: 1024}})
	o := &times{}
	c, err := choosePreferred(context.Background(), []*pluginapi.Description{d}, nil, o.open, nil)
	if err != nil || c.name() != "multi:2" {
		t.Fatalf("got %v, %v; want multi:2", c.name(), err)
	}
	if strings.Join(o.called, ",") != "multi:0,multi:2" {
		t.Fatalf("opened %v; an unavailable adapter must not be opened", o.called)
	}
}

// Mirrors vyre's dispatch capability table: a backend that does not dispatch is
// never chosen, however capable.
func TestPreferredSkipsBackendsThatDoNotDispatch(t *testing.T) {
	strong := gpu("no-dispatch", rank(0), pluginapi.DeviceProfile{MaxInvocationsPerWorkgroup: 1024, HasSharedMemory: true})
	strong.Dispatches = false
	weak := gpu("weak", nil, pluginapi.DeviceProfile{})
	if got := pick(t, []*pluginapi.Description{strong, weak}, nil); got != "weak:0" {
		t.Fatalf("picked %s; a non-dispatching backend must never be chosen", got)
	}
	o := &times{}
	_, err := choosePreferred(context.Background(), []*pluginapi.Description{strong}, nil, o.open, nil)
	var nb *NoBackendError
	if !errors.As(err, &nb) || len(o.called) != 0 || !strings.Contains(err.Error(), "no-dispatch") {
		t.Fatalf("err %v, opened %v; want a NoBackendError naming no-dispatch and no Open", err, o.called)
	}
}

// Mirrors vyre's acquire_preferred_dispatch_backend: reference oracles are never
// chosen implicitly, only by explicit id.
func TestPreferredNeverPicksReferenceOracles(t *testing.T) {
	best := pluginapi.DeviceProfile{MaxStorageBufferBindingSize: 1, MaxInvocationsPerWorkgroup: 1024, SubgroupSize: 32, SupportsSubgroupOps: true}
	cpuRef := gpu("cpu-ref", rank(0), best)
	reference := gpu("reference", rank(0), best)
	flagged := gpu("golden", rank(0), best)
	flagged.ReferenceOracle = true
	for _, d := range []*pluginapi.Description{cpuRef, reference, flagged} {
		if !IsReferenceOracle(d) {
			t.Fatalf("%s must count as a reference oracle", d.ID)
		}
	}
	if IsReferenceOracle(gpu("vulkan", nil, best)) {
		t.Fatal("vulkan is not a reference oracle")
	}
	oracles := []*pluginapi.Description{cpuRef, reference, flagged}
	if got := pick(t, append(oracles, gpu("tiny", nil, pluginapi.DeviceProfile{})), nil); got != "tiny:0" {
		t.Fatalf("picked %s; reference oracles must be skipped", got)
	}
	o := &times{}
	_, err := choosePreferred(context.Background(), oracles, nil, o.open, nil)
	var nb *NoBackendError
	if !errors.As(err, &nb) {
		t.Fatalf("got %v, want *NoBackendError", err)
	}
	if len(o.called) != 0 {
		t.Fatalf("opened %v; an oracle must not even be opened implicitly", o.called)
	}
	msg := err.Error()
	for _, want := range []string{"cpu-ref", "reference", "golden", "only reference oracle"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	assertEndsWithFix(t, msg)
}

func TestPreferredListsEveryFailure(t *testing.T) {
	broken := gpu("broken", nil, pluginapi.DeviceProfile{})
	gone := gpu("gone", nil, pluginapi.DeviceProfile{})
	gone.Adapters[0].Available = false
	gone.Adapters[0].Reason = "no driver. Fix: install it"
	empty := gpu("empty", nil, pluginapi.DeviceProfile{})
	empty.Adapters = nil
	o := &times{errs: map[string]error{"broken:0": errors.New("device lost")}}
	_, err := choosePreferred(context.Background(), []*pluginapi.Description{broken, gone, empty, gpu("cpu-ref", nil, pluginapi.DeviceProfile{})},
		[]string{"handshake with /p/kiln-backend-bad failed"}, o.open, nil)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"device lost", "no driver", "empty: reports no adapters", "kiln-backend-bad", "cpu-ref"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not list %q", msg, want)
		}
	}
	assertEndsWithFix(t, msg)
}

// assertEndsWithFix checks that the message's last sentence is its Fix: sentence.
func assertEndsWithFix(t *testing.T, msg string) {
	t.Helper()
	i := strings.LastIndex(msg, "Fix: ")
	if i < 0 || strings.Contains(msg[i:], ". ") {
		t.Fatalf("error %q does not end with a Fix: sentence", msg)
	}
}

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		in      string
		id      string
		adapter int
		bad     bool
	}{
		{"cpu-ref", "cpu-ref", -1, false},
		{"vulkan:1", "vulkan", 1, false},
		{"cuda:0", "cuda", 0, false},
		{"cuda:-1", "", 0, true},
		{"cuda:x", "", 0, true},
		{"cuda:", "", 0, true},
	} {
		id, adapter, err := parseName(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && (id != tc.id || adapter != tc.adapter)) {
			t.Errorf("parseName(%q) = %q, %d, %v", tc.in, id, adapter, err)
		}
		if tc.bad && err != nil {
			assertEndsWithFix(t, err.Error())
		}
	}
}

// A host whose plugins are known only by description: Acquire's registry checks
// happen before any process is touched.
func describedHost(descs ...*pluginapi.Description) *Host {
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{byID: map[string]*plugin{}, changed: make(chan struct{}), ctx: ctx, cancel: cancel}
	for _, d := range descs {
		p := startedPlugin("/p/"+PluginPrefix+d.ID, nil)
		p.desc = d
		h.plugins = append(h.plugins, p)
		h.byID[d.ID] = p
	}
	return h
}

// startedPlugin is a plugin whose start has finished, with startErr.
func startedPlugin(path string, startErr error) *plugin {
	p := newPlugin(path, settings{log: hclog.NewNullLogger(), logRate: 1})
	p.startOnce.Do(func() {})
	p.startErr = startErr
	close(p.started)
	return p
}

// Mirrors vyre's missing_backend_registry_queries_return_absent_without_panicking.
func TestAcquireUnknownIDListsKnownIDs(t *testing.T) {
	h := describedHost(gpu("cpu-ref", nil, pluginapi.DeviceProfile{}), gpu("vulkan", nil, pluginapi.DeviceProfile{}))
	h.plugins = append(h.plugins, startedPlugin("/p/kiln-backend-x", errors.New("bad")))
	for _, name := range []string{"__missing__", "cuda:0", "vulkan:3"} {
		_, err := h.Acquire(context.Background(), name)
		var nf *NotFoundError
		if !errors.As(err, &nf) {
			t.Fatalf("Acquire(%q) = %v, want *NotFoundError", name, err)
		}
		if nf.Name != name {
			t.Errorf("NotFoundError.Name = %q, want %q", nf.Name, name)
		}
		assertEndsWithFix(t, err.Error())
	}
	_, err := h.Acquire(context.Background(), "nope")
	if msg := err.Error(); !strings.Contains(msg, "cpu-ref, vulkan") || !strings.Contains(msg, "1 plugin(s) failed") {
		t.Fatalf("error %q must list the known ids and the failed plugins", msg)
	}
	_, err = h.Acquire(context.Background(), "vulkan:3")
	if !strings.Contains(err.Error(), "vulkan:0") {
		t.Fatalf("error %q must list the known adapters", err)
	}
	if _, err := h.Description("nope"); err == nil {
		t.Fatal("Description of an unknown id must fail")
	}
}

func TestAcquireUnavailableAdapterSaysWhy(t *testing.T) {
	d := gpu("vulkan", nil, pluginapi.DeviceProfile{})
	d.Adapters[0].Available = false
	d.Adapters[0].Reason = "no ICD found. Fix: install mesa-vulkan-drivers"
	_, err := describedHost(d).Acquire(context.Background(), "vulkan")
	if err == nil || !strings.Contains(err.Error(), "no ICD found") {
		t.Fatalf("got %v; want the adapter's reason", err)
	}
}

func TestAcquireOnClosedHost(t *testing.T) {
	h := describedHost(gpu("vulkan", nil, pluginapi.DeviceProfile{}))
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	var ce *ClosedError
	if _, err := h.Acquire(context.Background(), "vulkan"); !errors.As(err, &ce) {
		t.Fatalf("Acquire after Close = %v, want *ClosedError", err)
	}
	if _, err := h.AcquirePreferred(context.Background()); !errors.As(err, &ce) {
		t.Fatalf("AcquirePreferred after Close = %v, want *ClosedError", err)
	}
}

// Identical GPUs of one backend come in adapter order: their measured
// bandwidths differ by noise (quantized to two significant digits, they tie)
// and their opening times do not order adapters of one backend.
func TestIdenticalGPUsOrderByAdapter(t *testing.T) {
	profile := func(bw float64) pluginapi.DeviceProfile {
		return pluginapi.DeviceProfile{MaxInvocationsPerWorkgroup: 1024, TimingQuality: pluginapi.DeviceTimestamps, MemBWGBps: bw}
	}
	twoGPUs := &pluginapi.Description{ID: "vk", Version: "1", Dispatches: true, Adapters: []pluginapi.Adapter{
		{Index: 0, Name: "H200", Available: true, Profile: profile(2183.4)},
		{Index: 1, Name: "H200", Available: true, Profile: profile(2193.7)},
	}}
	took := map[string]time.Duration{"vk:0": 494 * time.Microsecond, "vk:1": 301 * time.Microsecond}
	if got := pick(t, []*pluginapi.Description{twoGPUs}, took); got != "vk:0" {
		t.Fatalf("picked %s among identical GPUs, want vk:0", got)
	}
	// A real bandwidth difference still decides.
	twoGPUs.Adapters[1].Profile = profile(2400)
	if got := pick(t, []*pluginapi.Description{twoGPUs}, took); got != "vk:1" {
		t.Fatalf("picked %s, want vk:1 with 2400 GB/s over 2200", got)
	}
}

func TestQuantizeBandwidth(t *testing.T) {
	for in, want := range map[float64]float64{0: 0, -3: 0, 2183.4: 2200, 2193.7: 2200, 2149: 2100, 3874: 3900, 98.4: 98, 0.456: 0.46} {
		if got := quantizeBandwidth(in); math.Abs(got-want) > 1e-9 {
			t.Errorf("quantizeBandwidth(%v) = %v, want %v", in, got, want)
		}
	}
}

package host

import (
	"context"
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/ir"
)

func TestStatsCountWhatHappened(t *testing.T) {
	h := openHost(t, "cpuref", "fx-exit", "fx-describe-hang")
	for range 3 {
		healthyDispatch(t, h)
	}
	l := saxpyLaunch("cpu-ref", 4)
	l.Spec.Set("a", ir.SpecU32(3))
	if _, err := h.Dispatch(context.Background(), saxpy(t), l); err == nil {
		t.Fatal("a spec of the wrong type must be rejected")
	}
	var crashed *CrashedError
	if _, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-exit", Work: fixtureWork()}); !errors.As(err, &crashed) {
		t.Fatalf("fx-exit: %v", err)
	}
	if _, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-exit", Work: fixtureWork()}); !errors.As(err, &crashed) {
		t.Fatalf("fx-exit again: %v", err)
	}

	ref := statsOf(t, h, "cpu-ref")
	var buckets uint64
	for _, c := range ref.Latency.Counts {
		buckets += c
	}
	if ref.State != StateReady || ref.Dispatches != 3 || ref.Errors[KindRejected] != 1 || ref.Latency.Count != 3 || buckets != 3 ||
		ref.Latency.Sum <= 0 || ref.BytesIn != 3*800 || ref.BytesOut != 3*400 || ref.Compiles != 3 || ref.CacheHits+ref.CacheMisses != 3 {
		t.Errorf("cpu-ref stats %+v", ref)
	}
	fx := statsOf(t, h, "fx-exit")
	if fx.Errors[KindCrashed] != 2 || fx.Restarts != 1 || fx.Dispatches != 0 || fx.State != StateDown {
		t.Errorf("fx-exit stats %+v", fx)
	}
	if s := statsOf(t, h, "fx-describe-hang"); s.State != StateNotStarted {
		t.Errorf("a plugin never needed is %s, want %s", s.State, StateNotStarted)
	}
}

// TestProbeLeavesTheStoresAlone: the host's probe dispatch is a health check;
// it writes no pipeline cache entry.
func TestProbeLeavesTheStoresAlone(t *testing.T) {
	c := testCache(t, cache.Options{})
	h := openWith(t, Options{Cache: c, NoAutotune: true, NoPGO: true}, "fx-blob")
	if err := h.Probe(context.Background(), "fx-blob"); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats(context.Background())
	if err != nil || st.Entries != 0 {
		t.Fatalf("cache after a probe: %+v, %v", st, err)
	}
	if s := statsOf(t, h, "fx-blob"); s.Dispatches != 1 || s.CacheHits+s.CacheMisses != 0 {
		t.Fatalf("stats %+v", s)
	}
}

package gputest

import (
	"errors"
	"testing"
)

// TestRepeatTimes pins the timing loop of Dispatches and Submits: the means of
// the b.N calls' device and host times, and the shortest device time.
func TestRepeatTimes(t *testing.T) {
	var got Times
	calls := 0
	res := testing.Benchmark(func(b *testing.B) {
		calls = 0
		got = repeat(b, func() (int64, int64, error) {
			calls++
			return int64(100 + calls%3), 7, nil
		})
	})
	if res.N == 0 || calls != res.N {
		t.Fatalf("repeat called one %d times for b.N = %d", calls, res.N)
	}
	if got.BestDevice != 100 && res.N >= 3 || got.MeanHost != 7 || got.MeanDevice < 100 || got.MeanDevice > 102 {
		t.Errorf("times %+v after %d calls of 100 + calls%%3 device and 7 host nanoseconds", got, res.N)
	}
}

// TestRepeatFailsOnAnError checks that an error of one call fails the benchmark.
func TestRepeatFailsOnAnError(t *testing.T) {
	res := testing.Benchmark(func(b *testing.B) {
		repeat(b, func() (int64, int64, error) { return 0, 0, errors.New("device lost") })
	})
	if res.N != 0 {
		t.Errorf("a benchmark whose calls fail reported %d iterations", res.N)
	}
}

package host

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// BenchmarkSubmitRoundTrip is one submit of a 1-element dispatch over a
// resident buffer on the cpu-ref plugin process, and BenchmarkDispatchRoundTrip
// the same dispatch through the v1 API (bytes in, bytes out).
func BenchmarkSubmitRoundTrip(b *testing.B) {
	ctx := context.Background()
	h, be := benchCPURef(ctx, b, nil)
	defer h.Close()
	pl, batch := benchSaxpy(ctx, b, be)
	b.Run("submit", func(b *testing.B) {
		var plugin int64
		for range b.N {
			res, err := be.Submit(ctx, batch)
			if err != nil {
				b.Fatal(err)
			}
			plugin += res.PluginTime.Nanoseconds()
		}
		b.ReportMetric(float64(plugin)/float64(b.N), "plugin-ns/op")
	})
	work := Work{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{make([]byte, 4), make([]byte, 4)}}
	b.Run("dispatch", func(b *testing.B) {
		for range b.N {
			if _, err := be.Dispatch(ctx, pl, work); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDispatchLoad is the load test of `kiln bench --load` in a benchmark:
// g goroutines share one host and one pipeline on the cpu-ref plugin process
// and dispatch a 1-element increment through the v1 API; ns/op is the time per
// dispatch of all of them together (so more goroutines going faster shows as
// fewer ns/op).
func BenchmarkDispatchLoad(b *testing.B) {
	ctx := context.Background()
	h, be := benchCPURef(ctx, b, nil)
	defer h.Close()
	pl := benchIncrement(ctx, b, be)
	for _, g := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			var wg sync.WaitGroup
			errs := make([]error, g)
			for k := range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					work := Work{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{make([]byte, 4)}}
					for j := k; j < b.N; j += g {
						if _, err := be.Dispatch(ctx, pl, work); err != nil {
							errs[k] = err
							return
						}
					}
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package pgo

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// writeTable writes a table file of n routes, each like one kiln certify
// writes, and returns its path.
func writeTable(tb testing.TB, n int) string {
	tb.Helper()
	routes := make(map[string]Route, n)
	for i := range n {
		routes[fmt.Sprintf("kiln.bench.op%06d.f32", i)] = sampleRoute(fmt.Sprintf("vulkan:%d", i%4))
	}
	data, err := encode(routes)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "pgo.toml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{625, 2500, 5000, 10000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			path := writeTable(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				tbl, err := Load(path)
				if err != nil {
					b.Fatal(err)
				}
				if tbl.Len() != n {
					b.Fatalf("%d routes loaded, want %d", tbl.Len(), n)
				}
			}
		})
	}
}

// loadBytes is the fewest bytes allocated by one Load of path in three, each
// after two collections, which empty go-toml's pool of decoders: a decoder
// taken from the pool reuses the buffers an earlier Load grew.
func loadBytes(t *testing.T, path string) uint64 {
	t.Helper()
	least := uint64(math.MaxUint64)
	for range 3 {
		runtime.GC()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := Load(path); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// TestLoadIsLinearInRoutes loads tables of n and 4n routes: a linear Load
// allocates about 4 times as much for the larger, a quadratic one about 16
// times (go-toml decoding the file in one piece: 13 times, its duplicate-key
// tracker copying every key seen so far at each [[array table]]). Bytes
// allocated, unlike time, do not depend on the machine's load.
func TestLoadIsLinearInRoutes(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 2500 routes")
	}
	small, large := loadBytes(t, writeTable(t, 500)), loadBytes(t, writeTable(t, 2000))
	if ratio := float64(large) / float64(small); ratio > 8 {
		t.Fatalf("Load of 2000 routes allocated %d bytes, %.1f times the %d of 500 routes; want about 4 (linear)", large, ratio, small)
	}
}

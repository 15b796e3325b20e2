package host

import (
	"runtime"
	"sync"
)

// Large copies of the v1 API's inputs into the plugin's mapped scratch buffers
// are split across the CPUs: the memcpy is a large v1 dispatch's cost beyond the
// kernel, and several cores move memory faster than one. (Outputs are cloned
// instead, which allocates the caller's slice without zeroing it first.) See
// docs/design.md, "Protocol v2: buffers, submits, shared memory, fast path".
const (
	// parallelCopyBytes is the size from which a copy is split.
	parallelCopyBytes = 8 << 20
	// copyChunkBytes aligns the parts: whole pages, so no two goroutines
	// fault in the same page.
	copyChunkBytes = 64 << 10
)

// copyParallel copies src into dst (min of their lengths, as copy does), in
// parts on up to GOMAXPROCS goroutines when it is large.
func copyParallel(dst, src []byte) int {
	n := min(len(dst), len(src))
	parts := min(runtime.GOMAXPROCS(0), n/(parallelCopyBytes/2)) // parts of at least 4 MiB
	if n < parallelCopyBytes || parts < 2 {
		return copy(dst, src)
	}
	per := (n/parts + copyChunkBytes - 1) / copyChunkBytes * copyChunkBytes
	var wg sync.WaitGroup
	for at := per; at < n; at += per {
		end := min(at+per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[at:end], src[at:end])
		}()
	}
	copy(dst[:min(per, n)], src[:min(per, n)])
	wg.Wait()
	return n
}

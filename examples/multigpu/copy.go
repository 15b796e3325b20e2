package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/host"
)

// copyBench copies -mib MiB from the first backend of spec ("cuda:0,cuda:1")
// into the second with host.CopyBuffer, -reps times after one verified copy,
// and prints the median time and bandwidth (bytes copied per second), then the
// same the other way.
func copyBench(ctx context.Context, h *host.Host, spec string, mib, reps int, out io.Writer) error {
	names := strings.Split(spec, ",")
	if len(names) != 2 {
		return fmt.Errorf("-copy %q names %d backends. Fix: name a source and a destination, as in -copy cuda:0,cuda:1", spec, len(names))
	}
	n := int64(mib) << 20
	var bufs [2]*host.Buffer
	defer func() {
		for _, b := range bufs {
			if b != nil {
				_ = b.Free(ctx)
			}
		}
	}()
	for i, name := range names {
		b, err := h.Acquire(ctx, name)
		if err != nil {
			return err
		}
		if bufs[i], err = b.Alloc(ctx, n, 0); err != nil {
			return err
		}
	}
	for dir := range 2 {
		src, dst := bufs[dir], bufs[1-dir]
		from, to := names[dir], names[1-dir]
		data := make([]byte, n)
		r := rand.New(rand.NewPCG(uint64(dir), 1))
		for i := 0; i < len(data); i += 8 {
			binary.LittleEndian.PutUint64(data[i:], r.Uint64())
		}
		if err := src.Write(ctx, 0, data); err != nil {
			return err
		}
		if err := host.CopyBuffer(ctx, dst, 0, src, 0, n); err != nil {
			return err
		}
		got := make([]byte, n)
		if err := dst.Read(ctx, 0, got); err != nil {
			return err
		}
		if !bytes.Equal(got, data) {
			return fmt.Errorf("copy %s -> %s: the destination differs from the source", from, to)
		}
		times := make([]time.Duration, reps)
		for i := range times {
			start := time.Now()
			if err := host.CopyBuffer(ctx, dst, 0, src, 0, n); err != nil {
				return err
			}
			times[i] = time.Since(start)
		}
		slices.Sort(times)
		med := times[len(times)/2]
		fmt.Fprintf(out, "copy %s -> %s: %d MiB, verified; median of %d: %.3f ms, %.1f GB/s (best %.1f GB/s)\n",
			from, to, mib, reps, float64(med.Microseconds())/1e3, float64(n)/med.Seconds()/1e9, float64(n)/times[0].Seconds()/1e9)
	}
	return nil
}

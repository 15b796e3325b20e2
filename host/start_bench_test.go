package host

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/echoplugin"
)

// BenchmarkStart measures, interleaved in one run, a bare go-plugin plugin's
// start + handshake + one RPC (internal/echoplugin/echo) and a
// kiln plugin's start + handshake + Describe (the fixture, with the default
// authentication, which is peer credentials and a token on Linux, with the
// mutual TLS of other systems, and with NoMTLS). It reports the medians in ms
// and the ratio of kiln's (default) to the bare start; docs/design.md, "Plugin
// transport authentication", asks for at most 1.25.
func BenchmarkStart(b *testing.B) {
	dir := pluginDir(b, "fx-env")
	if err := binaries.errs["echo"]; err != nil {
		b.Fatal(err)
	}
	exe := filepath.Join(binaries.dir, "echo")
	ctx := context.Background()
	kiln := func(opts Options) time.Duration {
		opts.PluginDir, opts.NoCache, opts.NoPinning = dir, true, true
		h, err := Open(ctx, opts)
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		ps := h.Report().Plugins
		if len(ps) != 1 || ps[0].Err != nil {
			b.Fatalf("fx-env did not start: %+v", ps)
		}
		return ps[0].StartTime
	}
	var bare, auth, mtls, plain []time.Duration
	for b.Loop() {
		d, err := echoplugin.Start(ctx, exe)
		if err != nil {
			b.Fatal(err)
		}
		bare = append(bare, d)
		auth = append(auth, kiln(Options{}))
		mtls = append(mtls, kiln(Options{tlsOnly: true}))
		plain = append(plain, kiln(Options{NoMTLS: true}))
	}
	med := func(ds []time.Duration) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[len(s)/2]) / float64(time.Millisecond)
	}
	b.ReportMetric(med(bare), "bare-ms")
	b.ReportMetric(med(auth), "kiln-ms")
	b.ReportMetric(med(mtls), "kiln-tls-ms")
	b.ReportMetric(med(plain), "kiln-nomtls-ms")
	b.ReportMetric(med(auth)/med(bare), "kiln/bare")
	b.ReportMetric(0, "ns/op")
}

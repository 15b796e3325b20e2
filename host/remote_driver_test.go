package host

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"gocloud.dev/blob/memblob"
)

// A fleet tier URL whose object store's driver the application did not import
// (this test binary links s3:// and file:// only) is logged with the import
// that fixes it, and the host works from its local stores: the dispatch
// succeeds.
func TestARemoteWithoutItsDriverNeverFailsADispatch(t *testing.T) {
	for scheme, pkg := range map[string]string{
		"azblob": "github.com/kiln-dev/kiln/remote/azure",
		"gs":     "github.com/kiln-dev/kiln/remote/gcs",
	} {
		t.Run(scheme, func(t *testing.T) {
			var logs bytes.Buffer
			opts := newMachine(t).options(scheme + "://fleet/team")
			opts.Logger = hclog.New(&hclog.LoggerOptions{Name: "app", Level: hclog.Warn, Output: &logs})
			h := openWith(t, opts, "fx-blob")
			if h.Remote() != nil {
				t.Fatalf("the host opened %s:// without its driver", scheme)
			}
			res, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-blob", Work: fixtureWork()})
			if err != nil || res.Cache != CacheMiss {
				t.Fatalf("dispatch without the fleet tier: %v, cache %q", err, res.Cache)
			}
			for _, want := range []string{"running without the fleet tier", "the " + scheme + " scheme", `Fix: import _ \"` + pkg + `\"`} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the log lacks %q:\n%s", want, logs.String())
				}
			}
		})
	}
}

// A bucket the application opened is the fleet tier (over Options.Remote): two
// hosts with separate local stores share through it, and the host leaves it
// open.
func TestTwoHostsShareAnApplicationsBucket(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	prog := fourBuffers(t)

	first := newMachine(t).options("nosuch://ignored")
	first.RemoteBucket = bucket
	h1 := openWith(t, first, "fx-blob")
	if h1.Remote() == nil || h1.Remote().URL() != "" {
		t.Fatalf("the host's fleet tier is %v, want the application's bucket", h1.Remote())
	}
	res, err := h1.Dispatch(ctx, prog, Launch{Backend: "fx-blob", Work: fixtureWorkByInvocations()})
	if err != nil || res.Cache != CacheMiss {
		t.Fatalf("first host: %v, cache %q", err, res.Cache)
	}
	if err := h1.Close(); err != nil {
		t.Fatal(err)
	}

	second := newMachine(t).options(RemoteOff)
	second.RemoteBucket = bucket
	h2 := openWith(t, second, "fx-blob")
	res, err = h2.Dispatch(ctx, prog, Launch{Backend: "fx-blob", Work: fixtureWorkByInvocations()})
	if err != nil {
		t.Fatal(err)
	}
	if verdict, _ := blobReport(t, res); res.Cache != CacheRemoteHit || verdict != 1 {
		t.Fatalf("second host: cache %q, blob verdict %d; want the first host's entry from the bucket", res.Cache, verdict)
	}
	if err := h2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.IsAccessible(ctx); err != nil {
		t.Fatalf("the host closed the application's bucket: %v", err)
	}
}

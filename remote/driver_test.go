package remote

import (
	"context"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/kiln-dev/kiln/cache"
)

// A URL whose scheme no linked driver serves (this test binary links s3:// and
// file:// only) is an error naming the scheme and the import that fixes it.
func TestOpenWithoutItsDriverNamesTheImport(t *testing.T) {
	ctx := context.Background()
	for url, fix := range map[string]string{
		"gs://bucket/team":         `Fix: import _ "github.com/kiln-dev/kiln/remote/gcs"`,
		"azblob://container/team":  `Fix: import _ "github.com/kiln-dev/kiln/remote/azure"`,
		"ftp://example.com/shared": `import _ "github.com/kiln-dev/kiln/remote/s3"`,
	} {
		scheme, _, _ := strings.Cut(url, ":")
		s, err := Open(ctx, url, Options{})
		if err == nil {
			s.Close(ctx)
			t.Errorf("Open(%q) opened without a driver", url)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "the "+scheme+" scheme") || !strings.Contains(msg, fix) || !strings.Contains(msg, "Fix: ") {
			t.Errorf("Open(%q) = %v, want the %s scheme named and %s", url, err, scheme, fix)
		}
		if scheme != "ftp" && !strings.HasSuffix(msg, fix) {
			t.Errorf("Open(%q) = %v, want it to end with %s", url, err, fix)
		}
	}
	for _, linked := range []string{"file://" + t.TempDir(), "s3://bucket?region=us-east-1"} {
		s, err := Open(ctx, linked, Options{})
		if err != nil {
			t.Errorf("Open(%q): %v", linked, err)
			continue
		}
		s.Close(ctx)
	}
}

// New makes a fleet tier of the application's bucket: a second machine hits
// what the first compiled, and Close leaves the bucket open.
func TestNewServesTheApplicationsBucket(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	first := New(bucket, Options{})
	c := NewCache(localCache(t), first)
	if err := c.Write(key(1), []byte("compiled once")); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	second := New(bucket, Options{})
	defer second.Close(ctx)
	if l := get(t, NewCache(localCache(t), second), key(1)); !l.Hit() || !l.Remote || string(l.Payload) != "compiled once" {
		t.Fatalf("second machine: %+v, want a remote hit", l)
	}
	if second.URL() != "" || second.Timeout() != DefaultTimeout {
		t.Fatalf("URL %q, timeout %v", second.URL(), second.Timeout())
	}
	if u := second.Usage(); u.Hits != 1 || u.Misses[cache.MissAbsent] != 0 {
		t.Fatalf("usage %+v", u)
	}
}

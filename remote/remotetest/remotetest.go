package remotetest

import (
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	// The URLs S3 and S3URL return need the s3:// driver.
	_ "github.com/kiln-dev/kiln/remote/s3"
)

// Bucket is the bucket the S3 server holds.
const Bucket = "kiln-fleet"

// Credentials gives the test (and the processes it starts) static AWS
// credentials, which the S3 server accepts, so the AWS SDK never looks further
// (no shared config files, no instance metadata service).
func Credentials(t testing.TB) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "kiln-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "kiln-test-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
}

// S3 starts an S3 server on loopback for the test's lifetime, with one empty
// bucket, and returns the fleet tier URL of prefix in it (no prefix when
// empty) with extra query parameters appended ("kiln_timeout=1s"). It sets
// the test's Credentials.
func S3(t testing.TB, prefix string, extra ...string) string {
	t.Helper()
	Credentials(t)
	backend := s3mem.New()
	if err := backend.CreateBucket(Bucket); err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(gofakes3.New(backend, gofakes3.WithoutVersioning()).Server())
	t.Cleanup(server.Close)
	return S3URL(server.URL, prefix, extra...)
}

// S3URL is the fleet tier URL of prefix in Bucket on the S3 endpoint, for
// path-style access, with extra query parameters appended. The test must have
// called Credentials (S3, NewHanging and Refusing do).
func S3URL(endpoint, prefix string, extra ...string) string {
	q := url.Values{"region": {"us-east-1"}, "endpoint": {endpoint}, "use_path_style": {"true"}}
	raw := "s3://" + Bucket
	if prefix != "" {
		raw += "/" + prefix
	}
	raw += "?" + q.Encode()
	for _, e := range extra {
		raw += "&" + e
	}
	return raw
}

// Dir makes a shared directory for the test and returns its file:// URL with
// extra query parameters appended.
func Dir(t testing.TB, extra ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fleet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	raw := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
	for i, e := range extra {
		if i == 0 {
			raw += "?" + e
		} else {
			raw += "&" + e
		}
	}
	return raw
}

// Hanging is an endpoint that accepts connections and never answers.
type Hanging struct {
	// Endpoint is its http:// address.
	Endpoint string
	accepted atomic.Int64
}

// Connections returns how many connections it has accepted.
func (h *Hanging) Connections() int64 { return h.accepted.Load() }

// NewHanging starts a hanging endpoint for the test's lifetime and sets the
// test's Credentials.
func NewHanging(t testing.TB) *Hanging {
	t.Helper()
	Credentials(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &Hanging{Endpoint: "http://" + ln.Addr().String()}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return h
}

// Refusing returns an http:// endpoint on loopback where nothing listens, so
// every connection is refused, and sets the test's Credentials.
func Refusing(t testing.TB) string {
	t.Helper()
	Credentials(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

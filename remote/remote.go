package remote

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	// file:// is built in: a shared directory needs no cloud SDK. The object
	// stores' drivers are imported by the application (remote/s3, remote/gcs,
	// remote/azure), as database/sql drivers are.
	_ "gocloud.dev/blob/fileblob"

	"github.com/kiln-dev/kiln/cache"
)

// Env is the environment variable that names the fleet tier when the host's
// Options.Remote is empty.
const Env = "KILN_REMOTE"

// Defaults of [Options].
const (
	// DefaultTimeout is the deadline of every remote call.
	DefaultTimeout = 3 * time.Second
	// DefaultFlushTimeout bounds how long Flush waits for queued uploads.
	DefaultFlushTimeout = 10 * time.Second
	// DefaultMaxPendingBytes bounds the bytes queued for upload.
	DefaultMaxPendingBytes = 256 << 20
	// DefaultBackoff is how long the remote is skipped after a failed call; it
	// doubles with each further failure up to maxBackoff.
	DefaultBackoff = 5 * time.Second
	maxBackoff     = 5 * time.Minute
)

// URL query parameters kiln reads and removes before the URL reaches the
// object store's driver.
const (
	timeoutParam      = "kiln_timeout"
	flushTimeoutParam = "kiln_flush_timeout"
)

// layout is the prefix of every object kiln writes, inside the URL's bucket
// and prefix; the version changes only with an incompatible layout.
const layout = "kiln/v1/"

// Options configure [Open]. Zero fields take the defaults; the URL's
// kiln_timeout and kiln_flush_timeout parameters override Timeout and
// FlushTimeout.
type Options struct {
	// Timeout is the deadline of every remote call ([DefaultTimeout]).
	Timeout time.Duration
	// FlushTimeout bounds how long Flush waits for queued uploads
	// ([DefaultFlushTimeout]); what is left is dropped and counted.
	FlushTimeout time.Duration
	// MaxPendingBytes bounds the write-behind queue ([DefaultMaxPendingBytes]);
	// an upload that does not fit is dropped and counted.
	MaxPendingBytes int64
	// Backoff is how long the remote is skipped after a failed call
	// ([DefaultBackoff]), doubling with each further failure up to 5 minutes.
	Backoff time.Duration
	// Logger receives failures (a warning when the remote goes down, debug
	// lines after). Nil discards them.
	Logger hclog.Logger
}

// Store is a fleet tier: a bucket of an object store, reached through
// gocloud.dev/blob, shared by many machines. Every call has a deadline; a call
// that fails marks the remote down for a backoff during which calls are skipped
// at no cost, so an outage costs at most one deadline now and then. Failures are
// logged and counted, never returned to a dispatch. It is safe for concurrent
// use. See docs/design.md, "Fleet tier (remote)".
type Store struct {
	url    string // the URL as given; empty for New's
	name   string // the URL, or what New's bucket is called, for messages
	bucket *blob.Bucket
	owned  bool // Close closes the bucket (Open's, not New's)
	opts   Options
	log    hclog.Logger

	mu        sync.Mutex
	downUntil time.Time
	backoff   time.Duration

	queue  *queue
	fleet  fleet
	counts counters
}

// counters are the Store's counts since Open, as cache.TierUsage reports them.
type counters struct {
	hits, errors, writes, dropped atomic.Uint64
	mu                            sync.Mutex
	misses                        map[cache.MissReason]uint64
}

func (c *counters) miss(r cache.MissReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.misses == nil {
		c.misses = map[cache.MissReason]uint64{}
	}
	c.misses[r]++
}

// Usage returns the Store's counts since [Open]: pipeline-cache hits and misses
// (by reason), failed calls, uploads made and uploads dropped.
func (s *Store) Usage() cache.TierUsage {
	s.counts.mu.Lock()
	misses := map[cache.MissReason]uint64{}
	for r, n := range s.counts.misses {
		misses[r] = n
	}
	s.counts.mu.Unlock()
	return cache.TierUsage{Hits: s.counts.hits.Load(), Misses: misses, Errors: s.counts.errors.Load(),
		Writes: s.counts.writes.Load(), Dropped: s.counts.dropped.Load()}
}

// driverPackage returns the kiln package that links the driver of the object
// store scheme names (it imports gocloud.dev's driver, which registers the
// scheme with gocloud.dev/blob). file:// is built in.
func driverPackage(scheme string) (string, bool) {
	switch scheme {
	case "s3":
		return "github.com/kiln-dev/kiln/remote/s3", true
	case "gs":
		return "github.com/kiln-dev/kiln/remote/gcs", true
	case "azblob":
		return "github.com/kiln-dev/kiln/remote/azure", true
	}
	return "", false
}

// Open opens the fleet tier at rawURL: s3://bucket/prefix?region=…,
// gs://bucket/prefix, azblob://container/prefix, or file:///shared/dir. For
// object stores a path after the bucket becomes the prefix of every object; the
// query parameters are the driver's (see gocloud.dev/blob's URL openers), plus
// kiln_timeout and kiln_flush_timeout (Go durations). Open makes no call to the
// remote; an unreachable remote shows in the first call, and in Check.
//
// file:// is built in; the other schemes need their driver imported by the
// application, as database/sql drivers are: import _
// "github.com/kiln-dev/kiln/remote/s3" (or remote/gcs, remote/azure), or
// gocloud.dev's own driver package (gocloud.dev/blob/s3blob, …), which
// registers the same scheme. A URL whose scheme no imported driver serves is
// an error that names the scheme and the import. The kiln CLI imports them all.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("fleet tier URL %q is not a URL. Fix: set %s to s3://bucket/prefix?region=…, gs://bucket/prefix, azblob://container/prefix or file:///shared/dir", rawURL, Env)
	}
	if !blob.DefaultURLMux().ValidBucketScheme(u.Scheme) {
		return nil, noDriver(rawURL, u.Scheme)
	}
	q := u.Query()
	for param, into := range map[string]*time.Duration{timeoutParam: &opts.Timeout, flushTimeoutParam: &opts.FlushTimeout} {
		if v := q.Get(param); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("fleet tier URL %q: %s=%q is not a positive duration. Fix: write it as 500ms or 2s", rawURL, param, v)
			}
			*into = d
			q.Del(param)
		}
	}
	switch u.Scheme {
	case "file":
		// Temporary files beside their target (never across file systems),
		// and no metadata sidecars: kiln verifies what it reads itself.
		for param, value := range map[string]string{"no_tmp_dir": "true", "metadata": "skip"} {
			if !q.Has(param) {
				q.Set(param, value)
			}
		}
	default:
		if p := strings.Trim(u.Path, "/"); p != "" {
			if q.Has("prefix") {
				return nil, fmt.Errorf("fleet tier URL %q has both a path and a prefix parameter. Fix: give the prefix once", rawURL)
			}
			q.Set("prefix", p+"/")
		}
		u.Path = ""
	}
	u.RawQuery = q.Encode()
	bucket, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("open fleet tier %s: %w. Fix: check the URL's scheme and parameters (s3, gs, azblob or file)", rawURL, err)
	}
	s := newStore(bucket, opts)
	s.url, s.name, s.owned = rawURL, rawURL, true
	return s, nil
}

// noDriver is Open's error for a URL whose scheme no imported driver serves.
func noDriver(rawURL, scheme string) error {
	if pkg, ok := driverPackage(scheme); ok {
		return fmt.Errorf("fleet tier URL %q: no object store driver for the %s scheme is linked into this program. Fix: import _ %q", rawURL, scheme, pkg)
	}
	s3, _ := driverPackage("s3")
	return fmt.Errorf("fleet tier URL %q: no object store driver for the %s scheme is linked into this program (kiln knows s3, gs, azblob and file). Fix: use one of those and import its driver, e.g. import _ %q, or import the gocloud.dev/blob driver that registers %s", rawURL, scheme, s3, scheme)
}

// New makes a fleet tier of a bucket the application opened itself (with the
// gocloud.dev/blob driver it imports; blob.PrefixedBucket gives it a prefix),
// with the same deadlines, backoff and queue as Open's. bucket must not be nil.
// The Store does not own the bucket: Close flushes but leaves it open for the
// application to close.
func New(bucket *blob.Bucket, opts Options) *Store {
	s := newStore(bucket, opts)
	s.name = "the application's bucket"
	return s
}

// newStore is a Store of bucket with opts' zero fields defaulted.
func newStore(bucket *blob.Bucket, opts Options) *Store {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = DefaultFlushTimeout
	}
	if opts.MaxPendingBytes <= 0 {
		opts.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if opts.Backoff <= 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	s := &Store{bucket: bucket, opts: opts, log: opts.Logger.Named("remote")}
	s.queue = newQueue(s)
	return s
}

// URL returns the URL the Store was opened with, empty for New's.
func (s *Store) URL() string { return s.url }

// Timeout returns the deadline of every remote call.
func (s *Store) Timeout() time.Duration { return s.opts.Timeout }

// Close waits for queued uploads (see Flush) and closes the bucket Open
// opened; a bucket given to New stays open.
func (s *Store) Close(ctx context.Context) error {
	s.Flush(ctx)
	if !s.owned {
		return nil
	}
	return s.bucket.Close()
}

// errDown is what a call skipped while the remote is down returns.
var errDown = errors.New("the fleet tier is skipped after a failure")

// isNotFound reports whether err says the object does not exist.
func isNotFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

// do runs fn with the call deadline, unless the remote is down after a failure
// (then it returns errDown at once). A failure other than a missing object is
// counted, logged and marks the remote down for the backoff; a success ends
// the backoff.
func (s *Store) do(ctx context.Context, op string, fn func(context.Context) error) error {
	s.mu.Lock()
	down := time.Now().Before(s.downUntil)
	s.mu.Unlock()
	if down {
		return errDown
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	err := fn(ctx)
	if err != nil && !isNotFound(err) {
		s.fail(op, err)
		return err
	}
	s.mu.Lock()
	s.backoff = 0
	s.mu.Unlock()
	return err
}

// fail counts and logs a failed call and marks the remote down.
func (s *Store) fail(op string, err error) {
	s.counts.errors.Add(1)
	s.mu.Lock()
	wasUp := s.backoff == 0
	if wasUp {
		s.backoff = s.opts.Backoff
	} else {
		s.backoff = min(2*s.backoff, maxBackoff)
	}
	s.downUntil = time.Now().Add(s.backoff)
	backoff := s.backoff
	s.mu.Unlock()
	if wasUp {
		s.log.Warn("fleet tier call failed; working from the local stores", "op", op, "url", s.name, "error", err, "retry_in", backoff)
	} else {
		s.log.Debug("fleet tier call failed", "op", op, "error", err, "retry_in", backoff)
	}
}

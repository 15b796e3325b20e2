package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// CheckReport is what [Store.Check] found.
type CheckReport struct {
	// URL is the fleet tier's URL.
	URL string
	// Reachable: a probe object could be read back (or, when it could not be
	// written, the bucket answered).
	Reachable bool
	// Writable: a probe object could be written.
	Writable bool
	// WriteLatency and ReadLatency are the probe's write and read round trips.
	WriteLatency, ReadLatency time.Duration
	// Error says what failed, ending in a Fix; empty when both worked.
	Error string
}

// Check writes, reads back and deletes a probe object under kiln/v1/doctor/,
// each call with the Store's deadline, and reports reachability, writability
// and latency, for `kiln doctor`. It neither counts nor waits out a backoff.
func (s *Store) Check(ctx context.Context) CheckReport {
	r := CheckReport{URL: s.url}
	probe := fmt.Sprintf("%sdoctor/probe-%016x", layout, rand.Uint64())
	want := []byte("kiln fleet tier probe\n")
	timed := func(fn func(context.Context) error) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		began := time.Now()
		err := fn(ctx)
		return time.Since(began), err
	}
	var err error
	r.WriteLatency, err = timed(func(ctx context.Context) error { return s.bucket.WriteAll(ctx, probe, want, nil) })
	if err != nil {
		_, reachErr := timed(func(ctx context.Context) error {
			_, err := s.bucket.IsAccessible(ctx)
			return err
		})
		r.Reachable = reachErr == nil
		r.Error = fmt.Sprintf("fleet tier %s: writing a probe object failed: %v. Fix: check the URL, the credentials and the bucket's permissions (kiln needs read, write, list and delete under kiln/)", s.name, err)
		if !r.Reachable {
			r.Error = fmt.Sprintf("fleet tier %s is not reachable: %v. Fix: check the URL, the network and the credentials; kiln keeps working from the local stores meanwhile", s.name, err)
		}
		return r
	}
	r.Writable = true
	var got []byte
	r.ReadLatency, err = timed(func(ctx context.Context) error {
		got, err = s.bucket.ReadAll(ctx, probe)
		return err
	})
	switch {
	case err != nil:
		r.Error = fmt.Sprintf("fleet tier %s: reading the probe object back failed: %v. Fix: check the bucket's read permission", s.name, err)
	case !bytes.Equal(got, want):
		r.Error = fmt.Sprintf("fleet tier %s returned %d bytes for a %d-byte probe object. Fix: check what serves the URL", s.name, len(got), len(want))
	default:
		r.Reachable = true
	}
	if _, err := timed(func(ctx context.Context) error { return s.bucket.Delete(ctx, probe) }); err != nil && r.Error == "" {
		r.Error = fmt.Sprintf("fleet tier %s: deleting the probe object failed: %v. Fix: grant delete under kiln/ (used to prune old record publications)", s.name, errors.Unwrap(err))
	}
	return r
}

package remote

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The re-executed test binary publishes records to the fleet tier at urlEnv:
// 20 of its own (publisher number in publisherEnv) and one shared by all, each
// publisher's measurement of it taken at its own time.
const (
	urlEnv       = "KILN_REMOTE_TEST_URL"
	publisherEnv = "KILN_REMOTE_TEST_PUBLISHER"
	sharedFP     = "5f0c00000000000000000000000000ff"
	perPublisher = 20
	publishers   = 8
)

// sharedTime is when publisher p measured the shared record.
func sharedTime(p int) time.Time { return time.Date(2026, 5, 2, 10, 0, p, 0, time.UTC) }

func TestHelperProcess(t *testing.T) {
	url := os.Getenv(urlEnv)
	if url == "" {
		return
	}
	p, _ := strconv.Atoi(os.Getenv(publisherEnv))
	s, err := Open(context.Background(), url, Options{Timeout: 30 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; i < perPublisher; i++ {
		if err := s.PublishTuning(context.Background(), tuning(1000*(p+1)+i, sharedFP, time.Now())); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
	}
	shared := tuning(1, sharedFP, sharedTime(p))
	shared.Record.Unroll = uint32(p)
	if err := s.PublishTuning(context.Background(), shared); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	os.Exit(0)
}

// Eight processes publishing at once lose no record, and of the one they all
// measured, the newest measurement wins.
func TestEightPublishingProcessesLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 8 processes")
	}
	onEachFleet(t, func(t *testing.T, url string) {
		var wg sync.WaitGroup
		errs := make([]error, publishers)
		for p := 0; p < publishers; p++ {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
			cmd.Env = append(os.Environ(), urlEnv+"="+url, publisherEnv+"="+strconv.Itoa(p))
			cmd.Stderr = os.Stderr
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[p] = cmd.Run()
			}()
		}
		wg.Wait()
		for p, err := range errs {
			if err != nil {
				t.Fatalf("publisher %d: %v", p, err)
			}
		}
		reader := open(t, url)
		for p := 0; p < publishers; p++ {
			for i := 0; i < perPublisher; i++ {
				want := tuning(1000*(p+1)+i, sharedFP, time.Time{})
				if got, ok := reader.Tuning(context.Background(), "vulkan", sharedFP, want.Key); !ok || got.Record.Unroll != want.Record.Unroll {
					t.Fatalf("publisher %d's record %d: %+v, %v", p, i, got, ok)
				}
			}
		}
		shared := tuning(1, sharedFP, time.Time{})
		got, ok := reader.Tuning(context.Background(), "vulkan", sharedFP, shared.Key)
		if !ok || got.Record.Unroll != publishers-1 || !got.MeasuredAt.Equal(sharedTime(publishers-1)) {
			t.Fatalf("shared record: %+v, %v; want publisher %d's newest measurement", got, ok, publishers-1)
		}
	})
}

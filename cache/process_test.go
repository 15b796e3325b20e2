package cache

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/proctest"
)

// The re-executed test binary writes entries into the cache named by rootEnv:
// "writer" writes 200 entries over 10 keys and exits; "loop" says "ready" and
// writes until it is killed.
const (
	roleEnv = "KILN_CACHE_TEST_ROLE"
	rootEnv = "KILN_CACHE_TEST_ROOT"
)

// childPayload is writer w's i-th payload: one repeated byte, so a mix of two
// payloads is visible.
func childPayload(w, i int) []byte { return bytes.Repeat([]byte{byte('a' + w)}, 10_000+97*(i%50)) }

func TestHelperProcess(t *testing.T) {
	role := os.Getenv(roleEnv)
	if role == "" {
		return
	}
	c, err := OpenOptions(os.Getenv(rootEnv), Options{})
	if err != nil {
		os.Exit(2)
	}
	w, _ := strconv.Atoi(os.Getenv("KILN_CACHE_TEST_WRITER"))
	for i := 0; role == "loop" || i < 200; i++ {
		if err := c.Write(keyN(i%10), childPayload(w, i)); err != nil {
			os.Exit(3)
		}
		if i == 0 && role == "loop" {
			proctest.Ready()
		}
	}
	if err := c.Flush(context.Background()); err != nil {
		os.Exit(4)
	}
	os.Exit(0)
}

func cacheChild(t *testing.T, role, root string, w int) *exec.Cmd {
	t.Helper()
	return proctest.Child(roleEnv+"="+role, rootEnv+"="+root, "KILN_CACHE_TEST_WRITER="+strconv.Itoa(w))
}

func TestProcessesSharingTheCacheNeverSeeCorruption(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 processes")
	}
	c := openTest(t, Options{})
	var cmds []*exec.Cmd
	for w := 0; w < 4; w++ {
		cmds = append(cmds, cacheChild(t, "writer", c.Root(), w))
	}
	proctest.Start(t, cmds...)
	done := make(chan error, len(cmds))
	for _, cmd := range cmds {
		go func() { done <- cmd.Wait() }()
	}
	for running := len(cmds); running > 0; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("writer process: %v", err)
			}
			running--
		default:
			for i := 0; i < 10; i++ {
				p, ok := mustRead(t, c, keyN(i))
				if ok && (len(p) == 0 || !bytes.Equal(p, bytes.Repeat(p[:1], len(p)))) {
					t.Fatalf("key %d: read a mixed payload of %d bytes", i, len(p))
				}
			}
		}
	}
	if s := stats(t, c); s.Corrupt != 0 || s.Entries != 10 {
		t.Fatalf("Stats = %+v, want 10 entries and no corruption", s)
	}
	if r, err := c.Verify(context.Background()); err != nil || len(r.Removed) != 0 || r.Valid != 10 {
		t.Fatalf("Verify = %+v, %v", r, err)
	}
}

func TestWriterKilledMidWriteLeavesTheCacheValid(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills 10 processes")
	}
	c := openTest(t, Options{})
	for round := 0; round < 10; round++ {
		proctest.KillWhenReady(t, cacheChild(t, "loop", c.Root(), round), 10*time.Millisecond)
		r, err := c.Verify(context.Background())
		if err != nil || len(r.Removed) != 0 {
			t.Fatalf("round %d: Verify = %+v, %v", round, r, err)
		}
		for i := 0; i < 10; i++ {
			mustRead(t, c, keyN(i))
		}
	}
	if s := stats(t, c); s.Corrupt != 0 {
		t.Fatalf("Stats = %+v, want no corruption", s)
	}
}

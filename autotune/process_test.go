package autotune

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/proctest"
)

// The re-executed test binary acts on the store file named by pathEnv. Roles:
// "put50" puts 50 records of its own (writer number in writerEnv), saving after
// each; "loop" says "ready" and then puts and saves until it is killed.
const (
	roleEnv   = "KILN_AUTOTUNE_TEST_ROLE"
	pathEnv   = "KILN_AUTOTUNE_TEST_PATH"
	writerEnv = "KILN_AUTOTUNE_TEST_WRITER"
)

func writerKey(w, i int) Key {
	return NewKey(sampleSpec(uint64(w)<<32|uint64(i)), fmt.Sprintf("adapter-%d", w))
}

func TestHelperProcess(t *testing.T) {
	path := os.Getenv(pathEnv)
	w, _ := strconv.Atoi(os.Getenv(writerEnv))
	ctx := context.Background()
	proctest.RunChild(roleEnv, 50, func(role string, i int) int {
		s, err := Load(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if err := s.Put(writerKey(w, i%500), Record{WorkgroupSize: [3]uint32{uint32(i), 1, 1}, Unroll: uint32(w), RecordedAt: "2026-05-02"}); err != nil {
			return 3
		}
		if role == "loop" && i%3 == 2 {
			s.Forget(writerKey(w, (i-1)%500))
		}
		if _, err := s.SaveIfDirty(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
		return 0
	})
}

func storeChild(role, path string, w int) *exec.Cmd {
	return proctest.Child(roleEnv+"="+role, pathEnv+"="+path, writerEnv+"="+strconv.Itoa(w))
}

func TestEightProcessesSavingFiftyRecordsEachLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 8 processes")
	}
	path := storePath(t)
	start := time.Now()
	proctest.RunAll(t, "writer process", 8, func(w int) *exec.Cmd { return storeChild("put50", path, w) })
	elapsed := time.Since(start)
	s := load(t, path)
	if s.Len() != 400 {
		t.Fatalf("%d records on disk, want 400 (8 processes × 50)", s.Len())
	}
	for w := 0; w < 8; w++ {
		for i := 0; i < 50; i++ {
			if r, ok := s.Get(writerKey(w, i)); !ok || r.Unroll != uint32(w) || r.WorkgroupSize[0] != uint32(i) {
				t.Fatalf("writer %d record %d: %+v, %v", w, i, r, ok)
			}
		}
	}
	t.Logf("8 processes × 50 saves (400 records, each save a locked re-read, merge and atomic replace): %v wall", elapsed)
}

func TestProcessKilledWhileSavingNeverLeavesAnUnparsableFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills 30 processes")
	}
	path := storePath(t)
	for round := 0; round < 30; round++ {
		proctest.KillWhenReady(t, storeChild("loop", path, round%4), 15*time.Millisecond)
		if _, err := Load(path); err != nil {
			t.Fatalf("round %d: after a SIGKILL mid-save the file does not parse: %v", round, err)
		}
	}
	// The lock died with its holder, and the next save clears the killed writers'
	// temporary files.
	s := load(t, path)
	put(t, s, NewKey(sampleSpec(1), "final"), sampleRecord(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.SaveIfDirty(ctx); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if e.Name() != "autotune.toml" && e.Name() != "autotune.toml.lock" {
			t.Errorf("left over: %s", e.Name())
		}
	}
}

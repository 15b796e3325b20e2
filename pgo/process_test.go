package pgo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/proctest"
)

// The re-executed test binary certifies ops into the table named by pathEnv.
// Roles: "certify25" certifies 25 ops of its own (writer number in writerEnv),
// saving after each; "loop" says "ready" and then certifies and saves until it is
// killed.
const (
	roleEnv   = "KILN_PGO_TEST_ROLE"
	pathEnv   = "KILN_PGO_TEST_PATH"
	writerEnv = "KILN_PGO_TEST_WRITER"
)

func TestHelperProcess(t *testing.T) {
	path := os.Getenv(pathEnv)
	w, _ := strconv.Atoi(os.Getenv(writerEnv))
	ctx := context.Background()
	proctest.RunChild(roleEnv, 25, func(_ string, i int) int {
		tbl, err := Load(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		op := fmt.Sprintf("op.%d.%d", w, i%200)
		backends := []Candidate{fake("vulkan:0", time.Duration(w+1)), fake("cpu-ref", time.Duration(100+i))}
		if _, err := tbl.Certify(ctx, op, testProgram, nil, Config{}, backends); err != nil {
			return 3
		}
		if _, err := tbl.Save(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
		return 0
	})
}

func tableChild(role, path string, w int) *exec.Cmd {
	return proctest.Child(roleEnv+"="+role, pathEnv+"="+path, writerEnv+"="+strconv.Itoa(w))
}

func TestProcessesSavingRoutesLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 processes")
	}
	path := tablePath(t)
	proctest.RunAll(t, "writer process", 4, func(w int) *exec.Cmd { return tableChild("certify25", path, w) })
	tbl := loadTable(t, path)
	if tbl.Len() != 100 {
		t.Fatalf("%d routes, want 100 (4 processes × 25)", tbl.Len())
	}
	for w := 0; w < 4; w++ {
		for i := 0; i < 25; i++ {
			r, ok := tbl.Route(fmt.Sprintf("op.%d.%d", w, i))
			if !ok || r.Backend != "vulkan:0" || r.Observations[0].MedianNs != int64(w+1) {
				t.Fatalf("writer %d op %d: %+v, %v", w, i, r, ok)
			}
		}
	}
}

func TestProcessKilledWhileSavingNeverLeavesAnUnparsableTable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills 15 processes")
	}
	path := tablePath(t)
	for round := 0; round < 15; round++ {
		proctest.KillWhenReady(t, tableChild("loop", path, round), 15*time.Millisecond)
		if _, err := Load(path); err != nil {
			t.Fatalf("round %d: after a SIGKILL mid-save the table does not parse: %v", round, err)
		}
	}
}

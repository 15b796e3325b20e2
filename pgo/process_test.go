package pgo

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
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
	role := os.Getenv(roleEnv)
	if role == "" {
		return
	}
	path := os.Getenv(pathEnv)
	w, _ := strconv.Atoi(os.Getenv(writerEnv))
	ctx := context.Background()
	for i := 0; role == "loop" || i < 25; i++ {
		tbl, err := Load(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		op := fmt.Sprintf("op.%d.%d", w, i%200)
		backends := []Backend{fake("vulkan:0", time.Duration(w+1)), fake("cpu-ref", time.Duration(100+i))}
		if _, err := tbl.Certify(ctx, op, testProgram, nil, Config{}, backends); err != nil {
			os.Exit(3)
		}
		if _, err := tbl.Save(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		if i == 0 && role == "loop" {
			os.Stdout.WriteString("ready\n")
		}
	}
	os.Exit(0)
}

func tableChild(role, path string, w int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, pathEnv+"="+path, writerEnv+"="+strconv.Itoa(w))
	cmd.Stderr = os.Stderr
	return cmd
}

func TestProcessesSavingRoutesLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 processes")
	}
	path := tablePath(t)
	var cmds []*exec.Cmd
	for w := 0; w < 4; w++ {
		cmd := tableChild("certify25", path, w)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer process: %v", err)
		}
	}
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
		cmd := tableChild("loop", path, round)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child did not start: %q, %v", line, err)
		}
		time.Sleep(time.Duration(rand.IntN(15_000)) * time.Microsecond)
		cmd.Process.Kill()
		cmd.Wait()
		if _, err := Load(path); err != nil {
			t.Fatalf("round %d: after a SIGKILL mid-save the table does not parse: %v", round, err)
		}
	}
}

package filelock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/proctest"
)

// The re-executed test binary reads its role and target from these variables.
const (
	roleEnv   = "KILN_FILELOCK_TEST_ROLE"
	targetEnv = "KILN_FILELOCK_TEST_TARGET"
)

// TestHelperProcess is the child of the multi-process tests. Roles:
// "hold" locks, says "held", waits for stdin to close, unlocks;
// "hold-forever" locks, says "held" and waits to be killed;
// "count" increments the number in the target file 50 times under the lock.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(roleEnv)
	if role == "" {
		return
	}
	target := os.Getenv(targetEnv)
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	switch role {
	case "hold", "hold-forever":
		l, err := Acquire(ctx, target)
		if err != nil {
			fail(err)
		}
		os.Stdout.WriteString("held\n")
		if role == "hold-forever" {
			time.Sleep(time.Hour)
		}
		bufio.NewReader(os.Stdin).ReadString('\n')
		if err := l.Unlock(); err != nil {
			fail(err)
		}
	case "count":
		for i := 0; i < 50; i++ {
			l, err := Acquire(ctx, target)
			if err != nil {
				fail(err)
			}
			data, err := os.ReadFile(target)
			if err != nil && !os.IsNotExist(err) {
				fail(err)
			}
			n, _ := strconv.Atoi(string(data))
			if err := os.WriteFile(target, []byte(strconv.Itoa(n+1)), 0o644); err != nil {
				fail(err)
			}
			if err := l.Unlock(); err != nil {
				fail(err)
			}
		}
	}
	os.Exit(0)
}

func child(t *testing.T, role, target string) *exec.Cmd {
	t.Helper()
	return proctest.Child(roleEnv+"="+role, targetEnv+"="+target)
}

// startHolder starts a child that holds target's lock, and waits until it does.
func startHolder(t *testing.T, role, target string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := child(t, role, target)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("holder did not take the lock: %q, %v", line, err)
	}
	return cmd, stdin
}

func tryAcquire(t *testing.T, target string, wait time.Duration) (*Lock, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return Acquire(ctx, target)
}

func TestLockExcludesAnotherHolderInTheSameProcess(t *testing.T) {
	target := filepath.Join(t.TempDir(), "store.toml")
	l, err := Acquire(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(PathFor(target)); err != nil {
		t.Fatalf("lock file not created: %v", err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("Acquire touched the guarded file: %v", err)
	}
	if _, err := tryAcquire(t, target, 30*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Acquire while held: err = %v, want a deadline error", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatalf("second Unlock: %v", err)
	}
	l2, err := tryAcquire(t, target, 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire after Unlock: %v", err)
	}
	l2.Unlock()
}

func TestAcquireWaitErrorNamesTheLockAndHasFix(t *testing.T) {
	target := filepath.Join(t.TempDir(), "pgo.toml")
	l, err := Acquire(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Acquire(ctx, target)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), PathFor(target)) || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("err = %v", err)
	}
}

func TestAcquireInMissingDirectoryFails(t *testing.T) {
	_, err := Acquire(context.Background(), filepath.Join(t.TempDir(), "no", "such", "f"))
	if err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("err = %v, want an error with a Fix", err)
	}
}

func TestLockHeldByAnotherProcess(t *testing.T) {
	target := filepath.Join(t.TempDir(), "autotune.toml")
	cmd, stdin := startHolder(t, "hold", target)
	if _, err := tryAcquire(t, target, 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while another process holds the lock: err = %v, want a deadline error", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	l, err := tryAcquire(t, target, 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire after the holder released: %v", err)
	}
	l.Unlock()
}

func TestKilledHolderReleasesTheLock(t *testing.T) {
	target := filepath.Join(t.TempDir(), "autotune.toml")
	cmd, _ := startHolder(t, "hold-forever", target)
	if _, err := tryAcquire(t, target, 20*time.Millisecond); err == nil {
		t.Fatal("Acquire succeeded while the holder runs")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	l, err := tryAcquire(t, target, 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	l.Unlock()
}

func TestLockSerialisesProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 processes")
	}
	target := filepath.Join(t.TempDir(), "counter")
	proctest.RunAll(t, "counter child", 4, func(int) *exec.Cmd { return child(t, "count", target) })
	data, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "200" {
		t.Fatalf("counter = %s, want 200 (4 processes × 50 locked increments)", data)
	}
}

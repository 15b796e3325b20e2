package proctest

import (
	"bufio"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"time"
)

// ReadyLine is what a looping child writes on its standard output once it has
// done its first piece of work; Ready writes it.
const ReadyLine = "ready\n"

// Ready tells the parent that the child is under way (see KillWhenReady).
func Ready() { os.Stdout.WriteString(ReadyLine) }

// Child returns the test binary re-executed to run only TestHelperProcess, with
// env ("NAME=value") added to this process's environment and its standard error
// passed through.
func Child(env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// Start starts each command, failing the test if one does not start.
func Start(t testing.TB, cmds ...*exec.Cmd) {
	t.Helper()
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
}

// Wait waits for each command, failing the test with "<what>: <error>" if one
// fails.
func Wait(t testing.TB, what string, cmds ...*exec.Cmd) {
	t.Helper()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// KillWhenReady starts cmd, waits for its ReadyLine, lets it run for a random
// time below maxDelay, kills it and waits for it to end. The test fails if the
// child does not say it is ready or cannot be killed.
func KillWhenReady(t testing.TB, cmd *exec.Cmd, maxDelay time.Duration) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != ReadyLine {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child did not start: %q, %v", line, err)
	}
	time.Sleep(time.Duration(rand.Int64N(int64(maxDelay))))
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// RunAll starts the children child(0), ..., child(n-1) together and waits for
// them all, failing the test with "<what>: <error>" if one fails.
func RunAll(t testing.TB, what string, n int, child func(w int) *exec.Cmd) {
	t.Helper()
	cmds := make([]*exec.Cmd, n)
	for w := range cmds {
		cmds[w] = child(w)
	}
	Start(t, cmds...)
	Wait(t, what, cmds...)
}

// RunChild is the child side of a TestHelperProcess. When the variable roleEnv
// is set it calls step with its value and i = 0, 1, ...: n times, or until the
// child is killed for the role "loop" (which says Ready after the first step);
// then it exits with status 0, or at once with a nonzero status step returns.
// In the parent (roleEnv unset) it returns at once.
func RunChild(roleEnv string, n int, step func(role string, i int) (status int)) {
	role := os.Getenv(roleEnv)
	if role == "" {
		return
	}
	for i := 0; role == "loop" || i < n; i++ {
		if status := step(role, i); status != 0 {
			os.Exit(status)
		}
		if i == 0 && role == "loop" {
			Ready()
		}
	}
	os.Exit(0)
}

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

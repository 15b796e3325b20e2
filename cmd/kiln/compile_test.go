package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// closedPipe returns the write end of a pipe whose reader is already closed, as
// stdout is for `kiln compile --dis | head` once head has read its lines.
func closedPipe(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close() })
	return w
}

// A reader that closes stdout early (kiln compile --dis | head) ends the
// command quietly, with exit status 0: neither the disassembly nor the code of
// -o - is blamed on the module or reported as an error.
func TestCompileToAClosedPipeEndsQuietly(t *testing.T) {
	dir := emitterPlugins(t)
	cases := [][]string{
		{"compile", "--kernel", "matmul_reg", "--backend", "vulkan", "--emit", "spirv", "-o", "-"},
		{"compile", "--kernel", "matmul_reg", "--backend", "cuda", "--emit", "ptx", "-o", "-"},
	}
	if _, err := exec.LookPath("spirv-dis"); err == nil {
		cases = append(cases, []string{"compile", "--kernel", "matmul_reg", "--dis"})
	} else {
		t.Log("spirv-dis is not installed; --dis into a closed pipe was not checked")
	}
	for _, args := range cases {
		var errOut bytes.Buffer
		code := execute(context.Background(), append([]string{"--timeout", "2m", "--plugins", dir}, args...), closedPipe(t), &errOut)
		if code != 0 || errOut.Len() != 0 {
			t.Errorf("%v into a closed pipe: exit %d, stderr %q; want 0 and nothing", args, code, errOut.String())
		}
	}
}

// The kiln executable in a shell pipeline whose reader is gone: it dies of
// SIGPIPE (the status `| head` expects) or exits 0, and says nothing.
func TestCompileExecutableIntoAClosedPipe(t *testing.T) {
	if _, err := exec.LookPath("spirv-dis"); err != nil {
		t.Skip("spirv-dis is not installed")
	}
	dir := emitterPlugins(t)
	bin := buildKiln(t)
	c := exec.Command(bin, "--plugins", dir, "compile", "--kernel", "matmul_reg", "--dis")
	c.Stdout = closedPipe(t)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	err := c.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGPIPE {
			t.Fatalf("kiln compile --dis into a closed pipe: %v; want exit 0 or SIGPIPE\n%s", err, stderr.String())
		}
	default:
		t.Fatal(err)
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Fatalf("kiln compile --dis into a closed pipe said %q; want nothing", s)
	}
}

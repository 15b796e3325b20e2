package pluginapi

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestServeVersionPrintsThePluginsVersion runs a built plugin binary (this
// test binary serving a fake backend) with --version, by hand as an operator
// would: it prints the backend's id and version instead of go-plugin's "This
// binary is a plugin" banner, and exits 0.
func TestServeVersionPrintsThePluginsVersion(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--version")
	cmd.Env = append(os.Environ(), helperEnv+"=plugin")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("--version: %v\nstdout %q\nstderr %q", err, stdout.String(), stderr.String())
	}
	d := testDescription()
	if got := stdout.String(); !strings.HasPrefix(got, d.ID+" "+d.Version+" (kiln plugin ") || !strings.Contains(got, "protocols 1, 2") {
		t.Fatalf("--version printed %q, want %q first", got, d.ID+" "+d.Version)
	}
	if strings.Contains(stdout.String()+stderr.String(), "This binary is a plugin") {
		t.Fatal("--version printed go-plugin's banner")
	}
}

type describeFails struct{ fakeBackend }

func (*describeFails) Describe(context.Context) (*Description, error) {
	return nil, errors.New("no device. Fix: install one")
}

func TestPrintVersionReportsADescribeFailure(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := printVersion(&out, &errOut, &describeFails{}, []int{ProtocolV2}); code != 1 || out.Len() != 0 || !strings.Contains(errOut.String(), "no device. Fix: install one") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	if code := printVersion(&out, &errOut, &fakeBackend{}, []int{ProtocolV2}); code != 0 || !strings.Contains(out.String(), "protocols 2,") {
		t.Fatalf("exit %d, stdout %q", code, out.String())
	}
}

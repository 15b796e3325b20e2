package plugintest

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Log is a bytes.Buffer safe for the plugin client's concurrent log writes.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Binary is a plugin executable: the main package in the test's directory,
// built on first use, once per test binary, or a prebuilt one an environment
// variable names.
type Binary struct {
	name, env string

	once  sync.Once
	path  string
	err   error
	built bool
}

// Build returns the Binary of the plugin named name ("kiln-backend-cuda"). env,
// when not empty, names an environment variable that may hold the path of a
// prebuilt one to use instead (for a test binary copied to a machine without
// Go).
func Build(name, env string) *Binary { return &Binary{name: name, env: env} }

// Path returns the executable's path, building it on the first call.
func (b *Binary) Path() (string, error) {
	b.once.Do(func() {
		if b.env != "" {
			if path := os.Getenv(b.env); path != "" {
				b.path = path
				return
			}
		}
		dir, err := os.MkdirTemp("", b.name+"-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, b.name)
		if out, err := exec.Command("go", "build", "-o", b.path, ".").CombinedOutput(); err != nil {
			b.err = errors.New("go build: " + err.Error() + "\n" + string(out))
			return
		}
		b.built = true
	})
	return b.path, b.err
}

// Remove deletes the executable Path built (never a prebuilt one); TestMain
// calls it after the tests. Path builds nothing after it.
func (b *Binary) Remove() {
	b.once.Do(func() {})
	if b.built {
		os.RemoveAll(filepath.Dir(b.path))
	}
}

// Start starts the plugin as the host does, with extra environment variables
// (NAME=value), and returns its Backend, its log and a function that stops it.
func (b *Binary) Start(tb testing.TB, env ...string) (pluginapi.Backend, *Log, func()) {
	tb.Helper()
	path, err := b.Path()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), env...)
	logs := &Log{}
	logger := hclog.New(&hclog.LoggerOptions{Name: "host", Output: logs, Level: hclog.Debug})
	client := plugin.NewClient(pluginapi.ClientConfig(cmd, logger))
	be, err := pluginapi.Dispense(client)
	if err != nil {
		client.Kill()
		tb.Fatalf("start %s: %v\nlog:\n%s", path, err, logs)
	}
	return be, logs, client.Kill
}

// Usable describes b and checks that its id is id and that it has adapters.
// When adapter 0 is unavailable it checks that the reason says how to fix it
// and skips t, or fails t when the environment variable require is "1".
func Usable(t testing.TB, ctx context.Context, b pluginapi.Backend, id, require string) *pluginapi.Description {
	t.Helper()
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != id || len(d.Adapters) == 0 {
		t.Fatalf("description %+v, want id %s with adapters", d, id)
	}
	if a := d.Adapters[0]; !a.Available {
		if !strings.Contains(a.Reason, "Fix: ") {
			t.Errorf("unavailable without a Fix: %q", a.Reason)
		}
		if os.Getenv(require) == "1" {
			t.Fatalf("%s=1 but adapter 0 is unavailable: %s", require, a.Reason)
		}
		t.Skipf("no usable %s device (%s); set %s=1 to fail instead", id, a.Reason, require)
	}
	return d
}

// VectorAdd runs the corpus's vector_add through b as the host does: Open of
// adapter 0, Compile (blob checks the blob it returns), a Dispatch of 100000
// elements checked against the reference, Release, a Dispatch of the released
// pipeline that must be a RejectedError, and Close. It returns the first
// Dispatch's result.
func VectorAdd(t testing.TB, ctx context.Context, b pluginapi.Backend, blob func([]byte) error) *pluginapi.DispatchResult {
	t.Helper()
	if err := b.Open(ctx, 0); err != nil {
		t.Fatal(err)
	}
	k, _ := kernels.Lookup("vector_add")
	c := k.NewCase(rand.New(rand.NewPCG(1, 2)), 100_000)
	comp, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: k.Program()})
	if err != nil {
		t.Fatal(err)
	}
	if err := blob(comp.Blob); err != nil {
		t.Error(err)
	}
	res, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: comp.Pipeline, Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Check(res.Outputs, k.Reference(c)); err != nil {
		t.Error(err)
	}
	if err := b.Release(ctx, comp.Pipeline); err != nil {
		t.Error(err)
	}
	_, err = b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: comp.Pipeline, Grid: c.Grid})
	var rejected *pluginapi.RejectedError
	if !errors.As(err, &rejected) {
		t.Errorf("dispatch of a released pipeline through the wire = %v, want a RejectedError", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Error(err)
	}
	return res
}

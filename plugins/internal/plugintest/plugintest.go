package plugintest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/internal/syncbuf"
)

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
// (NAME=value), and returns its connection, its log and a function that stops
// it.
func (b *Binary) Start(tb testing.TB, env ...string) (*client.Conn, *syncbuf.Buffer, func()) {
	tb.Helper()
	path, err := b.Path()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), env...)
	logs := &syncbuf.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Name: "host", Output: logs, Level: hclog.Debug})
	pc := plugin.NewClient(client.Config(cmd, logger))
	conn, err := client.Dispense(pc)
	if err != nil {
		pc.Kill()
		tb.Fatalf("start %s: %v\nlog:\n%s", path, err, logs)
	}
	return conn, logs, pc.Kill
}

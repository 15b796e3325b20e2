package host

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
)

// pluginRunner starts and watches one plugin process for go-plugin (its
// ClientConfig.RunnerFunc), so that the host decides how a plugin is started:
// from pluginCommand (no stdin, the host's pid, a parent-death signal),
// after the pin check, and with its output watched. It records the first line
// the plugin writes to stdout (the handshake, for diagnosis), keeps the tail of
// its stderr, rate-limits the stderr lines go-plugin logs, and notes when the
// process exited. See docs/design.md, "Supervision and reliability".
type pluginRunner struct {
	cmd    *exec.Cmd
	path   string
	tail   *stderrTail
	limit  *lineLimiter
	stdout io.ReadCloser // what go-plugin reads the handshake from
	stderr io.ReadCloser // the rate-limited stderr go-plugin logs

	rawStdout, rawStderr io.ReadCloser

	mu        sync.Mutex
	killed    bool // Kill was called: a later Start refuses
	releasing bool // Kill started releasePipes
	pid       int
	startedAt time.Time
	firstLine string
	gotLine   bool
	exited    bool
	exitedAt  time.Time
	state     *os.ProcessState
	exitCh    chan struct{} // closed when the process has been waited for
}

var _ runner.Runner = (*pluginRunner)(nil)

// newRunner prepares the command for path. spec is go-plugin's command
// template, whose environment carries the handshake variables (magic cookie,
// protocol versions, socket directory); env adds the host's (the transport
// certificates).
func newRunner(path string, spec *exec.Cmd, env []string, tail *stderrTail, limit *lineLimiter) (*pluginRunner, error) {
	cmd := pluginCommand(path)
	cmd.Env = append(append(append([]string(nil), spec.Env...), env...), cmd.Env...)
	cmd.Stdin = nil // go-plugin sets the host's stdin on its template; a plugin gets none
	setProcessGroup(cmd)
	r := &pluginRunner{cmd: cmd, path: path, tail: tail, limit: limit, exitCh: make(chan struct{})}
	var err error
	if r.rawStdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if r.rawStderr, err = cmd.StderrPipe(); err != nil {
		return nil, err
	}
	r.stdout = &lineRecorder{r: r.rawStdout, record: r.recordLine}
	pr, pw := io.Pipe()
	r.stderr = pr
	go r.copyStderr(pw)
	return r, nil
}

// recordLine keeps the first line the plugin wrote to stdout.
func (r *pluginRunner) recordLine(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.gotLine {
		r.firstLine, r.gotLine = line, true
	}
}

// handshakeLine returns the first stdout line, if one came.
func (r *pluginRunner) handshakeLine() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstLine, r.gotLine
}

// copyStderr feeds every stderr line to the tail and passes the lines the rate
// limit allows on to go-plugin, which logs them under the plugin's name.
func (r *pluginRunner) copyStderr(w *io.PipeWriter) {
	br := bufio.NewReaderSize(r.rawStderr, 64<<10)
	forward := true
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			_, _ = r.tail.Write(append(line, '\n'))
			if forward && r.limit.allow() {
				// When go-plugin stops reading, keep draining so the plugin never blocks.
				_, werr := w.Write(append(line, '\n'))
				forward = werr == nil
			}
		}
		if err != nil {
			w.Close()
			return
		}
	}
}

// maxLineBytes bounds one log line; the rest of a longer line is dropped.
const maxLineBytes = 16 << 10

// readLine reads one line without its newline, keeping at most maxLineBytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(line) < maxLineBytes {
			line = append(line, chunk[:min(len(chunk), maxLineBytes-len(line))]...)
		}
		if err != nil || !isPrefix {
			return line, err
		}
	}
}

// Start starts the process.
func (r *pluginRunner) Start(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.killed {
		return errors.New("the host stopped the plugin before it started")
	}
	if err := r.cmd.Start(); err != nil {
		return err
	}
	r.pid, r.startedAt = r.cmd.Process.Pid, time.Now()
	return nil
}

// outlived reports whether the process was SIGKILLed after running at least
// limit: go-plugin's start timeout killed it, rather than it exiting on its own.
func (r *pluginRunner) outlived(limit time.Duration) bool {
	exited, _, how := r.exitInfo()
	r.mu.Lock()
	ran := time.Since(r.startedAt)
	r.mu.Unlock()
	return !exited || (strings.Contains(how, "signal: killed") && ran >= limit)
}

// Wait waits for the process to exit and records when it did.
func (r *pluginRunner) Wait(context.Context) error {
	err := r.cmd.Wait()
	r.mu.Lock()
	if !r.exited {
		r.exited, r.exitedAt, r.state = true, time.Now(), r.cmd.ProcessState
		close(r.exitCh)
	}
	r.mu.Unlock()
	return err
}

// Kill ends the process at once, with every process of its process group
// (what a wrapper script started); it is safe to call more than once. A
// descendant that left the group may still hold the plugin's stdout or stderr
// open, and go-plugin waits for both to close before it reaps the process:
// Kill therefore closes the host's ends of both pipes when the exit is not
// recorded within pipeGrace, so that nothing waits on such a descendant.
func (r *pluginRunner) Kill(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killed = true
	if r.cmd.Process == nil || r.exited {
		return nil
	}
	if !r.releasing {
		r.releasing = true
		go r.releasePipes(pipeGrace)
	}
	return killGroup(r.cmd.Process)
}

// pipeGrace is how long a killed plugin's output may take to reach the host
// (its last stderr lines go to the crash report) before its pipes are closed.
const pipeGrace = time.Second

// releasePipes closes the host's ends of the plugin's stdout and stderr unless
// the process's exit is recorded within grace.
func (r *pluginRunner) releasePipes(grace time.Duration) {
	if r.waitExit(grace) {
		return
	}
	_ = r.rawStdout.Close() // the readers stop with an error; go-plugin then reaps the process
	_ = r.rawStderr.Close()
}

// Stdout is where go-plugin reads the handshake line.
func (r *pluginRunner) Stdout() io.ReadCloser { return r.stdout }

// Stderr is the rate-limited stderr go-plugin logs.
func (r *pluginRunner) Stderr() io.ReadCloser { return r.stderr }

// Name is the executable's path; go-plugin logs the plugin's lines under its base name.
func (r *pluginRunner) Name() string { return r.path }

// ID is the process id.
func (r *pluginRunner) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pid == 0 {
		return ""
	}
	return fmt.Sprint(r.pid)
}

// processID is the process id, 0 before Start.
func (r *pluginRunner) processID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pid
}

// Diagnose adds nothing: the host diagnoses start failures itself (startError).
func (r *pluginRunner) Diagnose(context.Context) string { return "" }

// PluginToHost and HostToPlugin keep addresses as they are: both sides share
// the machine.
func (r *pluginRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

// HostToPlugin keeps addresses as they are.
func (r *pluginRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

// exitInfo reports whether the process has exited, when, and how.
func (r *pluginRunner) exitInfo() (exited bool, at time.Time, how string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.exited {
		return false, time.Time{}, ""
	}
	how = "process state unknown"
	if r.state != nil {
		how = r.state.String()
	}
	return true, r.exitedAt, how
}

// waitExit waits up to limit for the process to exit and reports whether it did.
func (r *pluginRunner) waitExit(limit time.Duration) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-r.exitCh:
		return true
	case <-timer.C:
		return false
	}
}

// lineRecorder passes reads through and hands the first line to record.
type lineRecorder struct {
	r      io.ReadCloser
	record func(string)
	buf    []byte
	done   bool
}

func (l *lineRecorder) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if !l.done {
		l.buf = append(l.buf, p[:n]...)
		if i := strings.IndexByte(string(l.buf), '\n'); i >= 0 {
			l.record(strings.TrimSpace(string(l.buf[:i])))
			l.done, l.buf = true, nil
		} else if len(l.buf) > maxLineBytes || err != nil {
			l.record(strings.TrimSpace(string(l.buf[:min(len(l.buf), maxLineBytes)])))
			l.done, l.buf = true, nil
		}
	}
	return n, err
}

func (l *lineRecorder) Close() error { return l.r.Close() }

// runnerFunc returns the go-plugin RunnerFunc that starts path after check
// (the pin check) passes, and hands the runner to got.
func runnerFunc(path string, env []string, check func() error, tail *stderrTail, limit *lineLimiter, got func(*pluginRunner)) func(hclog.Logger, *exec.Cmd, string) (runner.Runner, error) {
	return func(_ hclog.Logger, spec *exec.Cmd, _ string) (runner.Runner, error) {
		if err := check(); err != nil {
			return nil, err
		}
		r, err := newRunner(path, spec, env, tail, limit)
		if err != nil {
			return nil, err
		}
		got(r)
		return r, nil
	}
}

// secureCheck is go-plugin's SecureConfig check of path against a SHA-256 pin.
func secureCheck(cfg *goplugin.SecureConfig, path string) error {
	ok, err := cfg.Check(path)
	if err != nil {
		return err
	}
	if !ok {
		return goplugin.ErrChecksumsDoNotMatch
	}
	return nil
}

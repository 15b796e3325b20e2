package host

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kiln-dev/kiln/pluginapi"
)

// process is one running instance of a plugin executable.
type process struct {
	client  *goplugin.Client
	backend pluginapi.Backend
	cmd     *exec.Cmd
	stderr  *stderrTail
	pid     int
	// opened records the adapters opened on this process; guarded by plugin.mu.
	opened map[int]bool
}

// stop ends the process at once; it is safe to call more than once.
func (pr *process) stop() {
	if pr.cmd.Process != nil {
		_ = pr.cmd.Process.Kill() // the process may already be gone; Kill below reaps it
	}
	pr.client.Kill()
}

// exit describes how the process ended; call it after stop.
func (pr *process) exit() string {
	if pr.cmd.ProcessState == nil {
		return "process state unknown"
	}
	return pr.cmd.ProcessState.String()
}

// waitExited reports whether the process has exited, waiting up to limit for
// go-plugin to notice: a broken connection is seen slightly before the exit.
func (pr *process) waitExited(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for !pr.client.Exited() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// settings are the supervision parameters and the stores shared by every plugin
// of a host.
type settings struct {
	startTimeout time.Duration
	backoff      time.Duration
	maxBackoff   time.Duration
	log          hclog.Logger
	// stores are the host's persistent stores, which compiles go through.
	stores *stores
	// maxProtocol caps the wire protocol offered to plugins (0: the newest).
	maxProtocol int
}

// plugin supervises one plugin executable: it launches the process, relaunches it
// after a crash (with exponential backoff between consecutive crashes) and turns
// failures into typed errors.
type plugin struct {
	path string
	set  settings
	log  hclog.Logger

	// desc, protocol and startTime are set by the first launch and never change after.
	desc      *pluginapi.Description
	protocol  int
	startTime time.Duration
	// v2 holds protocol 2's host-side state: scratch buffers, pending submits,
	// traffic counters (v2.go).
	v2 v2state

	mu          sync.Mutex
	proc        *process
	launching   chan struct{} // closed when the launch in progress ends
	crashes     int           // consecutive crashes, for the backoff
	restarts    int
	notBefore   time.Time
	closed      bool
	acquisition map[int]time.Duration // measured time of the last real Open per adapter
}

func newPlugin(path string, set settings) *plugin {
	name := filepath.Base(path)
	return &plugin{path: path, set: set, log: set.log.Named(name), acquisition: map[int]time.Duration{}}
}

// name is the plugin's id once started, else its file name.
func (p *plugin) name() string {
	if p.desc != nil {
		return p.desc.ID
	}
	return filepath.Base(p.path)
}

// start launches the plugin for the first time and records its description.
func (p *plugin) start(ctx context.Context) error {
	began := time.Now()
	proc, desc, err := p.launch(ctx)
	if err != nil {
		return err
	}
	p.desc = desc
	p.protocol = proc.client.NegotiatedVersion()
	p.startTime = time.Since(began)
	p.mu.Lock()
	p.proc = proc
	p.mu.Unlock()
	p.log.Debug("plugin started", "id", desc.ID, "version", desc.Version, "pid", proc.pid, "took", p.startTime)
	return nil
}

// launch starts the executable, completes the handshake and reads the description.
func (p *plugin) launch(ctx context.Context) (*process, *pluginapi.Description, error) {
	cmd := exec.Command(p.path)
	tail := &stderrTail{}
	// go-plugin logs the plugin's stderr under the executable's name; what the
	// plugin's code writes to os.Stdout and os.Stderr after the handshake is put
	// under that name too.
	cfg := pluginapi.ClientConfig(cmd, p.set.log)
	cfg.StartTimeout = p.set.startTimeout
	limitProtocols(cfg, p.set.maxProtocol)
	cfg.Stderr = tail
	cfg.SyncStdout = p.log.Named("stdout").StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info})
	cfg.SyncStderr = p.log.Named("stderr").StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info})
	client := goplugin.NewClient(cfg)
	proc := &process{client: client, cmd: cmd, stderr: tail, opened: map[int]bool{}}
	fail := func(what string, err error) (*process, *pluginapi.Description, error) {
		proc.stop()
		// go-plugin's start errors carry a multi-line diagnosis; its first line says it.
		msg, _, _ := strings.Cut(err.Error(), "\n")
		msg = fmt.Sprintf("%s %s: %s", what, p.path, strings.TrimSpace(msg))
		if cmd.ProcessState != nil {
			msg += " (" + cmd.ProcessState.String() + ")"
		}
		if s := tail.summary(); s != "" {
			msg += "; stderr: " + s
		}
		return nil, nil, fmt.Errorf("%s. Fix: make sure it is a kiln plugin built against this kiln's pluginapi that writes nothing to stdout before pluginapi.Serve, or remove it from the plugins directory", msg)
	}
	be, err := pluginapi.Dispense(client)
	if err != nil {
		return fail("handshake with", err)
	}
	proc.backend = be
	if cmd.Process != nil {
		proc.pid = cmd.Process.Pid
	}
	dctx, cancel := context.WithTimeout(ctx, p.set.startTimeout)
	defer cancel()
	desc, err := be.Describe(dctx)
	if err != nil {
		return fail("describe of", err)
	}
	if err := checkDescription(desc); err != nil {
		return fail("description from", err)
	}
	if p.desc != nil && desc.ID != p.desc.ID {
		return fail("relaunch of", fmt.Errorf("the plugin now reports id %q instead of %q", desc.ID, p.desc.ID))
	}
	return proc, desc, nil
}

// checkDescription rejects descriptions the host cannot work with.
func checkDescription(d *pluginapi.Description) error {
	if d == nil {
		return errors.New("empty description")
	}
	if d.ID == "" || strings.ContainsAny(d.ID, ": \t\n") {
		return fmt.Errorf("invalid backend id %q (it must be non-empty, without ':' or spaces)", d.ID)
	}
	seen := map[int]bool{}
	for _, a := range d.Adapters {
		if a.Index < 0 || seen[a.Index] {
			return fmt.Errorf("adapter index %d is negative or repeated", a.Index)
		}
		seen[a.Index] = true
	}
	return nil
}

// current returns the running process, relaunching the plugin when it is down.
// Relaunches after consecutive crashes wait an exponentially growing backoff.
func (p *plugin) current(ctx context.Context) (*process, error) {
	p.mu.Lock()
	for {
		switch {
		case p.closed:
			p.mu.Unlock()
			return nil, &ClosedError{Backend: p.name()}
		case p.proc != nil:
			proc := p.proc
			p.mu.Unlock()
			return proc, nil
		case p.launching != nil:
			wait := p.launching
			p.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, fmt.Errorf("waiting for backend %s to relaunch: %w", p.name(), ctx.Err())
			}
			p.mu.Lock()
			continue
		}
		if delay := time.Until(p.notBefore); delay > 0 {
			p.mu.Unlock()
			timer := time.NewTimer(delay)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return nil, fmt.Errorf("backend %s is down and relaunches in %v: %w", p.name(), delay.Round(time.Millisecond), ctx.Err())
			}
			p.mu.Lock()
			continue
		}
		break
	}
	done := make(chan struct{})
	p.launching = done
	p.mu.Unlock()

	proc, _, err := p.launch(ctx)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.launching = nil
	close(done)
	if err != nil {
		p.crashes++
		p.notBefore = time.Now().Add(p.backoff())
		return nil, fmt.Errorf("relaunching backend %s: %w", p.name(), err)
	}
	if p.closed {
		proc.stop()
		return nil, &ClosedError{Backend: p.name()}
	}
	p.restarts++
	p.proc = proc
	p.log.Info("plugin relaunched", "pid", proc.pid, "restarts", p.restarts)
	return proc, nil
}

// backoff is the wait before the next launch after p.crashes consecutive crashes.
func (p *plugin) backoff() time.Duration {
	d := p.set.backoff
	for i := 1; i < p.crashes && d < p.set.maxBackoff; i++ {
		d *= 2
	}
	return min(d, p.set.maxBackoff)
}

// drop forgets proc after a crash or timeout and stops it.
func (p *plugin) drop(proc *process) {
	p.mu.Lock()
	if p.proc == proc {
		p.proc = nil
		p.crashes++
		p.notBefore = time.Now().Add(p.backoff())
	}
	p.mu.Unlock()
	proc.stop()
}

// healthy records a successful dispatch, which resets the crash backoff.
func (p *plugin) healthy() {
	p.mu.Lock()
	p.crashes = 0
	p.mu.Unlock()
}

// open prepares adapter on proc once and returns the acquisition time: the
// duration of the Open call that prepared it.
func (p *plugin) open(ctx context.Context, proc *process, adapter int) (time.Duration, error) {
	p.mu.Lock()
	if proc.opened[adapter] {
		took := p.acquisition[adapter]
		p.mu.Unlock()
		return took, nil
	}
	p.mu.Unlock()
	began := time.Now()
	if err := proc.backend.Open(ctx, adapter); err != nil {
		return 0, err
	}
	took := time.Since(began)
	p.mu.Lock()
	proc.opened[adapter] = true
	p.acquisition[adapter] = took
	p.mu.Unlock()
	return took, nil
}

// classify turns the error of operation op on proc into the error the caller
// sees. Errors the plugin reported (rejected, device, unavailable) pass through;
// a passed deadline kills the process (it may be hung) and gives a TimeoutError;
// a dead process or a broken connection gives a CrashedError. The process is
// dropped in the last two cases, so the next use relaunches the plugin.
func (p *plugin) classify(ctx context.Context, proc *process, backend, op string, began time.Time, err error) error {
	var rejected *pluginapi.RejectedError
	var device *pluginapi.DeviceError
	var unavailable *pluginapi.UnavailableError
	if errors.As(err, &rejected) || errors.As(err, &device) || errors.As(err, &unavailable) {
		return fmt.Errorf("backend %s: %s: %w", backend, op, err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		p.log.Warn("deadline passed; stopping the plugin", "op", op, "pid", proc.pid)
		p.drop(proc)
		return &TimeoutError{Backend: backend, Op: op, After: time.Since(began)}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("backend %s: %s: %w", backend, op, ctx.Err())
	}
	exited := proc.waitExited(2 * time.Second)
	if !exited && status.Code(err) != codes.Unavailable {
		return fmt.Errorf("backend %s: %s failed: %w", backend, op, err)
	}
	p.drop(proc)
	how := proc.exit()
	if !exited {
		how = "connection lost; the host stopped the process"
	}
	p.log.Error("plugin crashed", "op", op, "pid", proc.pid, "exit", how)
	return &CrashedError{Backend: backend, Op: op, Exit: how, Stderr: proc.stderr.summary()}
}

// close stops the plugin for good: it asks the plugin to release everything, then
// ends the process.
func (p *plugin) close(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	proc := p.proc
	p.proc = nil
	p.mu.Unlock()
	if proc == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	if err := proc.backend.Close(cctx); err != nil {
		p.log.Debug("plugin close failed; stopping it", "error", err)
	}
	proc.shutdown(closeTimeout)
}

// closeTimeout bounds each step of stopping a plugin politely.
const closeTimeout = 2 * time.Second

// shutdown lets go-plugin stop the process gracefully, and kills it if that
// takes longer than limit (a wedged plugin never answers the shutdown call).
func (pr *process) shutdown(limit time.Duration) {
	done := make(chan struct{})
	go func() {
		pr.client.Kill()
		close(done)
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		if pr.cmd.Process != nil {
			_ = pr.cmd.Process.Kill() // it may have exited meanwhile
		}
		<-done
	}
}

// status reports the plugin's current process and restart count.
func (p *plugin) status() (pid, restarts int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		pid = p.proc.pid
	}
	return pid, p.restarts
}

// running returns the running process without launching one.
func (p *plugin) running() *process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc
}

// alive reports whether the plugin has a process that has not exited.
func (p *plugin) alive() bool {
	proc := p.running()
	return proc != nil && !proc.client.Exited()
}

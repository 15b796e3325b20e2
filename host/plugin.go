package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/host/trace"
	"github.com/kiln-dev/kiln/pluginapi"
)

// process is one running instance of a plugin executable.
type process struct {
	client  *goplugin.Client
	backend *client.Conn
	runner  *pluginRunner
	health  grpc_health_v1.HealthClient
	stderr  *stderrTail
	pid     int
	// opened records the adapters opened on this process; guarded by plugin.mu.
	opened map[int]bool

	mu         sync.Mutex
	inflight   int       // calls in progress
	lastAnswer time.Time // last health answer (or the start of a busy period)
	hung       bool      // the hang monitor killed it
	stopped    bool      // the host stopped it on purpose
	done       chan struct{}
}

// markStopped records that the host stops the process on purpose, and closes
// done the first time.
func (pr *process) markStopped() {
	pr.mu.Lock()
	first := !pr.stopped
	pr.stopped = true
	pr.mu.Unlock()
	if first {
		close(pr.done)
	}
}

// stop ends the process at once; it is safe to call more than once.
func (pr *process) stop() {
	pr.markStopped()
	_ = pr.runner.Kill(context.Background()) // it may already be gone; Kill below reaps it
	pr.client.Kill()
}

// exit describes how the process ended.
func (pr *process) exit() string {
	if exited, _, how := pr.runner.exitInfo(); exited {
		return how
	}
	return "process state unknown"
}

// exitedBefore reports whether the process had exited before t.
func (pr *process) exitedBefore(t time.Time) bool {
	exited, at, _ := pr.runner.exitInfo()
	return exited && at.Before(t)
}

// exitWithin waits up to limit, and no longer than ctx lasts, for the process to
// exit, and reports whether it has.
func (pr *process) exitWithin(ctx context.Context, limit time.Duration) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-pr.runner.exitCh:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	exited, _, _ := pr.runner.exitInfo()
	return exited
}

// isHung reports whether the hang monitor killed the process.
func (pr *process) isHung() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.hung
}

// begin and end bracket a call, for the hang monitor.
func (pr *process) begin() {
	pr.mu.Lock()
	if pr.inflight == 0 {
		pr.lastAnswer = time.Now()
	}
	pr.inflight++
	pr.mu.Unlock()
}

func (pr *process) end() {
	pr.mu.Lock()
	pr.inflight--
	pr.mu.Unlock()
}

// settings are the supervision parameters and the stores shared by every plugin
// of a host.
type settings struct {
	startTimeout time.Duration
	backoff      time.Duration
	maxBackoff   time.Duration
	hangTimeout  time.Duration
	// failThreshold crashes within failWindow make a plugin failing.
	failThreshold int
	failWindow    time.Duration
	logRate       int
	// auth authenticates the plugin connections (peer credentials and a
	// token, or mutual TLS with host-issued certificates); nil with
	// Options.NoMTLS.
	auth *transportAuth
	log  hclog.Logger
	// stores are the host's persistent stores, which compiles go through.
	stores *stores
	// pins are the trusted checksums; nil when pinning is off.
	pins *pinSet
	// ctx lives as long as the host: launches and relaunches run under it (and
	// the start timeout), never under a caller's context.
	ctx context.Context
	// maxProtocol caps the wire protocol offered to plugins (0: the newest).
	maxProtocol int
	// obs is the host's trace and hook; nil when it has neither.
	obs *observer
}

// plugin supervises one plugin executable: it launches the process, relaunches it
// after a crash (with exponential backoff between consecutive crashes), watches
// it for hangs, counts its failures (a plugin that crashes too often is failing
// until it succeeds again) and turns failures into typed errors. See
// docs/design.md, "Supervision and reliability".
type plugin struct {
	path  string
	set   settings
	log   hclog.Logger
	stats *pluginStats
	logs  *lineLimiter // shared by every process of the plugin

	startOnce sync.Once
	ensured   atomic.Bool   // the first start was asked for
	started   chan struct{} // closed when the first start has finished
	// desc, protocol and startTime are set by the first launch, before started
	// is closed, and never change after.
	desc      *pluginapi.Description
	protocol  int
	startTime time.Duration
	// v2 holds protocol 2's host-side state: scratch buffers, pending submits,
	// traffic counters (conn.go).
	v2 v2state

	wg sync.WaitGroup // background launches and probes

	mu          sync.Mutex
	startErr    error // why the plugin did not start, or was refused after
	proc        *process
	runner      *pluginRunner // of the launch in progress, so Close can stop it
	launching   chan struct{} // closed when the launch in progress ends
	launchErr   error         // the last relaunch's error
	crashes     int           // consecutive crashes, for the backoff
	restarts    int
	notBefore   time.Time
	closed      bool
	acquisition map[int]time.Duration // measured time of the last real Open per adapter
	failures    failureLog
	probing     bool
}

func newPlugin(path string, set settings) *plugin {
	log := set.log.Named(filepath.Base(path))
	return &plugin{
		path: path, set: set, log: log, stats: newPluginStats(),
		logs: newLineLimiter(set.logRate, log), started: make(chan struct{}), acquisition: map[int]time.Duration{},
	}
}

// name is the plugin's id once started, else its file name.
func (p *plugin) name() string {
	select {
	case <-p.started:
		if p.desc != nil {
			return p.desc.ID
		}
	default:
	}
	return filepath.Base(p.path)
}

// start launches the plugin for the first time and records its description. It
// runs once, under the host's context; the host closes started after it.
func (p *plugin) start() {
	began := time.Now()
	proc, desc, err := p.launch(p.set.ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.startErr = err
		return
	}
	if p.closed {
		proc.stop()
		p.startErr = &ClosedError{Backend: desc.ID}
		return
	}
	p.desc = desc
	p.protocol = proc.client.NegotiatedVersion()
	p.startTime = time.Since(began)
	p.proc = proc
	p.log.Debug("plugin started", "id", desc.ID, "version", desc.Version, "pid", proc.pid, "took", p.startTime)
}

// startError returns why the plugin did not start (nil when it runs); call it
// after started is closed.
func (p *plugin) startError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startErr
}

// refuse retires a started plugin (another one provides its id): it records
// why and stops the process in the background.
func (p *plugin) refuse(err error) {
	p.mu.Lock()
	p.startErr = err
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.close(context.Background())
	}()
}

// launch starts the executable, completes the handshake and reads the
// description, all within the start timeout, under ctx (the host's, never a
// caller's).
func (p *plugin) launch(ctx context.Context) (*process, *pluginapi.Description, error) {
	tail := &stderrTail{}
	proc := &process{stderr: tail, opened: map[int]bool{}, done: make(chan struct{})}
	check := func() error { return p.set.pins.check(p.path) }
	cfg := client.Config(nil, p.set.log)
	cfg.Cmd = nil
	var env []string
	if p.set.auth != nil {
		var err error
		if env, err = p.set.auth.configure(cfg, proc.pluginPID); err != nil {
			return nil, nil, &StartError{Path: p.path, Stage: StartRefused, Detail: err.Error(), Timeout: p.set.startTimeout}
		}
	}
	tr := p.set.obs.tracer()
	var began time.Time
	if tr != nil {
		env = append(env, pluginapi.SpansEnv+"=1", // ship each submit's phases back
			pluginapi.SpanKindsEnv+"="+strconv.Itoa(int(pluginapi.SpanWait))) // launch and wait included
		began = time.Now()
	}
	cfg.RunnerFunc = runnerFunc(p.path, env, check, tail, p.logs, func(r *pluginRunner) {
		proc.runner = r
		p.mu.Lock()
		p.runner = r
		closed := p.closed
		p.mu.Unlock()
		if closed {
			_ = r.Kill(context.Background()) // Close came while the process started
		}
	})
	cfg.StartTimeout = p.set.startTimeout
	limitProtocols(cfg, p.set.maxProtocol)
	cfg.SyncStdout = &limitedWriter{w: p.log.Named("stdout").StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info}), limit: p.logs}
	// What the plugin's code writes to os.Stderr after the handshake crosses
	// go-plugin's stdio stream; the crash report's tail keeps it too.
	cfg.SyncStderr = io.MultiWriter(tail, &limitedWriter{w: p.log.Named("stderr").StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info}), limit: p.logs})
	proc.client = goplugin.NewClient(cfg)
	defer func() {
		p.mu.Lock()
		p.runner = nil
		p.mu.Unlock()
	}()
	refusalFix := "" // the refusal's own Fix, for StartRefused
	fail := func(stage StartStage, detail string) (*process, *pluginapi.Description, error) {
		e := &StartError{Path: p.path, Stage: stage, Detail: detail, Timeout: p.set.startTimeout, Fix: refusalFix}
		if proc.runner != nil {
			_ = proc.runner.Kill(context.Background()) // a wedged plugin never answers go-plugin's shutdown call
		}
		proc.client.Kill()
		if proc.runner != nil {
			proc.runner.waitExit(closeTimeout)
			if exited, _, how := proc.runner.exitInfo(); exited && stage != StartHung && stage != StartDescribeHung {
				e.Exit = how
			}
		}
		e.Stderr = tail.summary()
		return nil, nil, e
	}
	rpc, err := proc.client.Client()
	if err != nil {
		var refused *refusedError
		switch {
		case errors.As(err, &refused):
			refusalFix = refused.fix
			return fail(StartRefused, refused.msg)
		case proc.runner == nil:
			return fail(StartRefused, err.Error())
		}
		line, got := proc.runner.handshakeLine()
		// go-plugin gives up on a silent process when its stdout closes (it
		// exited on its own) or at the start timeout, when it kills it (it hung).
		proc.runner.waitExit(closeTimeout)
		stage, detail := handshakeStage(line, got, !proc.runner.outlived(p.set.startTimeout))
		if detail == "" && stage == StartBadHandshake {
			detail, _, _ = strings.Cut(err.Error(), "\n")
		}
		return fail(stage, detail)
	}
	proc.pid = proc.runner.processID()
	var handshook time.Time
	if tr != nil {
		handshook = time.Now()
		tr.plugin(proc.pid, p.path)
		tr.span("plugin handshake", began, handshook, trace.String("plugin", filepath.Base(p.path)), trace.Int("pid", int64(proc.pid)))
	}
	if v := proc.client.NegotiatedVersion(); client.PluginSets()[v] == nil {
		return fail(StartProtocol, fmt.Sprintf("it negotiated kiln protocol version %d", v))
	}
	be, err := client.Dispense(proc.client)
	if err != nil {
		return fail(StartBadHandshake, err.Error())
	}
	proc.backend = be
	if g, ok := rpc.(*goplugin.GRPCClient); ok {
		proc.health = grpc_health_v1.NewHealthClient(g.Conn)
	}
	dctx, cancel := context.WithTimeout(ctx, p.set.startTimeout)
	defer cancel()
	desc, err := be.Describe(client.WithReceiveLimit(dctx, describeLimit))
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return fail(StartDescribeFailed, "the host was closed")
		case deadlinePassed(dctx, err):
			return fail(StartDescribeHung, "")
		case status.Code(err) == codes.Unavailable || proc.runner.waitExit(100*time.Millisecond):
			proc.runner.waitExit(closeTimeout)
			return fail(StartDescribeExited, "")
		}
		return fail(StartDescribeFailed, err.Error())
	}
	if err := checkDescription(desc); err != nil {
		return fail(StartDescribeFailed, "invalid description: "+err.Error())
	}
	if p.desc != nil && desc.ID != p.desc.ID {
		return fail(StartDescribeFailed, fmt.Sprintf("the plugin now reports id %q instead of %q", desc.ID, p.desc.ID))
	}
	if tr != nil {
		now := time.Now()
		tr.span("plugin describe", handshook, now, trace.String("plugin", desc.ID))
		tr.span("plugin start", began, now, trace.String("plugin", desc.ID), trace.Int("pid", int64(proc.pid)))
	}
	go proc.monitor(p.set.hangTimeout, func() { p.hung(proc) })
	return proc, desc, nil
}

// describeLimit bounds a Describe response.
const describeLimit = 1 << 20

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
// A process that died while idle is dropped first (nothing was lost with it).
// Relaunches after consecutive crashes wait an exponentially growing backoff.
// The relaunch runs in the background under the host's context and start
// timeout; the caller's context only bounds how long it waits for it.
func (p *plugin) current(ctx context.Context) (*process, error) {
	p.mu.Lock()
	for {
		p.reapLocked()
		switch {
		case p.closed:
			p.mu.Unlock()
			return nil, &ClosedError{Backend: p.name()}
		case p.startErr != nil:
			err := p.startErr
			p.mu.Unlock()
			return nil, err
		case p.proc != nil:
			proc := p.proc
			p.mu.Unlock()
			return proc, nil
		case p.launching != nil:
			wait := p.launching
			p.mu.Unlock()
			if err := waitFor(ctx, wait, p.name(), "relaunch"); err != nil {
				return nil, err
			}
			p.mu.Lock()
			if p.proc == nil && p.launchErr != nil && !p.closed {
				err := p.launchErr
				p.mu.Unlock()
				return nil, err
			}
			continue
		}
		if delay := time.Until(p.notBefore); delay > 0 {
			p.mu.Unlock()
			timer := time.NewTimer(delay)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return nil, waitError(ctx, p.name(), fmt.Sprintf("relaunch backoff (%v left)", delay.Round(time.Millisecond)))
			}
			p.mu.Lock()
			continue
		}
		p.relaunchLocked()
	}
}

// reapLocked drops the current process if it has exited (it died while idle:
// nothing was lost with it, but it counts as a crash); p.mu is held.
func (p *plugin) reapLocked() {
	if p.proc == nil {
		return
	}
	exited, _, how := p.proc.runner.exitInfo()
	if !exited {
		return
	}
	proc := p.proc
	p.log.Warn("plugin exited while idle; it is relaunched on next use", "pid", proc.pid, "exit", how)
	p.dropLocked(proc, how)
	go proc.stop() // reaps go-plugin's side; the process is gone already
}

// waitFor waits until ch is closed or ctx is done.
func waitFor(ctx context.Context, ch <-chan struct{}, backend, what string) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return waitError(ctx, backend, what)
	}
}

// waitError is the error of a caller whose context ended while it waited for
// backend: a TimeoutError for a deadline (the plugin is left alone).
func waitError(ctx context.Context, backend, what string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &TimeoutError{Backend: backend, Op: "waiting for " + what}
	}
	return fmt.Errorf("backend %s: waiting for %s: %w", backend, what, ctx.Err())
}

// relaunchLocked starts a relaunch in the background; p.mu is held.
func (p *plugin) relaunchLocked() {
	done := make(chan struct{})
	p.launching = done
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		proc, _, err := p.launch(p.set.ctx)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.launching = nil
		close(done)
		if err != nil {
			p.crashes++
			p.notBefore = time.Now().Add(p.backoff())
			p.launchErr = fmt.Errorf("relaunching backend %s: %w", p.name(), err)
			var se *StartError
			exit, stderr := "", ""
			if errors.As(err, &se) {
				exit, stderr = se.Exit, se.Stderr
			}
			p.failures.add(time.Now(), exit, stderr)
			p.log.Error("relaunch failed", "error", err)
			return
		}
		if p.closed {
			proc.stop()
			return
		}
		p.launchErr = nil
		p.restarts++
		p.stats.restarts.Add(1)
		p.proc = proc
		p.log.Info("plugin relaunched", "pid", proc.pid, "restarts", p.restarts)
	}()
}

// kick relaunches a plugin that is down and past its backoff, in the
// background, without waiting; selection uses it so that a healthy backend is
// never made to wait for a sick one.
func (p *plugin) kick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reapLocked()
	if !p.closed && p.startErr == nil && p.proc == nil && p.launching == nil && !time.Now().Before(p.notBefore) {
		p.relaunchLocked()
	}
}

// backoff is the wait before the next launch after p.crashes consecutive crashes.
func (p *plugin) backoff() time.Duration {
	d := p.set.backoff
	for i := 1; i < p.crashes && d < p.set.maxBackoff; i++ {
		d *= 2
	}
	return min(d, p.set.maxBackoff)
}

// drop forgets proc after a crash or hang, records the failure and stops it.
func (p *plugin) drop(proc *process, exit string) {
	p.mu.Lock()
	p.dropLocked(proc, exit)
	p.mu.Unlock()
	proc.stop()
}

func (p *plugin) dropLocked(proc *process, exit string) {
	if p.proc != proc {
		return
	}
	p.proc = nil
	p.crashes++
	p.notBefore = time.Now().Add(p.backoff())
	now := time.Now()
	p.failures.add(now, exit, proc.stderr.summary())
	p.tripLocked(now)
}

// hung is the hang monitor's verdict on proc: it stopped answering health
// checks, or reading the requests of its data plane, for the hang timeout while
// calls were in flight.
func (p *plugin) hung(proc *process) {
	if proc.stalled() >= p.set.hangTimeout {
		p.log.Error("plugin stopped reading its requests; killing it", "pid", proc.pid, "hang_timeout", p.set.hangTimeout)
		p.drop(proc, fmt.Sprintf("killed by the host: its data plane's request ring stayed full for %v", p.set.hangTimeout))
		return
	}
	p.log.Error("plugin stopped answering health checks; killing it", "pid", proc.pid, "hang_timeout", p.set.hangTimeout)
	p.drop(proc, fmt.Sprintf("killed by the host: no health answer for %v", p.set.hangTimeout))
}

// stalled is how long proc's data plane has not taken requests from a full
// request ring (client.Conn.Stalled); 0 without a data plane.
func (pr *process) stalled() time.Duration {
	if c := pr.conn(); c != nil {
		return c.Stalled()
	}
	return 0
}

// healthy records a successful dispatch: it resets the crash backoff and ends a
// failing state.
func (p *plugin) healthy() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.crashes = 0
	if p.failures.failing {
		p.log.Info("plugin succeeded again; it is no longer failing")
	}
	p.failures.reset()
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
	if err := proc.backend.Open(client.WithReceiveLimit(ctx, smallLimit), adapter); err != nil {
		return 0, err
	}
	took := time.Since(began)
	if tr := p.set.obs.tracer(); tr != nil {
		tr.span("adapter open", began, began.Add(took), trace.String("plugin", p.name()), trace.Int("adapter", int64(adapter)))
	}
	p.mu.Lock()
	proc.opened[adapter] = true
	p.acquisition[adapter] = took
	p.mu.Unlock()
	return took, nil
}

// smallLimit bounds the response of a call that returns no payload (Open,
// Release, Close): an empty message; errors travel in the status, not the body.
const smallLimit = 4 << 10

// deadlinePassed reports whether a call failed because ctx's deadline passed.
// The plugin's side learns the deadline too (gRPC sends it along) and may
// cancel the stream a moment before the host's timer fires, so a cancelled
// call under a deadline waits briefly for ctx to say so.
func deadlinePassed(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	deadline, ok := ctx.Deadline()
	if !ok || !(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return false
	}
	timer := time.NewTimer(time.Until(deadline) + 100*time.Millisecond)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// errNothingRan says a call met a process that had already exited before the
// call began: no work was lost, so the caller relaunches and runs it again.
var errNothingRan = errors.New("the plugin process had exited before the call")

// classify turns the error of operation op on proc into the error the caller
// sees. Errors the plugin reported (rejected, device, unavailable, plain) pass
// through at once; a response over the receive limit is a BadResultError; a
// process the hang monitor killed gives a TimeoutError with Hung set; a passed
// deadline gives a TimeoutError and leaves the process alone (it only cancels
// this call); a process that was already dead before the call gives
// errNothingRan; a dead process or a broken connection otherwise gives a
// CrashedError. The process is dropped in the last cases, so the next use
// relaunches the plugin.
func (p *plugin) classify(ctx context.Context, proc *process, backend, op string, began time.Time, err error) error {
	var (
		rejected    *pluginapi.RejectedError
		device      *pluginapi.DeviceError
		unavailable *pluginapi.UnavailableError
		plain       *pluginapi.PluginError
		tooLarge    *client.ResponseTooLargeError
	)
	switch {
	case errors.As(err, &rejected) || errors.As(err, &device) || errors.As(err, &unavailable) || errors.As(err, &plain):
		return fmt.Errorf("backend %s: %s: %w", backend, op, err)
	case errors.As(err, &tooLarge):
		return &BadResultError{Backend: backend, Detail: fmt.Sprintf("its %s response announced %d bytes where at most %d were expected; the host refused it unread", op, tooLarge.Size, tooLarge.Limit)}
	case proc.isHung():
		return &TimeoutError{Backend: backend, Op: op, After: time.Since(began), Hung: true}
	case deadlinePassed(ctx, err):
		p.log.Debug("caller's deadline passed; the call is cancelled, the plugin keeps running", "op", op, "pid", proc.pid)
		return &TimeoutError{Backend: backend, Op: op, After: time.Since(began)}
	case ctx.Err() != nil:
		return fmt.Errorf("backend %s: %s: %w", backend, op, ctx.Err())
	}
	if status.Code(err) != codes.Unavailable {
		if exited, _, _ := proc.runner.exitInfo(); !exited {
			return fmt.Errorf("backend %s: %s failed: %w", backend, op, err)
		}
	}
	// A connection that broke is most often a process that is exiting: wait a
	// moment for its exit status, never beyond the caller's context (a data
	// plane can also close while the process lives on).
	exited := proc.exitWithin(ctx, closeTimeout)
	if exited && proc.exitedBefore(began) {
		p.drop(proc, proc.exit())
		return errNothingRan
	}
	if proc.isHung() {
		return &TimeoutError{Backend: backend, Op: op, After: time.Since(began), Hung: true}
	}
	how := proc.exit()
	if !exited {
		how = "connection lost; the host stopped the process"
	}
	p.drop(proc, how)
	p.log.Error("plugin crashed", "op", op, "pid", proc.pid, "exit", how)
	return &CrashedError{Backend: backend, Op: op, Exit: how, Stderr: proc.stderr.summary()}
}

// close stops the plugin for good: it stops a launch in progress, asks the
// running process to release everything, then ends it, and waits for
// background launches and probes.
func (p *plugin) close(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	proc := p.proc
	p.proc = nil
	starting := p.runner
	p.mu.Unlock()
	if starting != nil {
		_ = starting.Kill(context.Background()) // go-plugin then gives up on it at once
	}
	if proc != nil {
		cctx, cancel := context.WithTimeout(ctx, closeTimeout)
		if err := proc.backend.Close(client.WithReceiveLimit(cctx, smallLimit)); err != nil {
			p.log.Debug("plugin close failed; stopping it", "error", err)
		}
		cancel()
		proc.shutdown(closeTimeout)
	}
}

// wait waits for the plugin's background work (launches, probes, a refusal).
func (p *plugin) wait() { p.wg.Wait() }

// closeTimeout bounds each step of stopping a plugin politely.
const closeTimeout = 2 * time.Second

// shutdown lets go-plugin stop the process gracefully, and kills it if that
// takes longer than limit (a wedged plugin never answers the shutdown call).
func (pr *process) shutdown(limit time.Duration) {
	pr.markStopped()
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
		_ = pr.runner.Kill(context.Background()) // it may have exited meanwhile
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
	if proc == nil {
		return false
	}
	exited, _, _ := proc.runner.exitInfo()
	return !exited
}

package host

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/host/trace"
	"github.com/kiln-dev/kiln/pluginapi"
)

// checkLinkedTrace parses a trace, checks it against the trace-event format
// and checks that it holds want flows, each tying a host slice to the
// plugin's run, the device's slice and back to the host, with every plugin
// and device slice inside the host's window of its request.
func checkLinkedTrace(t *testing.T, data []byte, want int) *trace.File {
	t.Helper()
	f, err := trace.ParseBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatalf("the trace breaks the format:\n%v", err)
	}
	names := f.ProcessNames()
	hostPid := os.Getpid()
	flows := f.Flows()
	if len(flows) != want {
		t.Fatalf("%d flows, want %d", len(flows), want)
	}
	for _, fl := range flows {
		var cats []string
		for i, s := range fl.Slices {
			if s == nil {
				t.Fatalf("flow %d: point %d lies in no slice", fl.ID, i)
			}
			cats = append(cats, s.Cat)
		}
		if got := strings.Join(cats, ","); got != "host,plugin,device,host" {
			t.Errorf("flow %d runs through %s, want host,plugin,device,host", fl.ID, got)
		}
		first, last := fl.Slices[0], fl.Slices[len(fl.Slices)-1]
		if first.Pid != hostPid || last.Pid != hostPid {
			t.Errorf("flow %d starts on pid %d and ends on %d, want the host's %d", fl.ID, first.Pid, last.Pid, hostPid)
		}
		for _, s := range fl.Slices[1 : len(fl.Slices)-1] {
			if s.Pid == hostPid || names[s.Pid] == "" {
				t.Errorf("flow %d passes slice %q on pid %d (%q), want another, named process", fl.ID, s.Name, s.Pid, names[s.Pid])
			}
			if s.Ts < first.Ts || s.End() > last.End() {
				t.Errorf("flow %d: %s slice [%.3f, %.3f] outside the host's [%.3f, %.3f]", fl.ID, s.Cat, s.Ts, s.End(), first.Ts, last.End())
			}
		}
	}
	return f
}

// sliceNames counts the trace's complete events by cat/name.
func sliceNames(f *trace.File) map[string]int {
	got := map[string]int{}
	for _, e := range f.TraceEvents {
		if e.Ph == "X" {
			got[e.Cat+"/"+e.Name]++
		}
	}
	return got
}

// TestTraceOfCPURef pins the trace export: a host with Options.Trace writes
// valid trace-event JSON in which every submit and dispatch is a flow from a
// host slice through the plugin's run and the device track back to the host,
// beside the host's open, plugin start, adapter open, compile (with its cache
// outcome) and transfer slices.
func TestTraceOfCPURef(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	h, err := Open(ctx, Options{PluginDir: pluginDir(t, "cpuref"), Trace: &out, NoAutotune: true, NoPGO: true})
	if err != nil {
		t.Fatal(err)
	}
	b := acquire(t, h, "cpu-ref")
	const n = 64
	x, y := alloc(t, b, 4*n, 0), alloc(t, b, 4*n, 0)
	if err := x.Write(ctx, 0, make([]byte, 4*n)); err != nil {
		t.Fatal(err)
	}
	pl, err := b.Compile(ctx, saxpy(t), CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var batch Batch
	batch.Dispatch(pl, BoundWork{Invocations: [3]uint32{n, 1, 1}, Bindings: []Binding{Bind(x), Bind(y)}})
	for range 3 {
		if _, err := b.Submit(ctx, &batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Dispatch(ctx, pl, Work{Invocations: [3]uint32{n, 1, 1}, Inputs: [][]byte{make([]byte, 4*n), make([]byte, 4*n)}}); err != nil {
		t.Fatal(err)
	}
	readF32(t, y)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	f := checkLinkedTrace(t, out.Bytes(), 4)
	got := sliceNames(f)
	for _, want := range []string{"host/open", "host/plugin start", "host/plugin handshake", "host/plugin describe", "host/adapter open",
		"host/compile", "host/submit", "host/wait", "host/dispatch", "host/write", "host/read",
		"plugin/decode", "plugin/queue", "plugin/run", "device/submit", "device/dispatch"} {
		if got[want] == 0 {
			t.Errorf("no %s slice in the trace; it has %v", want, got)
		}
	}
	if got["host/submit"] != 3 || got["device/submit"] != 3 {
		t.Errorf("%d submit and %d device submit slices, want 3 each", got["host/submit"], got["device/submit"])
	}
	for _, e := range f.TraceEvents {
		if e.Name == "compile" && e.Args["cache"] == nil {
			t.Errorf("compile slice without its cache outcome: %+v", e.Args)
		}
	}
}

// TestTraceFileFromEnv pins KILN_TRACE: with no trace in the options, the
// host writes one to the file it names, complete once Close returns.
func TestTraceFileFromEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.trace.json")
	t.Setenv(TraceEnv, path)
	h, err := Open(context.Background(), Options{PluginDir: pluginDir(t, "cpuref"), NoCache: true, NoAutotune: true, NoPGO: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Dispatch(context.Background(), saxpy(t), saxpyLaunch("cpu-ref", 8)); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkLinkedTrace(t, data, 1)
	t.Setenv(TraceEnv, filepath.Join(t.TempDir(), "missing", "dir", "trace.json"))
	if _, err := Open(context.Background(), Options{PluginDir: pluginDir(t, "cpuref")}); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Errorf("a trace file that cannot be created: %v, want an error with a Fix", err)
	}
}

// recordingHook keeps every operation it sees.
type recordingHook struct {
	mu  sync.Mutex
	ops []Operation
}

func (r *recordingHook) Observe(_ context.Context, op Operation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

// TestHookSeesDispatchSubmitCompile pins Options.Hook: each compile, submit and
// dispatch reaches it once, with the backend, program, cache outcome and
// times; a refused submit reaches it with its error.
func TestHookSeesDispatchSubmitCompile(t *testing.T) {
	ctx := context.Background()
	hook := &recordingHook{}
	h, err := Open(ctx, Options{PluginDir: pluginDir(t, "cpuref"), Hook: hook, NoAutotune: true, NoPGO: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	b := acquire(t, h, "cpu-ref")
	x, y := alloc(t, b, 16, 0), alloc(t, b, 16, 0)
	pl, err := b.Compile(ctx, saxpy(t), CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var batch Batch
	batch.Dispatch(pl, BoundWork{Invocations: [3]uint32{4, 1, 1}, Bindings: []Binding{Bind(x), Bind(y)}})
	pd, err := b.SubmitAsync(ctx, &batch)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second Wait reports nothing new
		if _, err := pd.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Dispatch(ctx, pl, Work{Invocations: [3]uint32{4, 1, 1}, Inputs: [][]byte{make([]byte, 16), make([]byte, 16)}}); err != nil {
		t.Fatal(err)
	}
	var bad Batch
	bad.Dispatch(pl, BoundWork{Invocations: [3]uint32{4, 1, 1}, Bindings: []Binding{Bind(x)}})
	if _, err := b.Submit(ctx, &bad); err == nil {
		t.Fatal("a batch with a missing binding was accepted")
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	var kinds []string
	for _, op := range hook.ops {
		kinds = append(kinds, op.Kind)
		if op.Backend != "cpu-ref:0" || op.Program != "test.saxpy.f32" || op.Start.IsZero() || op.Took <= 0 {
			t.Errorf("operation %+v", op)
		}
		if op.Kind == OpCompile && op.Cache == "" {
			t.Errorf("compile without its cache outcome: %+v", op)
		}
	}
	if got := strings.Join(kinds, ","); got != "compile,submit,dispatch,submit" {
		t.Fatalf("operations %s, want compile,submit,dispatch,submit", got)
	}
	if sub := hook.ops[1]; sub.Commands != 1 || sub.PluginTime <= 0 || sub.Err != nil {
		t.Errorf("submit %+v", sub)
	}
	if refused := hook.ops[3]; refused.Err == nil {
		t.Errorf("the refused submit reached the hook without its error: %+v", refused)
	}
}

// TestTraceBoundsAHostilePluginsSpans pins what a plugin's spans can do to the
// host's trace: the wire admits at most 8 spans of known kinds per completion
// (pluginapi's TestPlaneRefusesHostileSpans), and the host places even those
// inside its own window of the request, so made-up times (far in the past or
// future, out of order) neither break the format nor grow one request's
// events beyond a fixed bound.
func TestTraceBoundsAHostilePluginsSpans(t *testing.T) {
	var out bytes.Buffer
	tr := newTracer(&out, nil)
	b := &Backend{p: &plugin{path: "/plugins/kiln-backend-evil", desc: &pluginapi.Description{ID: "evil"}}, adapter: pluginapi.Adapter{Index: 0, Name: "evil GPU"}}
	proc := &process{pid: 4242}
	const requests = 50
	for i := range requests {
		began := time.Now()
		sent := began.Add(time.Microsecond)
		end := began.Add(10 * time.Microsecond)
		now := tr.clock.At(began)
		hostile := []pluginapi.Span{
			{Kind: pluginapi.SpanDevice, Start: 1, End: 1 << 62},
			{Kind: pluginapi.SpanRun, Start: now + int64(time.Hour), End: now + 2*int64(time.Hour)},
			{Kind: pluginapi.SpanDecode, Start: now - int64(time.Hour), End: now - int64(time.Hour) + 5},
			{Kind: pluginapi.SpanRun, Start: now + 5000, End: now + 6000},
			{Kind: pluginapi.SpanQueue, Start: 1, End: 2},
			{Kind: pluginapi.SpanRun, Start: now + 1000, End: now + 9000},
			{Kind: pluginapi.SpanDevice, Start: now + 8000, End: now + 8500},
			{Kind: pluginapi.SpanRun, Start: now + int64(i), End: now + int64(i) + 1},
		}
		tr.roundTrip(b, proc, "submit", began, sent, sent, end, hostile, 1<<40)
	}
	if err := tr.close(); err != nil {
		t.Fatal(err)
	}
	f, err := trace.ParseBytes(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatalf("hostile spans broke the trace:\n%v", err)
	}
	var hostLo, hostHi float64 = 1e300, -1
	for _, e := range f.TraceEvents {
		if e.Ph == "X" && e.Cat == "host" {
			hostLo, hostHi = min(hostLo, e.Ts), max(hostHi, e.End())
		}
	}
	for _, e := range f.TraceEvents {
		if e.Ph == "X" && e.Cat != "host" && (e.Ts < hostLo-1e-6 || e.End() > hostHi+1e-6) {
			t.Errorf("%s slice %q [%.3f, %.3f] outside every host window [%.3f, %.3f]", e.Cat, e.Name, e.Ts, e.End(), hostLo, hostHi)
		}
	}
	// Per request: 2 host slices, 8 spans, 10 flow points at most; then the
	// names of the host, the plugin, the device and their lanes.
	if limit := requests*(2+8+10) + 3*2 + 3*maxLanesPerTrack*2; len(f.TraceEvents) > limit {
		t.Errorf("%d events for %d requests, more than %d", len(f.TraceEvents), requests, limit)
	}
	if per := out.Len() / requests; per > 4096 {
		t.Errorf("%d bytes of trace per request", per)
	}
}

// maxLanesPerTrack is the trace package's bound on one process's lanes.
const maxLanesPerTrack = 64

package hostotel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/host/hostotel"
	"github.com/kiln-dev/kiln/internal/irprog"
	"github.com/kiln-dev/kiln/internal/testbuild"
	"github.com/kiln-dev/kiln/ir"
)

// cpuRefDir builds the cpu-ref plugin into a fresh plugins directory.
func cpuRefDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var build testbuild.Env // go's own build cache: this test moves no home
	for _, err := range build.Build(dir, map[string]string{"kiln-backend-cpuref": "github.com/kiln-dev/kiln/plugins/cpuref"}) {
		t.Fatal(err)
	}
	return dir
}

func saxpy() *ir.Program { return irprog.Saxpy("test.saxpy.f32", 64) }

// TestSpansOfAHost pins the spans: a compile, a submit and a dispatch on
// cpu-ref each end as one span under the caller's span, with the backend,
// program, cache outcome and plugin time, and a refused submit as a span
// with an error status.
func TestSpansOfAHost(t *testing.T) {
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h, err := host.Open(ctx, host.Options{PluginDir: cpuRefDir(t), Hook: hostotel.New(tp), NoCache: true, NoAutotune: true, NoPGO: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, parent := tp.Tracer("test").Start(ctx, "caller")
	b, err := h.Acquire(ctx, "cpu-ref")
	if err != nil {
		t.Fatal(err)
	}
	x, err := b.Alloc(ctx, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	y, err := b.Alloc(ctx, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := b.Compile(ctx, saxpy(), host.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var batch host.Batch
	batch.Dispatch(pl, host.BoundWork{Invocations: [3]uint32{16, 1, 1}, Bindings: []host.Binding{host.Bind(x), host.Bind(y)}})
	if _, err := b.Submit(ctx, &batch); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Dispatch(ctx, pl, host.Work{Invocations: [3]uint32{16, 1, 1}, Inputs: [][]byte{make([]byte, 64), make([]byte, 64)}}); err != nil {
		t.Fatal(err)
	}
	var bad host.Batch
	bad.Dispatch(pl, host.BoundWork{Invocations: [3]uint32{16, 1, 1}, Bindings: []host.Binding{host.Bind(x)}})
	if _, err := b.Submit(ctx, &bad); err == nil {
		t.Fatal("a batch with a missing binding ran")
	}
	parent.End()
	spans := rec.Ended()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	want := []string{"kiln.compile", "kiln.submit", "kiln.dispatch", "kiln.submit", "caller"}
	if len(names) != len(want) {
		t.Fatalf("spans %v, want %v", names, want)
	}
	for i, s := range spans[:4] {
		if s.Name() != want[i] {
			t.Errorf("span %d is %s, want %s", i, s.Name(), want[i])
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s is not under the caller's span", s.Name())
		}
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		if attrs[hostotel.AttrBackend].AsString() != "cpu-ref:0" || attrs[hostotel.AttrProgram].AsString() != "test.saxpy.f32" {
			t.Errorf("%s attributes %v", s.Name(), attrs)
		}
		if !s.EndTime().After(s.StartTime()) {
			t.Errorf("%s runs from %v to %v", s.Name(), s.StartTime(), s.EndTime())
		}
		switch i {
		case 0:
			if attrs[hostotel.AttrCache].AsString() != host.CacheOff {
				t.Errorf("compile cache %v", attrs[hostotel.AttrCache])
			}
		case 1, 2:
			if attrs[hostotel.AttrPluginTime].AsInt64() <= 0 || s.Status().Code == codes.Error {
				t.Errorf("%s: %v, status %v", s.Name(), attrs, s.Status())
			}
		case 3:
			if s.Status().Code != codes.Error || len(s.Events()) == 0 {
				t.Errorf("the refused submit's status %v, events %v", s.Status(), s.Events())
			}
		}
	}
}

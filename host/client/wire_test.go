package client

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/internal/irprog"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// serveInProcess serves impl on protocol 1 with Serve's go-plugin
// configuration in go-plugin's test mode (pluginapi.ServeTest: same process, a
// real gRPC connection over a local socket) and returns the host's Conn to it,
// built with Config's options and not yet described.
func serveInProcess(t testing.TB, impl pluginapi.Backend) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, stop, err := pluginapi.ServeTest(ctx, impl, pluginapi.Protocols(pluginapi.ProtocolV1))
	if err != nil {
		t.Fatalf("in-process plugin server: %v", err)
	}
	cfg := Config(nil, hclog.NewNullLogger())
	cfg.Reattach = rc
	// go-plugin picks the plugin set from the handshake only when it starts the
	// process; a reattached client needs it named.
	cfg.Plugins = cfg.VersionedPlugins[rc.ProtocolVersion]
	c := plugin.NewClient(cfg)
	t.Cleanup(func() {
		c.Kill()
		stop()
	})
	b, err := Dispense(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func saxpyProgram() *ir.Program { return irprog.Saxpy("test.saxpy.f32", 64) }

func TestWireDescribe(t *testing.T) {
	b := serveInProcess(t, &fakeBackend{})
	got, err := b.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := testDescription(); !reflect.DeepEqual(got, want) {
		t.Errorf("Describe across the wire:\n got %+v\nwant %+v", got, want)
	}
}

func TestWireCompileDeliversDecodedRequest(t *testing.T) {
	fake := &fakeBackend{result: &pluginapi.CompileResult{Pipeline: 99, Blob: []byte("blob"), CompileNanos: 5}}
	b := serveInProcess(t, fake)
	prog := saxpyProgram()
	var spec ir.SpecMap
	spec.Set("a", ir.SpecF32(3))
	res, err := b.Compile(context.Background(), &pluginapi.CompileRequest{
		Adapter: 1, Program: prog, Spec: spec, WorkgroupSize: [3]uint32{32, 1, 1}, CachedBlob: []byte{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pipeline != 99 || string(res.Blob) != "blob" || res.CompileNanos != 5 {
		t.Errorf("result %+v, want pipeline 99, blob \"blob\", 5ns", res)
	}
	req := fake.compiles[0]
	if req.Adapter != 1 || req.WorkgroupSize != [3]uint32{32, 1, 1} || req.Spec.CacheHash() != spec.CacheHash() {
		t.Errorf("backend saw adapter %d, workgroup %v, spec hash %x", req.Adapter, req.WorkgroupSize, req.Spec.CacheHash())
	}
	if req.Program.Digest() != prog.Digest() {
		t.Errorf("program changed across the wire: digest %x, want %x", req.Program.Digest(), prog.Digest())
	}
	if req.CachedBlob == nil {
		t.Error("an empty cached blob arrived as nil (a miss)")
	}
}

func TestWireCompileWithoutBlobs(t *testing.T) {
	fake := &fakeBackend{result: &pluginapi.CompileResult{Pipeline: 1}}
	b := serveInProcess(t, fake)
	res, err := b.Compile(context.Background(), &pluginapi.CompileRequest{Program: saxpyProgram()})
	if err != nil {
		t.Fatal(err)
	}
	if fake.compiles[0].CachedBlob != nil {
		t.Error("a nil cached blob (a miss) arrived as non-nil")
	}
	if res.Blob != nil {
		t.Error("no blob came back as a non-nil blob")
	}
	if res.CompileNanos <= 0 {
		t.Errorf("compile time %d: the SDK must fill in the measured time when the backend leaves it zero", res.CompileNanos)
	}
}

func TestWireRejectsInvalidProgramBeforeBackend(t *testing.T) {
	fake := &fakeBackend{}
	b := serveInProcess(t, fake)
	bad := saxpyProgram()
	bad.Body = append(bad.Body, ir.StoreStmt{Target: "nowhere", Index: ir.LitU32(0), Value: ir.LitF32(1)})
	_, err := b.Compile(context.Background(), &pluginapi.CompileRequest{Program: bad})
	if !isRejected(err) {
		t.Fatalf("invalid program: got %v, want a RejectedError", err)
	}
	var spec ir.SpecMap
	spec.Set("nope", ir.SpecU32(1))
	_, err = b.Compile(context.Background(), &pluginapi.CompileRequest{Program: saxpyProgram(), Spec: spec})
	if !isRejected(err) {
		t.Fatalf("unknown parameter: got %v, want a RejectedError", err)
	}
	if n := fake.compileCalls(); n != 0 {
		t.Errorf("backend Compile ran %d times for rejected requests", n)
	}
}

func TestWireDispatch(t *testing.T) {
	fake := &fakeBackend{}
	b := serveInProcess(t, fake)
	in := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	res, err := b.Dispatch(context.Background(), &pluginapi.DispatchRequest{
		Pipeline: 3, Grid: [3]uint32{4, 2, 1}, Inputs: [][]byte{in, nil, {}}, OutputCounts: []uint32{0, 16, 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outputs) != 2 || !bytes.Equal(res.Outputs[0], in) || len(res.Outputs[1]) != 0 {
		t.Errorf("outputs %v, want the echoed input and an empty buffer", res.Outputs)
	}
	if res.HostNanos != 7 || res.DeviceNanos != 3 {
		t.Errorf("times host %d device %d, want 7 and 3", res.HostNanos, res.DeviceNanos)
	}
	req := fake.dispatches[0]
	if req.Pipeline != 3 || req.Grid != [3]uint32{4, 2, 1} || !reflect.DeepEqual(req.OutputCounts, []uint32{0, 16, 0}) {
		t.Errorf("backend saw %+v", req)
	}
	if req.Inputs[1] != nil || req.Inputs[2] == nil {
		t.Errorf("inputs lost nil (write buffer) versus empty (read buffer): %#v", req.Inputs)
	}
}

func TestWireDispatchFillsHostTime(t *testing.T) {
	b := serveInProcess(t, &fakeBackend{dispatchResult: &pluginapi.DispatchResult{}})
	res, err := b.Dispatch(context.Background(), &pluginapi.DispatchRequest{Pipeline: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.HostNanos <= 0 || res.DeviceNanos != 0 {
		t.Errorf("host %d device %d: the SDK fills host time only", res.HostNanos, res.DeviceNanos)
	}
}

func TestWireTypedErrors(t *testing.T) {
	for _, c := range []struct {
		err error
		is  func(error) bool
	}{
		{pluginapi.Rejected("pipeline 9 is unknown"), isRejected},
		{pluginapi.Unavailable("adapter 1 has no driver. Fix: install one"), isUnavailable},
		{pluginapi.DeviceFailed("device lost"), isDevice},
	} {
		b := serveInProcess(t, &fakeBackend{err: c.err})
		ctx := context.Background()
		errs := []error{b.Open(ctx, 0), b.Release(ctx, 1), b.Close(ctx)}
		_, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: saxpyProgram()})
		errs = append(errs, err)
		_, err = b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: 1})
		errs = append(errs, err)
		for i, err := range errs {
			if !c.is(err) || err.Error() != c.err.Error() {
				t.Errorf("call %d with %T: got %T %q", i, c.err, err, err)
			}
		}
	}
}

func TestWireDeadline(t *testing.T) {
	b := serveInProcess(t, &blockingBackend{fakeBackend: fakeBackend{}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want an error wrapping context.DeadlineExceeded", err)
	}
}

// blockingBackend's Dispatch waits for its context to end.
type blockingBackend struct{ fakeBackend }

func (b *blockingBackend) Dispatch(ctx context.Context, _ *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestWireNilResultIsAnError(t *testing.T) {
	b := serveInProcess(t, &nilBackend{})
	if _, err := b.Describe(context.Background()); err == nil {
		t.Error("Describe returning (nil, nil) did not fail")
	}
	if _, err := b.Compile(context.Background(), &pluginapi.CompileRequest{Program: saxpyProgram()}); err == nil {
		t.Error("Compile returning (nil, nil) did not fail")
	}
	if _, err := b.Dispatch(context.Background(), &pluginapi.DispatchRequest{}); err == nil {
		t.Error("Dispatch returning (nil, nil) did not fail")
	}
}

// nilBackend returns neither results nor errors.
type nilBackend struct{ fakeBackend }

func (*nilBackend) Describe(context.Context) (*pluginapi.Description, error) { return nil, nil }
func (*nilBackend) Compile(context.Context, *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	return nil, nil
}
func (*nilBackend) Dispatch(context.Context, *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	return nil, nil
}

func TestClientRejectsBadRequestsLocally(t *testing.T) {
	b := serveInProcess(t, &fakeBackend{})
	ctx := context.Background()
	if err := b.Open(ctx, -1); !isRejected(err) {
		t.Errorf("Open(-1): got %v, want a RejectedError", err)
	}
	if _, err := b.Compile(ctx, &pluginapi.CompileRequest{}); !isRejected(err) {
		t.Errorf("Compile without a program: got %v, want a RejectedError", err)
	}
}

// TestWireLargeBuffer pins the raised gRPC limits: a 512 MiB read_write buffer
// goes to the plugin and comes back; gRPC's default 4 MiB receive limit fails it.
// The full size needs about 4 GiB of memory (12 GiB and minutes under the race
// detector), so with -short or -race a 32 MiB buffer, still 8× the default limit,
// stands in.
func TestWireLargeBuffer(t *testing.T) {
	size := 512 << 20
	if testing.Short() || raceEnabled {
		size = 32 << 20
		t.Logf("-short or -race: round-tripping %d MiB instead of 512 MiB", size>>20)
	}
	b := serveInProcess(t, &fakeBackend{})
	in := make([]byte, size)
	for i := range in {
		in[i] = byte(i*7 + i>>20)
	}
	res, err := b.Dispatch(context.Background(), &pluginapi.DispatchRequest{Pipeline: 1, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{in}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outputs) != 1 || !bytes.Equal(res.Outputs[0], in) {
		t.Fatalf("the %d MiB buffer did not come back intact (%d outputs)", size>>20, len(res.Outputs))
	}
}

// BenchmarkWireRoundTrip moves a 64 MiB read_write buffer to an in-process plugin
// and back; the reported throughput counts both directions.
func BenchmarkWireRoundTrip(b *testing.B) {
	be := serveInProcess(b, &fakeBackend{})
	in := make([]byte, 64<<20)
	b.SetBytes(2 * int64(len(in)))
	b.ResetTimer()
	for range b.N {
		if _, err := be.Dispatch(context.Background(), &pluginapi.DispatchRequest{Pipeline: 1, Inputs: [][]byte{in}}); err != nil {
			b.Fatal(err)
		}
	}
}

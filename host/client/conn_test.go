package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kiln-dev/kiln/internal/membuf"
	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/pluginapi"
)

// memBackend is a protocol-2 backend for the SDK's tests: fakeBackend's core plus
// buffers in memory (the shared segment when offered) and submits that run the
// interpreter in place.
type memBackend struct {
	fakeBackend
	membuf.Buffers
	mu      sync.Mutex
	next    uint64
	kernels map[uint64]*interp.Kernel
	// badMapped makes AllocBuffer claim Mapped without adopting the memory.
	badMapped bool
}

func newMemBackend() *memBackend {
	return &memBackend{kernels: map[uint64]*interp.Kernel{}}
}

func (m *memBackend) Compile(ctx context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	k, err := interp.Compile(req.Program, interp.Options{WorkgroupSize: req.WorkgroupSize, Spec: req.Spec})
	if err != nil {
		return nil, pluginapi.Rejected("%w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	m.kernels[m.next] = k
	return &pluginapi.CompileResult{Pipeline: m.next}, nil
}

func (m *memBackend) AllocBuffer(ctx context.Context, req *pluginapi.AllocRequest) (*pluginapi.AllocResult, error) {
	res, err := m.Buffers.AllocBuffer(ctx, req)
	if err == nil && m.badMapped {
		res.Mapped = true
	}
	return res, err
}

func (m *memBackend) Submit(ctx context.Context, req *pluginapi.SubmitRequest) (*pluginapi.SubmitResult, error) {
	pluginapi.MarkLaunched(ctx) // its "device" is this goroutine: all of the run is the wait
	for _, c := range req.Commands {
		switch c := c.(type) {
		case pluginapi.DispatchCommand:
			m.mu.Lock()
			k := m.kernels[c.Pipeline]
			m.mu.Unlock()
			bufs := make([][]byte, len(c.Bindings))
			for i, r := range c.Bindings {
				bufs[i] = m.Range(r)
			}
			if err := k.RunBound(ctx, c.Grid, c.Uniforms, bufs); err != nil {
				return nil, pluginapi.Rejected("%w", err)
			}
		case pluginapi.CopyCommand:
			copy(m.Range(c.Dst), m.Range(c.Src))
		case pluginapi.FillCommand:
			d := m.Range(c.Dst)
			for i := 0; i < len(d); i += 4 {
				binary.LittleEndian.PutUint32(d[i:], c.Value)
			}
		}
	}
	return &pluginapi.SubmitResult{DeviceNanos: 5}, nil
}

// serveV2 serves impl over protocol 2 in process (ServeInProcess), with the
// data plane unless the environment says grpc.
func serveV2(t testing.TB, impl pluginapi.Backend) *Conn {
	t.Helper()
	conn, stop, err := ServeInProcess(context.Background(), impl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return conn
}

// planes runs f with the data plane on (where the platform has one) and off.
func planes(t *testing.T, f func(t *testing.T, shared bool)) {
	t.Run("grpc", func(t *testing.T) {
		t.Setenv(DataPlaneEnv, "grpc")
		f(t, false)
	})
	if runtime.GOOS == "linux" {
		t.Run("shm", func(t *testing.T) { f(t, true) })
	}
}

func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func TestV2CapabilitiesAndDataPlane(t *testing.T) {
	planes(t, func(t *testing.T, shared bool) {
		c := serveV2(t, newMemBackend()).Capabilities()
		want := pluginapi.Capabilities{Protocol: 2, Buffers: true, Submit: true, SharedMemory: shared, Spans: shared}
		if !shared {
			want.DataPlane = DataPlaneEnv + "=grpc"
		}
		if c != want {
			t.Errorf("capabilities %+v, want %+v", c, want)
		}
	})
}

func TestV2BuffersSubmitRoundTrip(t *testing.T) {
	planes(t, func(t *testing.T, shared bool) {
		ctx := context.Background()
		conn := serveV2(t, newMemBackend())
		pl, err := conn.Compile(ctx, &pluginapi.CompileRequest{Program: saxpyProgram()})
		if err != nil {
			t.Fatal(err)
		}
		x, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 16, Usage: pluginapi.UsageStorage | pluginapi.UsageMap})
		if err != nil {
			t.Fatal(err)
		}
		y, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 16})
		if err != nil {
			t.Fatal(err)
		}
		if x.Mapped != shared || (conn.Mapping(x.Buffer) != nil) != shared || conn.Mapping(y.Buffer) != nil {
			t.Fatalf("x mapped %v (mapping %v), y mapping %v; shared memory %v", x.Mapped, conn.Mapping(x.Buffer) != nil, conn.Mapping(y.Buffer) != nil, shared)
		}
		if err := conn.WriteBuffer(ctx, x.Buffer, 0, f32s(1, 2, 3, 4)); err != nil {
			t.Fatal(err)
		}
		_, err = conn.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{
			pluginapi.FillCommand{Dst: pluginapi.BufferRange{Buffer: y.Buffer, Size: 16}, Value: math.Float32bits(10)},
			pluginapi.DispatchCommand{Pipeline: pl.Pipeline, Grid: [3]uint32{1, 1, 1}, Bindings: []pluginapi.BufferRange{{Buffer: x.Buffer, Size: 16}, {Buffer: y.Buffer, Size: 16}}},
			pluginapi.CopyCommand{Src: pluginapi.BufferRange{Buffer: y.Buffer, Size: 8}, Dst: pluginapi.BufferRange{Buffer: x.Buffer, Offset: 8, Size: 8}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 16)
		if err := conn.ReadBuffer(ctx, y.Buffer, 0, got); err != nil {
			t.Fatal(err)
		}
		if want := f32s(12, 14, 16, 18); !bytes.Equal(got, want) {
			t.Errorf("y = %v, want %v", got, want)
		}
		if err := conn.ReadBuffer(ctx, x.Buffer, 0, got); err != nil {
			t.Fatal(err)
		}
		if want := f32s(1, 2, 12, 14); !bytes.Equal(got, want) {
			t.Errorf("x = %v, want %v", got, want)
		}
		for _, b := range []uint64{x.Buffer, y.Buffer} {
			if err := conn.FreeBuffer(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		if err := conn.FreeBuffer(ctx, x.Buffer); err == nil {
			t.Error("a second free of a buffer succeeded")
		}
	})
}

func TestV2RangesCheckedOnTheHost(t *testing.T) {
	planes(t, func(t *testing.T, shared bool) {
		ctx := context.Background()
		conn := serveV2(t, newMemBackend())
		b, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 16})
		if err != nil {
			t.Fatal(err)
		}
		bad := []*pluginapi.SubmitRequest{
			{Commands: []pluginapi.SubmitCommand{pluginapi.FillCommand{Dst: pluginapi.BufferRange{Buffer: b.Buffer, Offset: 8, Size: 16}}}},
			{Commands: []pluginapi.SubmitCommand{pluginapi.FillCommand{Dst: pluginapi.BufferRange{Buffer: b.Buffer, Offset: 2, Size: 4}}}},
			{Commands: []pluginapi.SubmitCommand{pluginapi.FillCommand{Dst: pluginapi.BufferRange{Buffer: 999, Size: 4}}}},
			{Commands: []pluginapi.SubmitCommand{pluginapi.CopyCommand{Src: pluginapi.BufferRange{Buffer: b.Buffer, Size: 8}, Dst: pluginapi.BufferRange{Buffer: b.Buffer, Offset: 4, Size: 8}}}},
			{Commands: []pluginapi.SubmitCommand{pluginapi.DispatchCommand{Bindings: []pluginapi.BufferRange{{Buffer: b.Buffer, Offset: math.MaxUint64 - 3, Size: 8}}}}},
		}
		for i, req := range bad {
			var rej *pluginapi.RejectedError
			if _, err := conn.Submit(ctx, req); !errors.As(err, &rej) {
				t.Errorf("bad batch %d: error %v, want a RejectedError", i, err)
			}
		}
		if err := conn.WriteBuffer(ctx, b.Buffer, 12, make([]byte, 8)); err == nil {
			t.Error("a write past the end succeeded")
		}
	})
}

func TestV2PluginChecksRangesToo(t *testing.T) {
	// The gRPC service is the plugin's side: a range the host would never send
	// still never reaches the backend.
	ctx := context.Background()
	t.Setenv(DataPlaneEnv, "grpc")
	conn := serveV2(t, newMemBackend())
	b, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 16})
	if err != nil {
		t.Fatal(err)
	}
	rpc := conn.v2.rpc
	_, err = rpc.Submit(ctx, &kilnpb.SubmitRequest{Commands: []*kilnpb.Command{{Op: &kilnpb.Command_Fill{Fill: &kilnpb.FillCommand{Dst: &kilnpb.BufferRange{Buffer: b.Buffer, Offset: 12, Size: 8}}}}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("out-of-range fill sent straight to the plugin: %v, want InvalidArgument", err)
	}
	_, err = rpc.ReadBuffer(ctx, &kilnpb.ReadBufferRequest{Buffer: b.Buffer, Offset: 8, Size: 1 << 40})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("huge read sent straight to the plugin: %v, want InvalidArgument", err)
	}
}

func TestV2CoreOnlyBackendAnswersUnimplemented(t *testing.T) {
	planes(t, func(t *testing.T, shared bool) {
		ctx := context.Background()
		conn := serveV2(t, &fakeBackend{})
		c := conn.Capabilities()
		if c.Buffers || c.Submit || c.Artifacts || c.Health || c.Resident() || len(c.Missing()) < 3 {
			t.Errorf("core-only capabilities %+v, missing %q", c, c.Missing())
		}
		var unimp *pluginapi.UnimplementedError
		if _, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4}); !errors.As(err, &unimp) || unimp.Interface != "pluginapi.Buffers" {
			t.Errorf("AllocBuffer: %v, want pluginapi.UnimplementedError for pluginapi.Buffers", err)
		}
		if _, err := conn.Artifact(ctx, &pluginapi.ArtifactRequest{Program: saxpyProgram(), Kind: "spirv"}); !errors.As(err, &unimp) {
			t.Errorf("Artifact: %v, want UnimplementedError", err)
		}
		if err := conn.Health(ctx); !errors.As(err, &unimp) {
			t.Errorf("Health: %v, want UnimplementedError", err)
		}
		// The plugin itself answers UNIMPLEMENTED when asked anyway.
		rpc := conn.v2.rpc
		if _, err := rpc.AllocBuffer(ctx, &kilnpb.AllocBufferRequest{Size: 4}); status.Code(err) != codes.Unimplemented {
			t.Errorf("AllocBuffer RPC: %v, want Unimplemented", err)
		}
		if _, err := rpc.Submit(ctx, &kilnpb.SubmitRequest{}); status.Code(err) != codes.Unimplemented {
			t.Errorf("Submit RPC: %v, want Unimplemented", err)
		}
		// The inline dispatch works, through shared memory where there is some.
		res, err := conn.DispatchSized(ctx, &pluginapi.DispatchRequest{Pipeline: 1, Inputs: [][]byte{{1, 2, 3, 4}, nil}, OutputCounts: []uint32{0, 1}}, []int{4})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Outputs) != 1 || !bytes.Equal(res.Outputs[0], []byte{1, 2, 3, 4}) || res.HostNanos == 0 {
			t.Errorf("dispatch result %+v", res)
		}
	})
}

func TestV2DispatchOutputOfWrongSizeIsRefused(t *testing.T) {
	planes(t, func(t *testing.T, shared bool) {
		ctx := context.Background()
		big := make([]byte, 1<<20)
		conn := serveV2(t, &fakeBackend{dispatchResult: &pluginapi.DispatchResult{Outputs: [][]byte{big}}})
		res, err := conn.DispatchSized(ctx, &pluginapi.DispatchRequest{Pipeline: 1}, []int{16})
		if !shared {
			// gRPC hands back what came; the host's size check refuses it.
			if err != nil || len(res.Outputs[0]) != len(big) {
				t.Fatalf("gRPC dispatch: %v", err)
			}
			return
		}
		var re *ResultError
		if !errors.As(err, &re) {
			t.Fatalf("1 MiB output where 16 bytes were expected: %v, want a ResultError", err)
		}
		conn2 := serveV2(t, &fakeBackend{dispatchResult: &pluginapi.DispatchResult{Outputs: [][]byte{{1}, {2}}}})
		if _, err := conn2.DispatchSized(ctx, &pluginapi.DispatchRequest{Pipeline: 1}, []int{1}); !errors.As(err, &re) {
			t.Fatalf("two outputs where one was expected: %v, want a ResultError", err)
		}
	})
}

func TestV2AsyncSubmitsRunInOrder(t *testing.T) {
	planes(t, func(t *testing.T, shared bool) {
		ctx := context.Background()
		conn := serveV2(t, newMemBackend())
		b, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4})
		if err != nil {
			t.Fatal(err)
		}
		var pending []*Pending
		for v := range uint32(50) {
			p, err := conn.SubmitAsync(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{pluginapi.FillCommand{Dst: pluginapi.BufferRange{Buffer: b.Buffer, Size: 4}, Value: v}}})
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, p)
		}
		for i := len(pending) - 1; i >= 0; i-- {
			res, err := pending[i].Wait(ctx)
			if err != nil || res.DeviceNanos != 5 {
				t.Fatalf("batch %d: %+v, %v", i, res, err)
			}
		}
		got := make([]byte, 4)
		if err := conn.ReadBuffer(ctx, b.Buffer, 0, got); err != nil {
			t.Fatal(err)
		}
		if v := binary.LittleEndian.Uint32(got); v != 49 {
			t.Errorf("after 50 ordered fills the buffer holds %d, want 49", v)
		}
	})
}

func TestV2MappedClaimWithoutSharedMemoryIsABackendBug(t *testing.T) {
	t.Setenv(DataPlaneEnv, "grpc")
	m := newMemBackend()
	m.badMapped = true
	conn := serveV2(t, m)
	var dev *pluginapi.DeviceError
	if _, err := conn.AllocBuffer(context.Background(), &pluginapi.AllocRequest{Size: 4}); !errors.As(err, &dev) {
		t.Errorf("backend claiming an unoffered mapping: %v, want a DeviceError", err)
	}
}

func TestV1PluginOnV2Host(t *testing.T) {
	conn := serveInProcess(t, newMemBackend())
	if _, err := conn.Describe(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := conn.Capabilities()
	if c.Protocol != 1 || c.Buffers || len(c.Missing()) != 1 {
		t.Errorf("protocol-1 capabilities %+v, missing %q", c, c.Missing())
	}
	var unimp *pluginapi.UnimplementedError
	if _, err := conn.AllocBuffer(context.Background(), &pluginapi.AllocRequest{Size: 4}); !errors.As(err, &unimp) {
		t.Errorf("AllocBuffer on protocol 1: %v, want UnimplementedError", err)
	}
}

func TestCapabilitiesOfInProcessBackends(t *testing.T) {
	if c := pluginapi.CapabilitiesOf(newMemBackend()); !c.Buffers || !c.Submit || c.Artifacts || c.Health {
		t.Errorf("memBackend: %+v", c)
	}
	if c := pluginapi.CapabilitiesOf(&fakeBackend{}); c.Buffers || c.Submit {
		t.Errorf("fakeBackend: %+v", c)
	}
}

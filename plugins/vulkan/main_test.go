package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/internal/syncbuf"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
	"github.com/kiln-dev/kiln/plugins/internal/plugintest"
	"github.com/kiln-dev/kiln/plugins/vulkan/backend"
)

// pluginBinary is kiln-backend-vulkan, built once per test binary.
var pluginBinary = plugintest.Build("kiln-backend-vulkan", "")

func TestMain(m *testing.M) {
	code := m.Run()
	pluginBinary.Remove()
	os.Exit(code)
}

// startPlugin starts the plugin with extra environment variables and returns
// its Backend and its log; the plugin stops when the test ends.
func startPlugin(t *testing.T, env ...string) (*client.Conn, *syncbuf.Buffer) {
	t.Helper()
	b, logs, stop := pluginBinary.Start(t, env...)
	t.Cleanup(stop)
	return b, logs
}

// TestPluginProcess starts kiln-backend-vulkan with the validation layer on and runs
// vector_add through it: Describe, Open, Compile, Dispatch, Release, Close. The
// plugin logs validation messages, so its log must not mention any.
func TestPluginProcess(t *testing.T) {
	b, logs := startPlugin(t, backend.ValidationEnv+"=1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plugintest.Usable(t, ctx, b, "vulkan", "KILN_REQUIRE_VULKAN")
	res := plugintest.VectorAdd(t, ctx, b, func(blob []byte) error {
		if len(blob) < 32 {
			return fmt.Errorf("compile returned a %d-byte blob, want pipeline-cache data with its header", len(blob))
		}
		return nil
	})
	if res.HostNanos <= 0 {
		t.Errorf("host time %d", res.HostNanos)
	}
	log := logs.String()
	if !strings.Contains(log, "validation=true") {
		t.Errorf("the plugin did not log that it runs with validation:\n%s", log)
	}
	if strings.Contains(log, "validation layer reported") {
		t.Errorf("the plugin logged validation messages:\n%s", log)
	}
}

// TestPluginProcessWithoutLoader starts the plugin pointed at a loader library that
// does not exist: it must start and report why Vulkan is unavailable.
func TestPluginProcessWithoutLoader(t *testing.T) {
	b, _ := startPlugin(t, backend.LoaderEnv+"=libkiln-no-such-vulkan.so.1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "Vulkan loader libkiln-no-such-vulkan.so.1 not found. Fix: install libvulkan1 and a Vulkan driver (mesa-vulkan-drivers provides a CPU one)"
	if len(d.Adapters) != 1 || d.Adapters[0].Available || d.Adapters[0].Reason != want {
		t.Fatalf("adapters %+v, want one unavailable adapter with reason %q", d.Adapters, want)
	}
	var unavailable *pluginapi.UnavailableError
	if err := b.Open(ctx, 0); !errors.As(err, &unavailable) {
		t.Errorf("Open through the wire = %v, want an UnavailableError", err)
	}
}

// TestPluginProcessProtocol2 runs resident buffers through the plugin process
// under the validation layer: protocol 2 with buffers, submits and health; a
// mapped buffer (the data plane's shared memory, imported where the device maps
// its memory) written and read in place by the host; 100 dependent dispatches in
// one submit.
func TestPluginProcessProtocol2(t *testing.T) {
	b, logs := startPlugin(t, backend.ValidationEnv+"=1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plugintest.Usable(t, ctx, b, "vulkan", "KILN_REQUIRE_VULKAN")
	caps := b.Capabilities()
	if !caps.Resident() || !caps.Health {
		t.Fatalf("capabilities %v: want buffers, submit and health on protocol 2", caps)
	}
	if err := b.Health(ctx); err != nil {
		t.Fatalf("Health = %v", err)
	}
	k, _ := kernels.Lookup("vector_add")
	comp, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: k.Program()})
	if err != nil {
		t.Fatal(err)
	}
	const n = 4096
	alloc := func(usage pluginapi.BufferUsage) uint64 {
		a, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4 * n, Usage: usage})
		if err != nil {
			t.Fatal(err)
		}
		return a.Buffer
	}
	x, y, out := alloc(pluginapi.UsageMap|pluginapi.UsageStorage), alloc(0), alloc(0)
	one := make([]byte, 4*n)
	for i := 0; i < len(one); i += 4 {
		one[i+2], one[i+3] = 0x80, 0x3f // 1.0f
	}
	if m := b.Mapping(x); m != nil {
		copy(m, one)
	} else if err := b.WriteBuffer(ctx, x, 0, one); err != nil {
		t.Fatal(err)
	}
	cmd := pluginapi.DispatchCommand{Pipeline: comp.Pipeline, Grid: [3]uint32{n / 256, 1, 1},
		Bindings: []pluginapi.BufferRange{{Buffer: x, Size: 4 * n}, {Buffer: y, Size: 4 * n}, {Buffer: out, Size: 4 * n}}}
	back := pluginapi.DispatchCommand{Pipeline: comp.Pipeline, Grid: cmd.Grid,
		Bindings: []pluginapi.BufferRange{{Buffer: x, Size: 4 * n}, {Buffer: out, Size: 4 * n}, {Buffer: y, Size: 4 * n}}}
	var cmds []pluginapi.SubmitCommand
	for i := range 100 {
		if i%2 == 0 {
			cmds = append(cmds, cmd)
		} else {
			cmds = append(cmds, back)
		}
	}
	if _, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: cmds}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*n)
	if err := b.ReadBuffer(ctx, out, 0, got); err != nil {
		t.Fatal(err)
	}
	// y and out alternate as y+x: after 100 steps out holds 99·1.0 = 99.0f.
	for i := 0; i < len(got); i += 4 {
		if bits := uint32(got[i]) | uint32(got[i+1])<<8 | uint32(got[i+2])<<16 | uint32(got[i+3])<<24; bits != 0x42c60000 {
			t.Fatalf("out[%d] = %#x, want 99.0 (0x42c60000)", i/4, bits)
		}
	}
	t.Logf("%v; x mapped: %v", caps, b.Mapping(x) != nil)
	for _, h := range []uint64{x, y, out} {
		if err := b.FreeBuffer(ctx, h); err != nil {
			t.Error(err)
		}
	}
	if err := b.Close(ctx); err != nil {
		t.Error(err)
	}
	if strings.Contains(logs.String(), "validation layer reported") {
		t.Errorf("the plugin logged validation messages:\n%s", logs)
	}
}

// TestPluginProcessManyCallers runs 8 callers × 25 rounds of write, submit and
// read on one adapter through the plugin's data plane under the validation
// layer, each round's submits sent ahead (SubmitAsync) of their waits: the
// plugin starts them on its pipelined queue (pluginapi.Pipelined) while
// earlier ones run, and every result is right.
func TestPluginProcessManyCallers(t *testing.T) {
	b, logs := startPlugin(t, backend.ValidationEnv+"=1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plugintest.Usable(t, ctx, b, "vulkan", "KILN_REQUIRE_VULKAN")
	comp, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: gputest.AddOne()})
	if err != nil {
		t.Fatal(err)
	}
	const callers, rounds, n = 8, 25, 1000
	errs := make(chan error, callers)
	for c := range callers {
		go func() { errs <- oneCaller(ctx, b, comp.Pipeline, c, rounds, n) }()
	}
	for range callers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if strings.Contains(logs.String(), "validation layer reported") {
		t.Errorf("the plugin logged validation messages:\n%s", logs)
	}
}

// oneCaller is one caller of TestPluginProcessManyCallers: in each round it
// writes its input, sends two submits (in → out, out → in) without waiting,
// then waits for them and reads in back, which must hold the input plus 2.
func oneCaller(ctx context.Context, b *client.Conn, pipeline uint64, c, rounds, n int) error {
	size := 4 * uint64(n)
	var bufs [2]uint64
	for i := range bufs {
		a, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: size})
		if err != nil {
			return err
		}
		bufs[i] = a.Buffer
		defer b.FreeBuffer(ctx, a.Buffer)
	}
	dispatch := func(from, to uint64) *pluginapi.SubmitRequest {
		return &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{pluginapi.DispatchCommand{Pipeline: pipeline, Grid: [3]uint32{uint32(n+63) / 64, 1, 1},
			Bindings: []pluginapi.BufferRange{{Buffer: from, Size: size}, {Buffer: to, Size: size}}}}}
	}
	for r := range rounds {
		in := kernels.U32Bytes(gputest.U32s(n, func(i int) uint32 { return uint32(c<<24 | r<<16 | i) }))
		if err := b.WriteBuffer(ctx, bufs[0], 0, in); err != nil {
			return err
		}
		var pending []*client.Pending
		for _, req := range []*pluginapi.SubmitRequest{dispatch(bufs[0], bufs[1]), dispatch(bufs[1], bufs[0])} {
			p, err := b.SubmitAsync(ctx, req)
			if err != nil {
				return err
			}
			pending = append(pending, p)
		}
		for _, p := range pending {
			if _, err := p.Wait(ctx); err != nil {
				return err
			}
		}
		got := make([]byte, 4*n)
		if err := b.ReadBuffer(ctx, bufs[0], 0, got); err != nil {
			return err
		}
		for i, v := range kernels.BytesU32(got) {
			if want := uint32(c<<24|r<<16|i) + 2; v != want {
				return fmt.Errorf("caller %d, round %d: in[%d] = %#x, want %#x", c, r, i, v, want)
			}
		}
	}
	return nil
}

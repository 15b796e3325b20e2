package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/internal/syncbuf"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/backend"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
	"github.com/kiln-dev/kiln/plugins/internal/plugintest"
)

// initChildEnv makes the test binary, started as a child, do what "cuInit and
// device enumeration alone" means and exit: the baseline of BenchmarkStartDescribe.
const initChildEnv = "KILN_CUDA_INIT_CHILD"

// pluginEnv names a prebuilt kiln-backend-cuda for the tests to start instead of
// building one (for a test binary copied to a machine without Go).
const pluginEnv = "KILN_CUDA_PLUGIN"

// pluginBinary is kiln-backend-cuda, built once per test binary, or the one
// KILN_CUDA_PLUGIN names.
var pluginBinary = plugintest.Build("kiln-backend-cuda", pluginEnv)

func TestMain(m *testing.M) {
	if os.Getenv(initChildEnv) == "1" {
		os.Exit(initAndEnumerate())
	}
	code := m.Run()
	pluginBinary.Remove()
	os.Exit(code)
}

// initAndEnumerate loads the driver, calls cuInit and reads every device's name,
// UUID and the attributes a description needs, without a context.
func initAndEnumerate() int {
	d, err := driver.Load("")
	if err != nil {
		return 2
	}
	if err := d.Init(); err != nil {
		return 3
	}
	n, err := d.DeviceCount()
	if err != nil {
		return 4
	}
	for i := range n {
		dev, err := d.Device(i)
		if err != nil {
			return 5
		}
		dev.Name()
		dev.UUID()
		dev.TotalMem()
		for _, a := range []driver.Attribute{driver.AttrComputeCapabilityMajor, driver.AttrComputeCapabilityMinor, driver.AttrMaxThreadsPerBlock,
			driver.AttrMaxBlockDimX, driver.AttrMaxBlockDimY, driver.AttrMaxBlockDimZ, driver.AttrMaxGridDimX, driver.AttrMaxGridDimY,
			driver.AttrMaxGridDimZ, driver.AttrMaxSharedMemoryPerBlock, driver.AttrWarpSize, driver.AttrMultiprocessorCount,
			driver.AttrIntegrated, driver.AttrComputeMode, driver.AttrMemoryClockRate, driver.AttrGlobalMemoryBusWidth} {
			dev.Attribute(a)
		}
	}
	return 0
}

// startPlugin starts the plugin with extra environment variables and returns
// its Backend, its log and a function that stops it.
func startPlugin(tb testing.TB, env ...string) (*client.Conn, *syncbuf.Buffer, func()) {
	tb.Helper()
	return pluginBinary.Start(tb, env...)
}

// startDescribed starts the plugin, describes it (which opens the data plane)
// and returns its connection, whose capabilities it logs, and its log; the
// plugin stops when the benchmark ends.
func startDescribed(b *testing.B) (*client.Conn, *syncbuf.Buffer) {
	be, logs, stop := startPlugin(b)
	b.Cleanup(stop)
	if _, err := be.Describe(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Logf("capabilities: %s", be.Capabilities())
	return be, logs
}

// TestPluginProcessWithoutDriver starts the plugin pointed at a driver library
// that does not exist: it must start and report why CUDA is unavailable, with a
// Fix, through the wire.
func TestPluginProcessWithoutDriver(t *testing.T) {
	b, _, stop := startPlugin(t, backend.DriverEnv+"=libkiln-no-such-cuda.so.1")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "CUDA driver library libkiln-no-such-cuda.so.1 not found. Fix: install the NVIDIA driver (it provides libcuda.so.1) on a machine with an NVIDIA GPU, or set KILN_CUDA_DRIVER to the library's path"
	if d.ID != "cuda" || len(d.Adapters) != 1 || d.Adapters[0].Available || d.Adapters[0].Reason != want {
		t.Fatalf("description %+v, want id cuda and one unavailable adapter with reason %q", d, want)
	}
	var unavailable *pluginapi.UnavailableError
	if err := b.Open(ctx, 0); !errors.As(err, &unavailable) {
		t.Errorf("Open through the wire = %v, want an UnavailableError", err)
	}
}

// TestPluginProcess starts the plugin as the host does. Without a usable device it
// checks the unavailable reason (and fails under KILN_REQUIRE_CUDA=1); with one it
// runs vector_add through the wire: Describe, Open, Compile, Dispatch, Release,
// Close.
func TestPluginProcess(t *testing.T) {
	b, logs, stop := startPlugin(t)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plugintest.Usable(t, ctx, b, "cuda", "KILN_REQUIRE_CUDA")
	res := plugintest.VectorAdd(t, ctx, b, func(blob []byte) error {
		if len(blob) < 100 || string(blob[:8]) != "KILNCUBN" {
			return fmt.Errorf("compile returned a %d-byte blob, want a cubin behind kiln's header", len(blob))
		}
		return nil
	})
	if res.HostNanos <= 0 || res.DeviceNanos <= 0 {
		t.Errorf("host time %d, device time %d", res.HostNanos, res.DeviceNanos)
	}
	if caps := b.Capabilities(); caps.Protocol != 2 || !caps.Resident() || !caps.Artifacts || !caps.Health {
		t.Errorf("capabilities through the wire: %s", caps)
	}
	if log := logs.String(); !strings.Contains(log, "CUDA adapter") || !strings.Contains(log, "uuid=GPU-") {
		t.Errorf("the plugin did not log its adapter and UUID:\n%s", log)
	}
}

// requireDevice skips a benchmark without a usable CUDA device.
func requireDevice(b *testing.B) {
	d, err := driver.Load("")
	if err == nil {
		err = d.Init()
	}
	if err != nil {
		b.Skipf("no usable CUDA driver: %v", err)
	}
}

// BenchmarkStartDescribe starts the plugin process and describes it, per
// iteration, next to BenchmarkInitAlone's baseline. Describe needs cuInit and
// the device attributes only (no context, no measurement); the plugin starts
// cuInit while the host connects.
func BenchmarkStartDescribe(b *testing.B) { benchmarkStart(b, false) }

// BenchmarkStartOpen is BenchmarkStartDescribe plus opening adapter 0 (retaining
// its primary context, creating its stream), where the context's cost now lies.
func BenchmarkStartOpen(b *testing.B) { benchmarkStart(b, true) }

// benchmarkStart starts the plugin process and describes it, per iteration,
// and with open opens adapter 0 too.
func benchmarkStart(b *testing.B, open bool) {
	requireDevice(b)
	if _, err := pluginBinary.Path(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		be, _, stop := startPlugin(b)
		if _, err := be.Describe(ctx); err != nil {
			b.Fatal(err)
		}
		if open {
			if err := be.Open(ctx, 0); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		stop()
		b.StartTimer()
	}
}

// BenchmarkInitAlone starts a process that loads the driver, calls cuInit and
// enumerates the devices, per iteration: the baseline of BenchmarkStartDescribe.
func BenchmarkInitAlone(b *testing.B) {
	requireDevice(b)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		cmd := exec.Command(self, "-test.run", "^$")
		cmd.Env = append(os.Environ(), initChildEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

// BenchmarkWireSubmitSmall is one submit of a 1-element vector add over resident
// buffers from a host process through the plugin to the GPU and back (protocol 2,
// over the shared-memory data plane where it opens), waiting for its completion.
func BenchmarkWireSubmitSmall(b *testing.B) {
	requireDevice(b)
	conn, _ := startDescribed(b)
	ctx := context.Background()
	k, _ := kernels.Lookup("vector_add")
	c, err := conn.Compile(ctx, &pluginapi.CompileRequest{Program: k.Program()})
	if err != nil {
		b.Fatal(err)
	}
	var bufs []pluginapi.BufferRange
	for range 3 {
		r, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4})
		if err != nil {
			b.Fatal(err)
		}
		bufs = append(bufs, pluginapi.BufferRange{Buffer: r.Buffer, Size: 4})
	}
	req := &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{
		pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Bindings: bufs}}}
	gputest.SubmitMedian(b, conn, req)
}

// BenchmarkWireSmallDispatch is one 1-element vector add from a host process
// through the plugin to the GPU and back (protocol v1: the buffers travel in the
// request).
func BenchmarkWireSmallDispatch(b *testing.B) {
	requireDevice(b)
	be, _ := startDescribed(b)
	ctx := context.Background()
	k, _ := kernels.Lookup("vector_add")
	c, err := be.Compile(ctx, &pluginapi.CompileRequest{Program: k.Program()})
	if err != nil {
		b.Fatal(err)
	}
	one := kernels.F32Bytes([]float32{1})
	req := &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{one, one, nil}, OutputCounts: []uint32{0, 0, 1}}
	b.ResetTimer()
	for range b.N {
		res, err := be.Dispatch(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if got := kernels.BytesF32(res.Outputs[0]); got[0] != 2 {
			b.Fatal(fmt.Sprint("1 + 1 = ", got[0]))
		}
	}
}

// BenchmarkWireTransfer writes and reads a 64 MiB resident buffer from a host
// process through the plugin, per iteration: over the data plane the bytes lie
// in a shared-memory segment the plugin registered with the driver, so each copy
// is one DMA. It reports each direction's GB/s.
func BenchmarkWireTransfer(b *testing.B) {
	requireDevice(b)
	conn, logs := startDescribed(b)
	ctx := context.Background()
	const size = 64 << 20
	r, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: size})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	var write, read time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := conn.WriteBuffer(ctx, r.Buffer, 0, data); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := conn.ReadBuffer(ctx, r.Buffer, 0, data); err != nil {
			b.Fatal(err)
		}
		write, read = write+t1.Sub(t0), read+time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(size)*float64(b.N)/write.Seconds()/1e9, "write-GB/s")
	b.ReportMetric(float64(size)*float64(b.N)/read.Seconds()/1e9, "read-GB/s")
	if strings.Contains(logs.String(), "could not register") {
		b.Logf("the plugin could not register a segment:\n%s", logs)
	}
}

package host_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/internal/irprog"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// The examples run against the plugins in $KILN_PLUGIN_DIR (the test binary
// points it at a directory holding the CPU reference, cpu-ref).

// saxpy is y = a*x + y over f32, with a a specialization parameter.
func saxpy() *ir.Program { return irprog.Saxpy("example.saxpy.f32", 64) }

func f32s(v ...float32) []byte { return kernels.F32Bytes(v) }

func floats(b []byte) []float32 { return kernels.BytesF32(b) }

// cpuRef opens a host and acquires the CPU reference, as Example does; the
// caller closes the host.
func cpuRef(ctx context.Context) (*host.Host, *host.Backend, error) {
	h, err := host.Open(ctx, host.Options{})
	if err != nil {
		return nil, nil, err
	}
	b, err := h.Acquire(ctx, "cpu-ref")
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	return h, b, nil
}

// Open the host, acquire a backend, compile once and dispatch.
func Example() {
	ctx := context.Background()
	h, err := host.Open(ctx, host.Options{}) // plugins from $KILN_PLUGIN_DIR or the default places
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()

	b, err := h.Acquire(ctx, "cpu-ref") // or h.AcquirePreferred(ctx) for the best GPU
	if err != nil {
		fmt.Println(err)
		return
	}
	pl, err := b.Compile(ctx, saxpy(), host.CompileOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Release(ctx, pl)
	res, err := b.Dispatch(ctx, pl, host.Work{
		Invocations: [3]uint32{4, 1, 1},
		Inputs:      [][]byte{f32s(1, 2, 3, 4), f32s(10, 10, 10, 10)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Backend, floats(res.Outputs[0]))
	// Output: cpu-ref:0 [12 14 16 18]
}

// Host.Dispatch is the one-call path: choose, compile, dispatch, release.
func ExampleHost_Dispatch() {
	ctx := context.Background()
	h, err := host.Open(ctx, host.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	var spec ir.SpecMap
	spec.Set("a", ir.SpecF32(3))
	res, err := h.Dispatch(ctx, saxpy(), host.Launch{
		Backend:        "cpu-ref",
		CompileOptions: host.CompileOptions{Spec: spec},
		Work:           host.Work{Invocations: [3]uint32{2, 1, 1}, Inputs: [][]byte{f32s(1, 2), f32s(0, 0)}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(floats(res.Outputs[0]), res.Selection)
	// Output: [3 6] explicit
}

// Buffers stay in the plugin between dispatches; a Batch sends many commands at
// once, and re-dispatching over resident buffers moves no bytes.
func ExampleBackend_Submit() {
	ctx := context.Background()
	h, b, err := cpuRef(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	pl, err := b.Compile(ctx, saxpy(), host.CompileOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	x, err := b.Alloc(ctx, 16, host.UsageMap)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Free(ctx)
	y, err := b.Alloc(ctx, 16, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer y.Free(ctx)
	if err := x.Write(ctx, 0, f32s(1, 2, 3, 4)); err != nil {
		fmt.Println(err)
		return
	}

	var batch host.Batch
	batch.Fill(host.Bind(y), math.Float32bits(1)) // y = 1
	for range 3 {                                 // y = 2x + y, three times
		batch.Dispatch(pl, host.BoundWork{Invocations: [3]uint32{4, 1, 1}, Bindings: []host.Binding{host.Bind(x), host.Bind(y)}})
	}
	before := b.Traffic()
	if _, err := b.Submit(ctx, &batch); err != nil {
		fmt.Println(err)
		return
	}
	moved := b.Traffic().ToPlugin - before.ToPlugin

	out := make([]byte, 16)
	if err := y.Read(ctx, 0, out); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(floats(out), "bytes sent for the batch:", moved)
	// Output: [7 13 19 25] bytes sent for the batch: 0
}

// A host-visible buffer is filled in place: no copy, no call.
func ExampleBuffer_Map() {
	ctx := context.Background()
	h, b, err := cpuRef(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	buf, err := b.Alloc(ctx, 8, host.UsageMap)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer buf.Free(ctx)
	mem, err := buf.Map()
	if err != nil {
		fmt.Println(err)
		return
	}
	copy(mem, f32s(1.5, 2.5))
	out := make([]byte, 8)
	if err := buf.Read(ctx, 0, out); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(floats(out))
	// Output: [1.5 2.5]
}

// SubmitAsync returns at once; Wait collects the completion.
func ExampleBackend_SubmitAsync() {
	ctx := context.Background()
	h, b, err := cpuRef(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	buf, err := b.Alloc(ctx, 4, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer buf.Free(ctx)
	var first, second host.Batch
	first.Fill(host.Bind(buf), 1)
	second.Fill(host.Bind(buf), 2)
	p1, err := b.SubmitAsync(ctx, &first)
	if err != nil {
		fmt.Println(err)
		return
	}
	p2, err := b.SubmitAsync(ctx, &second) // runs after first
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range []*host.Pending{p1, p2} {
		if _, err := p.Wait(ctx); err != nil {
			fmt.Println(err)
			return
		}
	}
	out := make([]byte, 4)
	if err := buf.Read(ctx, 0, out); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(binary.LittleEndian.Uint32(out))
	// Output: 2
}

// Every error the host returns can be inspected with errors.As.
func Example_errors() {
	ctx := context.Background()
	h, b, err := cpuRef(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	pl, err := b.Compile(ctx, saxpy(), host.CompileOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	buf, err := b.Alloc(ctx, 8, 0)
	if err != nil {
		fmt.Println(err)
		return
	}

	_, notFound := h.Acquire(ctx, "no-such-backend")
	_, noBackend := h.AcquirePreferred(ctx) // only the reference oracle is installed
	_, launch := b.Dispatch(ctx, pl, host.Work{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{{1, 2, 3}}})
	_, rejected := b.Compile(ctx, saxpy(), host.CompileOptions{WorkgroupSize: [3]uint32{4096, 1, 1}})
	bufferErr := buf.Write(ctx, 4, make([]byte, 8))
	_, unsupported := b.Artifact(ctx, pl, "spirv")
	h.Close()
	_, closed := h.Acquire(ctx, "cpu-ref")

	for _, err := range []error{notFound, noBackend, launch, rejected, bufferErr, unsupported, closed} {
		fmt.Println(kind(err))
	}
	// Output:
	// NotFoundError
	// NoBackendError
	// LaunchError
	// RejectedError
	// BufferError
	// UnsupportedError
	// ClosedError
}

// kind names the typed error err carries.
func kind(err error) string {
	var (
		notFound    *host.NotFoundError
		noBackend   *host.NoBackendError
		crashed     *host.CrashedError
		timeout     *host.TimeoutError
		rejected    *host.RejectedError
		device      *host.DeviceError
		unavailable *host.UnavailableError
		badResult   *host.BadResultError
		launch      *host.LaunchError
		buffer      *host.BufferError
		lost        *host.LostBufferError
		unsupported *host.UnsupportedError
		closed      *host.ClosedError
	)
	switch {
	case errors.As(err, &lost): // before crashed: a lost buffer may wrap the crash
		return "LostBufferError"
	case errors.As(err, &notFound):
		return "NotFoundError"
	case errors.As(err, &noBackend):
		return "NoBackendError"
	case errors.As(err, &crashed):
		return "CrashedError"
	case errors.As(err, &timeout):
		return "TimeoutError"
	case errors.As(err, &rejected):
		return "RejectedError"
	case errors.As(err, &device):
		return "DeviceError"
	case errors.As(err, &unavailable):
		return "UnavailableError"
	case errors.As(err, &badResult):
		return "BadResultError"
	case errors.As(err, &launch):
		return "LaunchError"
	case errors.As(err, &buffer):
		return "BufferError"
	case errors.As(err, &unsupported):
		return "UnsupportedError"
	case errors.As(err, &closed):
		return "ClosedError"
	}
	return fmt.Sprintf("untyped: %v", err)
}

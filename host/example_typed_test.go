package host_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"

	"github.com/kiln-dev/kiln/host"
)

// Bytes encodes typed values as the little-endian bytes a buffer holds, bit
// for bit; Values decodes them back.
func ExampleBytes() {
	b := host.Bytes([]float32{1, float32(math.Copysign(0, -1))})
	fmt.Printf("% x\n", b)
	xs, err := host.Values[float32](b)
	fmt.Println(xs, math.Signbit(float64(xs[1])), err)
	// Output:
	// 00 00 80 3f 00 00 00 80
	// [1 -0] true <nil>
}

// Values refuses bytes that are not a whole number of elements.
func ExampleValues() {
	halves, err := host.Values[uint16]([]byte{0x00, 0x3c, 0x00, 0xc0}) // f16 1.0 and -2.0, raw
	fmt.Printf("%#x %v\n", halves, err)
	_, err = host.Values[int32](make([]byte, 6))
	fmt.Println(err)
	// Output:
	// [0x3c00 0xc000] <nil>
	// 6 bytes are not a whole number of 4-byte int32 elements. Fix: decode the buffer as the type it holds
}

// saxpyOnCPURef opens a host and runs saxpy over work on the CPU reference,
// as ExampleHost_Dispatch does.
func saxpyOnCPURef(ctx context.Context, work host.Work) (*host.Result, error) {
	h, err := host.Open(ctx, host.Options{})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return h.Dispatch(ctx, saxpy(), host.Launch{Backend: "cpu-ref", Work: work})
}

// Inputs by the program's buffer names, outputs by name as typed values.
func ExampleInput() {
	res, err := saxpyOnCPURef(context.Background(), host.Work{
		Invocations: [3]uint32{3, 1, 1},
		Named:       []host.NamedInput{host.Input("x", []float32{1, 2, 3}), host.Input("y", []float32{10, 20, 30})},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	y, err := host.OutputAs[float32](res, "y")
	fmt.Println(y, err)
	// Output: [12 24 36] <nil>
}

// A named input is checked against its buffer: its name, and its element
// type against the buffer's.
func ExampleInput_errors() {
	for _, in := range []host.NamedInput{host.Input("z", []float32{1}), host.Input("x", []int32{1})} {
		_, err := saxpyOnCPURef(context.Background(), host.Work{
			Invocations: [3]uint32{1, 1, 1},
			Named:       []host.NamedInput{in, host.Input("y", []float32{0})},
		})
		var le *host.LaunchError
		fmt.Println(errors.As(err, &le), err)
	}
	// Output:
	// true launch of example.saxpy.f32: no buffer "z" in the program; it has x, y. Fix: name one of its buffers
	// true launch of example.saxpy.f32: buffer x (binding 0) holds f32, its input is int32. Fix: pass []float32 (or the raw bits by binding in Work.Inputs)
}

// Result.Output is an output buffer's bytes by name; OutputAs decodes them.
func ExampleResult_Output() {
	res, err := saxpyOnCPURef(context.Background(), host.Work{
		Invocations: [3]uint32{1, 1, 1},
		Inputs:      [][]byte{host.Bytes([]float32{1}), host.Bytes([]float32{1})},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	y, err := res.Output("y")
	fmt.Printf("% x %v\n", y, err)
	_, err = res.Output("x")
	fmt.Println(err)
	// Output:
	// 00 00 40 40 <nil>
	// launch of example.saxpy.f32: no output buffer "x"; the outputs are y. Fix: name a write or read_write buffer
}

// OutputAs refuses a type that is not the buffer's.
func ExampleOutputAs() {
	res, err := saxpyOnCPURef(context.Background(), host.Work{
		Invocations: [3]uint32{2, 1, 1},
		Named:       []host.NamedInput{host.Input("x", []float32{1, 2}), host.Input("y", []float32{0, 0})},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = host.OutputAs[uint32](res, "y")
	fmt.Println(err)
	// Output: launch of example.saxpy.f32: output buffer y holds f32, not uint32. Fix: read it as []float32
}

// residentBuffer opens a host and returns a 12-byte buffer of cpu-ref, with a
// function that frees it and closes the host.
func residentBuffer(ctx context.Context) (*host.Buffer, func(), error) {
	h, b, err := cpuRef(ctx)
	if err != nil {
		return nil, nil, err
	}
	buf, err := b.Alloc(ctx, 12, 0)
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	return buf, func() { buf.Free(ctx); h.Close() }, nil
}

// Upload writes typed values to the start of a buffer that stays in the
// plugin; Download reads all of it back.
func ExampleUpload() {
	ctx := context.Background()
	buf, done, err := residentBuffer(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	if err := host.Upload(ctx, buf, []int32{-1, 2, -3}); err != nil {
		fmt.Println(err)
		return
	}
	all, err := host.Download[int32](ctx, buf)
	fmt.Println(all, err)
	// Output: [-1 2 -3] <nil>
}

// Download reads a whole buffer as typed values (here the raw 2-byte halves of
// a new, zero-filled buffer).
func ExampleDownload() {
	ctx := context.Background()
	buf, done, err := residentBuffer(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	zeros, err := host.Download[uint16](ctx, buf)
	fmt.Println(zeros, err)
	// Output: [0 0 0 0 0 0] <nil>
}

// ReadInto fills the caller's slice from the start of a buffer, so repeated
// reads allocate nothing new for the values.
func ExampleReadInto() {
	ctx := context.Background()
	buf, done, err := residentBuffer(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	if err := host.Upload(ctx, buf, []float32{0.5, 1.5, 2.5}); err != nil {
		fmt.Println(err)
		return
	}
	first := make([]float32, 2)
	err = host.ReadInto(ctx, buf, first)
	fmt.Println(first, err)
	// Output: [0.5 1.5] <nil>
}

// Options.Slog sends the host's log and the plugins' stderr to an
// *slog.Logger.
func ExampleOptions_slog() {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := host.Open(ctx, host.Options{Slog: logger})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	fmt.Println(h.IDs())
	// Output: [cpu-ref]
}

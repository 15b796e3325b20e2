package gputest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Run compiles p on adapter 0 with the launch's specialization and workgroup
// size, dispatches it once over the launch's grid, inputs, output counts and
// uniforms, and releases the pipeline (failing t if that fails).
func Run(t testing.TB, b pluginapi.Backend, p *ir.Program, l kernels.Case) (*pluginapi.DispatchResult, error) {
	t.Helper()
	ctx := context.Background()
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: p, Spec: l.Spec, WorkgroupSize: l.WorkgroupSize})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := b.Release(ctx, c.Pipeline); err != nil {
			t.Errorf("Release: %v", err)
		}
	}()
	return b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: l.Grid, Inputs: l.Inputs, OutputCounts: l.OutputCounts, Uniforms: l.Uniforms})
}

// CorpusMatchesReference runs every corpus kernel at every corpus size on b
// (adapter 0, opened) and on the CPU reference and compares the outputs with the
// kernel's Check; id names the backend in messages.
func CorpusMatchesReference(t *testing.T, b pluginapi.Backend, id string) {
	for _, k := range kernels.All() {
		for _, size := range k.Sizes {
			t.Run(fmt.Sprintf("%s/%d", k.Name, size), func(t *testing.T) {
				c := k.NewCase(rand.New(rand.NewPCG(uint64(size), 0x6b696c6e)), size)
				p := k.Program()
				want := Oracle(t, p, c)
				got, err := Run(t, b, p, c)
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				if err := k.Check(got.Outputs, want); err != nil {
					t.Errorf("%s differs from cpu-ref: %v", id, err)
				}
			})
		}
	}
}

// BadLaunch is a dispatch request Dispatch must reject with a RejectedError
// whose text contains Want.
type BadLaunch struct {
	Name string
	Req  pluginapi.DispatchRequest
	Want string
}

// BadLaunches are the requests every backend rejects for a pipeline of
// [AddOne]: an unknown pipeline, too many inputs, an input for a write buffer, a
// partial element, a grid of more than 2^32 invocations.
func BadLaunches(addOne uint64) []BadLaunch {
	four := make([]byte, 16)
	return []BadLaunch{
		{"unknown pipeline", pluginapi.DispatchRequest{Pipeline: addOne + 100, Grid: [3]uint32{1, 1, 1}}, "no pipeline"},
		{"too many inputs", pluginapi.DispatchRequest{Pipeline: addOne, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{four, nil, nil}}, "inputs"},
		{"input for a write buffer", pluginapi.DispatchRequest{Pipeline: addOne, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{four, four}}, "write-only"},
		{"partial element", pluginapi.DispatchRequest{Pipeline: addOne, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{four[:5]}}, "multiple of 4"},
		{"more than 2^32 invocations", pluginapi.DispatchRequest{Pipeline: addOne, Grid: [3]uint32{1 << 27, 1, 1}, Inputs: [][]byte{four}}, "2^32"},
	}
}

// DispatchRejects dispatches every launch on b and fails t for each that is not
// rejected as it says. b is the backend as callers see it: a GPU backend behind
// pluginapi.Checked, which compiled the launches' pipelines.
func DispatchRejects(t *testing.T, b pluginapi.Backend, launches []BadLaunch) {
	t.Helper()
	for _, tc := range launches {
		_, err := b.Dispatch(context.Background(), &tc.Req)
		var rejected *pluginapi.RejectedError
		if !errors.As(err, &rejected) || !strings.Contains(err.Error(), tc.Want) {
			t.Errorf("%s: Dispatch = %v, want a RejectedError mentioning %q", tc.Name, err, tc.Want)
		}
	}
}

// GridWithAZeroAxisRunsNothing dispatches [AddOne] over grids with a zero axis:
// one zeroed output and no device time.
func GridWithAZeroAxisRunsNothing(t *testing.T, b pluginapi.Backend) {
	in := kernels.U32Bytes([]uint32{1, 2, 3})
	for _, grid := range [][3]uint32{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {0, math.MaxUint32, 0}} {
		res, err := Run(t, b, AddOne(), kernels.Case{Grid: grid, Inputs: [][]byte{in}, OutputCounts: []uint32{0, 3}})
		if err != nil {
			t.Fatalf("grid %v: %v", grid, err)
		}
		if len(res.Outputs) != 1 || !bytes.Equal(res.Outputs[0], make([]byte, 12)) || res.DeviceNanos != 0 {
			t.Errorf("grid %v: outputs %v, device time %d; want one zeroed output and no device time", grid, res.Outputs, res.DeviceNanos)
		}
	}
}

// ReleaseAndClose checks the handle contract around Release and Close: a second
// Release and a Dispatch of a released pipeline are rejected, Close may be
// called twice, and Compile fails after it. b is closed when it returns.
func ReleaseAndClose(t *testing.T, b pluginapi.Backend) {
	ctx := context.Background()
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: AddOne()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, c.Pipeline); err != nil {
		t.Fatal(err)
	}
	var rejected *pluginapi.RejectedError
	if err := b.Release(ctx, c.Pipeline); !errors.As(err, &rejected) {
		t.Errorf("second Release = %v, want a RejectedError", err)
	}
	if _, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}}); !errors.As(err, &rejected) {
		t.Errorf("Dispatch of a released pipeline = %v, want a RejectedError", err)
	}
	if _, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: AddOne()}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: AddOne()}); err == nil {
		t.Error("Compile after Close succeeded")
	}
}

// ConcurrentDispatches compiles and dispatches [AddOne] from four goroutines at
// once, each with its own sizes, and checks every result.
func ConcurrentDispatches(t *testing.T, b pluginapi.Backend) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: AddOne()})
			if err != nil {
				errs <- err
				return
			}
			defer b.Release(ctx, c.Pipeline)
			for r := range 5 {
				n := 100*g + r + 1
				in := U32s(n, func(i int) uint32 { return uint32(i * g) })
				res, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{uint32(n+63) / 64, 1, 1}, Inputs: [][]byte{kernels.U32Bytes(in)}, OutputCounts: []uint32{0, uint32(n)}})
				if err != nil {
					errs <- err
					return
				}
				for i, v := range kernels.BytesU32(res.Outputs[0]) {
					if v != in[i]+1 {
						errs <- errors.New("wrong result under concurrency")
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// LongLoops runs [Spin] with loops of 200000 iterations against the reference.
func LongLoops(t *testing.T, b pluginapi.Backend) {
	var spec ir.SpecMap
	spec.Set("n", ir.SpecU32(200000))
	grid := [3]uint32{2, 1, 1}
	want, err := interp.Run(context.Background(), Spin(), interp.Options{Spec: spec}, interp.Launch{Grid: grid, OutputCounts: []uint32{1}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Run(t, b, Spin(), kernels.Case{Spec: spec, Grid: grid, OutputCounts: []uint32{1}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Outputs[0], want[0]) {
		t.Errorf("a loop of 200000 iterations differs from the reference")
	}
}

// AbandonedDispatch checks that Dispatch of req (a pipeline of [Spin] running
// about took, well past 50ms) stops waiting when its context ends: at once for a
// cancelled context, at the deadline for a 50ms one. With behind, a dispatch
// whose own 10ms deadline ends while the abandoned one still runs must fail with
// its deadline too instead of hanging. Last, the abandoned work finishes in the
// background and the device runs [AddOne] after it.
func AbandonedDispatch(t *testing.T, b pluginapi.Backend, req *pluginapi.DispatchRequest, took string, behind bool) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Dispatch(cancelled, req); !errors.Is(err, context.Canceled) {
		t.Errorf("Dispatch with a cancelled context = %v, want context.Canceled", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if _, err := b.Dispatch(short, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dispatch of about %s past a 50ms deadline = %v, want context.DeadlineExceeded", took, err)
	}
	t.Logf("the abandoned dispatch returned after %v", time.Since(begin))
	if behind {
		busy, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		if _, err := b.Dispatch(busy, req); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Dispatch behind the abandoned one = %v, want context.DeadlineExceeded", err)
		}
	}
	res, err := Run(t, b, AddOne(), kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{kernels.U32Bytes([]uint32{41})}, OutputCounts: []uint32{0, 1}})
	if err != nil || !bytes.Equal(res.Outputs[0], kernels.U32Bytes([]uint32{42})) {
		t.Errorf("dispatch after an abandoned one: %v, %v", res, err)
	}
}

// Limits names, in a backend's words, the device limits [CheckProgramLimits]
// runs into: what a rejection for each must mention.
type Limits struct {
	// Axis is the largest workgroup size per axis, Invocations the most
	// invocations per workgroup, Shared the most shared memory per workgroup.
	Axis, Invocations, Shared string
}

// CheckProgramLimits checks the compile-time checks of a program as a Compile
// request meets them, the SDK's (pluginapi.CheckCompile) and then the backend's
// limits, against a device of workgroups up to 256×256×64 and 256 invocations,
// with 1024 bytes of shared memory: they must reject (a RejectedError with a
// "Fix:") workgroups and overrides over those limits, too much shared memory,
// bad overrides and specialization values, and invalid programs; and accept a
// program within them, limits returning the workgroup size it runs with.
func CheckProgramLimits(t *testing.T, limits func(p *ir.Program, override [3]uint32) ([3]uint32, error), words Limits) {
	check := func(p *ir.Program, spec ir.SpecMap, override [3]uint32) ([3]uint32, error) {
		if err := pluginapi.CheckCompile(&pluginapi.CompileRequest{Program: p, Spec: spec, WorkgroupSize: override}); err != nil {
			return [3]uint32{}, err
		}
		return limits(p, override)
	}
	build := func(wg [3]uint32, shared uint32) *ir.Program {
		b := ir.NewBuilder("limits", wg[0], wg[1], wg[2])
		out := b.Buffer("out", ir.U32, ir.Write)
		b.Param("n", ir.U32, ir.LitU32(1))
		if shared > 0 {
			b.Shared("sh", ir.U32, shared)
		}
		b.Store(out, ir.GlobalID(0), ir.Param("n"))
		return b.Program()
	}
	var wrongType, unknown ir.SpecMap
	wrongType.Set("n", ir.SpecF32(1))
	unknown.Set("m", ir.SpecU32(1))
	for _, c := range []struct {
		name     string
		p        *ir.Program
		spec     ir.SpecMap
		override [3]uint32
		want     string
	}{
		{"axis over the limit", build([3]uint32{1, 1, 128}, 0), ir.SpecMap{}, [3]uint32{}, words.Axis},
		{"too many invocations", build([3]uint32{16, 16, 2}, 0), ir.SpecMap{}, [3]uint32{}, words.Invocations},
		{"override over the limit", build([3]uint32{64, 1, 1}, 0), ir.SpecMap{}, [3]uint32{16, 32, 1}, words.Invocations},
		{"bad override", build([3]uint32{64, 1, 1}, 0), ir.SpecMap{}, [3]uint32{0, 4, 1}, "override"},
		{"too much shared memory", build([3]uint32{64, 1, 1}, 257), ir.SpecMap{}, [3]uint32{}, words.Shared},
		{"spec of the wrong type", build([3]uint32{64, 1, 1}, 0), wrongType, [3]uint32{}, "specialization value"},
		{"spec of an unknown parameter", build([3]uint32{64, 1, 1}, 0), unknown, [3]uint32{}, "does not declare"},
		{"invalid program", &ir.Program{Name: "empty"}, ir.SpecMap{}, [3]uint32{}, "invalid"},
	} {
		_, err := check(c.p, c.spec, c.override)
		var rejected *pluginapi.RejectedError
		if !errors.As(err, &rejected) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s: the checks give %v, want a RejectedError mentioning %q with a Fix", c.name, err, c.want)
		}
	}
	wg, err := check(build([3]uint32{64, 1, 1}, 256), ir.SpecMap{}, [3]uint32{8, 8, 4})
	if err != nil || wg != [3]uint32{8, 8, 4} {
		t.Errorf("a program within the limits: %v, %v", wg, err)
	}
}

// Oracle runs p for c on the CPU reference interpreter and returns its
// outputs, failing the test if it cannot.
func Oracle(t testing.TB, p *ir.Program, c kernels.Case) [][]byte {
	t.Helper()
	want, err := interp.Run(context.Background(), p, interp.Options{WorkgroupSize: c.WorkgroupSize, Spec: c.Spec},
		interp.Launch{Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
	if err != nil {
		t.Fatalf("interp: %v", err)
	}
	return want
}

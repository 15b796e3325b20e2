package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/verify"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cpuref/backend"
)

// buildPlugin builds this command into a temporary directory, as an operator would
// install it, and returns the executable's path.
func buildPlugin(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kiln-backend-cpuref")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build the plugin: %v\n%s\nFix: make sure the go command is on PATH", err, out)
	}
	return bin
}

// start launches the plugin with the host-side helpers and returns its client and
// Backend; the plugin is killed when the test ends.
func start(t testing.TB, bin string, logs *bytes.Buffer) (*plugin.Client, *client.Conn) {
	t.Helper()
	logger := hclog.New(&hclog.LoggerOptions{Name: "host", Output: logs, Level: hclog.Debug})
	c := plugin.NewClient(client.Config(exec.Command(bin), logger))
	t.Cleanup(c.Kill)
	b, err := client.Dispense(c)
	if err != nil {
		t.Fatalf("start %s: %v\nlog:\n%s", bin, err, logs)
	}
	return c, b
}

// TestServeThroughAProcess builds kiln-backend-cpuref, starts it as the host does,
// and runs a corpus kernel through it: Describe, Open, Compile, Dispatch (checked
// against the interpreter in this process), Release and Close.
func TestServeThroughAProcess(t *testing.T) {
	bin := buildPlugin(t)
	var logs bytes.Buffer
	c, b := start(t, bin, &logs)
	ctx := context.Background()

	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != backend.ID || d.Version != backend.Version || !d.ReferenceOracle || d.Precedence != nil ||
		len(d.Adapters) != 1 || d.Adapters[0].Profile.TimingQuality != pluginapi.HostOnly {
		t.Errorf("description over the wire: %+v", d)
	}
	if err := b.Open(ctx, 0); err != nil {
		t.Fatal(err)
	}

	k, ok := kernels.Lookup("reduce_sum")
	if !ok {
		t.Fatal("corpus has no reduce_sum")
	}
	p := k.Program()
	kc := k.NewCase(rand.New(rand.NewPCG(3, 4)), 100_000)
	comp, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: p, Spec: kc.Spec, WorkgroupSize: kc.WorkgroupSize})
	if err != nil {
		t.Fatal(err)
	}
	if comp.CompileNanos <= 0 {
		t.Errorf("compile time %d", comp.CompileNanos)
	}
	res, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: comp.Pipeline, Grid: kc.Grid, Inputs: kc.Inputs, OutputCounts: kc.OutputCounts, Uniforms: kc.Uniforms})
	if err != nil {
		t.Fatal(err)
	}
	want, err := interp.Run(ctx, p, interp.Options{Spec: kc.Spec, WorkgroupSize: kc.WorkgroupSize},
		interp.Launch{Grid: kc.Grid, Inputs: kc.Inputs, OutputCounts: kc.OutputCounts, Uniforms: kc.Uniforms})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Compare(p, res.Outputs, want)
	if err != nil {
		t.Error(err)
	}
	if rep.MaxULP != 0 || rep.Elements == 0 {
		t.Errorf("report %+v: the plugin must match the in-process interpreter bit for bit", rep)
	}
	if res.HostNanos <= 0 {
		t.Errorf("host time %d", res.HostNanos)
	}

	if err := b.Release(ctx, comp.Pipeline); err != nil {
		t.Fatal(err)
	}
	_, err = b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: comp.Pipeline})
	var rej *pluginapi.RejectedError
	if !errors.As(err, &rej) || !strings.Contains(err.Error(), fmt.Sprintf("no pipeline %d", comp.Pipeline)) {
		t.Errorf("dispatch after release: got %v, want a RejectedError naming the pipeline", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c.Kill()
	if !c.Exited() {
		t.Error("plugin still running after Kill")
	}
}

// TestRunByHand pins what an operator sees when starting the plugin directly: a
// notice on stderr, nothing on stdout, a failing exit status.
func TestRunByHand(t *testing.T) {
	bin := buildPlugin(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), pluginapi.Handshake().MagicCookieKey+"=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Errorf("run by hand: %v, want a non-zero exit", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
	if !strings.Contains(stderr.String(), "plugin") {
		t.Errorf("stderr %q does not say that this is a plugin", stderr.String())
	}
}

// BenchmarkStartAndHandshake measures launching the plugin process through the
// handshake and a first Describe.
func BenchmarkStartAndHandshake(b *testing.B) {
	bin := buildPlugin(b)
	b.ResetTimer()
	for range b.N {
		var logs bytes.Buffer
		c, be := start(b, bin, &logs)
		if _, err := be.Describe(context.Background()); err != nil {
			b.Fatal(err)
		}
		c.Kill()
	}
}

// BenchmarkDispatchRoundTrip measures one dispatch of a one-element vector_add
// through the plugin process: the fixed cost of the boundary.
func BenchmarkDispatchRoundTrip(b *testing.B) {
	var logs bytes.Buffer
	_, be := start(b, buildPlugin(b), &logs)
	k, _ := kernels.Lookup("vector_add")
	kc := k.NewCase(rand.New(rand.NewPCG(1, 1)), 1)
	dispatchLoop(b, be, k, kc)
}

// dispatchLoop compiles k on be and dispatches case kc b.N times.
func dispatchLoop(b *testing.B, be pluginapi.Backend, k kernels.Kernel, kc kernels.Case) {
	b.Helper()
	ctx := context.Background()
	comp, err := be.Compile(ctx, &pluginapi.CompileRequest{Program: k.Program(), Spec: kc.Spec, WorkgroupSize: kc.WorkgroupSize})
	if err != nil {
		b.Fatal(err)
	}
	req := &pluginapi.DispatchRequest{Pipeline: comp.Pipeline, Grid: kc.Grid, Inputs: kc.Inputs, OutputCounts: kc.OutputCounts, Uniforms: kc.Uniforms}
	b.ResetTimer()
	for range b.N {
		if _, err := be.Dispatch(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// largeSaxpy is a saxpy over 16 Mi elements: 64 MiB of x and 64 MiB of y in, 64
// MiB of y out.
func largeSaxpy(b *testing.B) (kernels.Kernel, kernels.Case) {
	k, _ := kernels.Lookup("saxpy")
	kc := k.NewCase(rand.New(rand.NewPCG(1, 1)), 16<<20)
	var moved int64
	for _, in := range kc.Inputs {
		moved += int64(len(in))
	}
	b.SetBytes(moved + int64(len(kc.Inputs[1])))
	return k, kc
}

// BenchmarkDispatchLarge moves a 16 Mi-element saxpy through the plugin process;
// the throughput counts the bytes in and out.
func BenchmarkDispatchLarge(b *testing.B) {
	var logs bytes.Buffer
	_, be := start(b, buildPlugin(b), &logs)
	k, kc := largeSaxpy(b)
	dispatchLoop(b, be, k, kc)
}

// BenchmarkInProcessLarge is BenchmarkDispatchLarge on the interpreter in this
// process, the baseline the plugin boundary adds to.
func BenchmarkInProcessLarge(b *testing.B) {
	k, kc := largeSaxpy(b)
	kern, err := interp.Compile(k.Program(), interp.Options{Spec: kc.Spec, WorkgroupSize: kc.WorkgroupSize})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := kern.Run(context.Background(), interp.Launch{Grid: kc.Grid, Inputs: kc.Inputs, OutputCounts: kc.OutputCounts, Uniforms: kc.Uniforms}); err != nil {
			b.Fatal(err)
		}
	}
}

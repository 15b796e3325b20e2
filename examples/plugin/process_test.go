package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
)

// TestCoreOnlyPluginEndToEnd builds this plugin — which implements only the core
// pluginapi.Backend — starts it as a host does, on protocol 2 and as a protocol-1
// plugin (KILN_PLUGIN_PROTOCOLS=1, as if built against the protocol-1 SDK), and
// runs a saxpy through each: the host side sees what it lacks, and the inline
// dispatch works on both (through shared memory on protocol 2).
func TestCoreOnlyPluginEndToEnd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kiln-backend-example")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build the plugin: %v\n%s", err, out)
	}
	for _, c := range []struct {
		protocols string
		want      int
	}{{"", 2}, {"1", 1}} {
		t.Run("protocol"+c.protocols, func(t *testing.T) {
			t.Setenv(pluginapi.ProtocolsEnv, c.protocols)
			var logs bytes.Buffer
			logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
			pc := plugin.NewClient(client.Config(exec.Command(bin), logger))
			t.Cleanup(pc.Kill)
			conn, err := client.Dispense(pc)
			if err != nil {
				t.Fatalf("%v\n%s", err, &logs)
			}
			ctx := context.Background()
			if _, err := conn.Describe(ctx); err != nil {
				t.Fatal(err)
			}
			caps := conn.Capabilities()
			if caps.Protocol != c.want || caps.Buffers || caps.Submit || len(caps.Missing()) == 0 {
				t.Fatalf("capabilities %+v", caps)
			}
			if c.want == 2 && !caps.SharedMemory {
				t.Errorf("no data plane on protocol 2: %s", caps.DataPlane)
			}
			if c.want == 1 && !strings.Contains(caps.Missing()[0], "protocol 1") {
				t.Errorf("missing on protocol 1: %q", caps.Missing())
			}
			if err := conn.Open(ctx, 0); err != nil {
				t.Fatal(err)
			}
			saxpy, _ := kernels.Lookup("saxpy") // y = a*x + y, a = 2 by default
			pl, err := conn.Compile(ctx, &pluginapi.CompileRequest{Program: saxpy.Program()})
			if err != nil {
				t.Fatal(err)
			}
			const n = 100
			xs, ys := make([]float32, n), make([]float32, n)
			for j := range n {
				xs[j], ys[j] = float32(j), 1
			}
			res, err := conn.DispatchSized(ctx, &pluginapi.DispatchRequest{Pipeline: pl.Pipeline, Grid: [3]uint32{2, 1, 1},
				Inputs: [][]byte{kernels.F32Bytes(xs), kernels.F32Bytes(ys)}}, []int{4 * n})
			if err != nil {
				t.Fatal(err)
			}
			y := kernels.BytesF32(res.Outputs[0])
			if len(y) != n {
				t.Fatalf("y has %d elements, want %d", len(y), n)
			}
			for j, got := range y {
				if want := 2*float32(j) + 1; got != want {
					t.Fatalf("y[%d] = %v, want %v", j, got, want)
				}
			}
			if err := conn.Close(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

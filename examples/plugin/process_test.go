package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/ir"
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
			client := plugin.NewClient(pluginapi.ClientConfig(exec.Command(bin), logger))
			t.Cleanup(client.Kill)
			b, err := pluginapi.Dispense(client)
			if err != nil {
				t.Fatalf("%v\n%s", err, &logs)
			}
			conn := b.(pluginapi.Conn)
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
			pb := ir.NewBuilder("example.saxpy.f32", 64, 1, 1)
			a := pb.Param("a", ir.F32, ir.LitF32(2))
			x := pb.Buffer("x", ir.F32, ir.Read)
			y := pb.Buffer("y", ir.F32, ir.ReadWrite)
			i := pb.Let("i", ir.GlobalID(0))
			pb.If(ir.Lt(i, ir.Len(y)), func(then *ir.Block) {
				then.Store(y, i, ir.Add(ir.Mul(a, ir.Load(x, i)), ir.Load(y, i)))
			})
			pl, err := conn.Compile(ctx, &pluginapi.CompileRequest{Program: pb.MustBuild()})
			if err != nil {
				t.Fatal(err)
			}
			const n = 100
			xs, ys := make([]byte, 4*n), make([]byte, 4*n)
			for j := range n {
				binary.LittleEndian.PutUint32(xs[4*j:], math.Float32bits(float32(j)))
				binary.LittleEndian.PutUint32(ys[4*j:], math.Float32bits(1))
			}
			res, err := conn.DispatchSized(ctx, &pluginapi.DispatchRequest{Pipeline: pl.Pipeline, Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{xs, ys}}, []int{4 * n})
			if err != nil {
				t.Fatal(err)
			}
			for j := range n {
				if got, want := math.Float32frombits(binary.LittleEndian.Uint32(res.Outputs[0][4*j:])), 2*float32(j)+1; got != want {
					t.Fatalf("y[%d] = %v, want %v", j, got, want)
				}
			}
			if err := conn.Close(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

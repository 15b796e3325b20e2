package client

import (
	"context"
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
)

// BenchmarkSubmitRoundTrip is one submit of one 4-byte fill over a resident
// buffer, through the in-process wire: the transport's own round trip, without
// a kernel. Run with KILN_DATA_PLANE=grpc for the gRPC fallback.
func BenchmarkSubmitRoundTrip(b *testing.B) {
	planes := map[string]string{"shm": "", "grpc": "grpc"}
	for name, env := range planes {
		b.Run(name, func(b *testing.B) {
			b.Setenv(DataPlaneEnv, env)
			ctx := context.Background()
			conn := serveV2(b, newMemBackend())
			buf, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4})
			if err != nil {
				b.Fatal(err)
			}
			req := &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{pluginapi.FillCommand{Dst: pluginapi.BufferRange{Buffer: buf.Buffer, Size: 4}, Value: 1}}}
			b.ResetTimer()
			for range b.N {
				if _, err := conn.Submit(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

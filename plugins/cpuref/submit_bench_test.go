package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
)

// BenchmarkSubmitThroughAProcess is one submit of a 4-byte fill over a resident
// buffer through the plugin process, on the SDK's host side alone (no host
// package): the data plane's round trip between two processes.
func BenchmarkSubmitThroughAProcess(b *testing.B) {
	bin := buildPlugin(b)
	var logs bytes.Buffer
	_, conn := start(b, bin, &logs)
	ctx := context.Background()
	if _, err := conn.Describe(ctx); err != nil {
		b.Fatal(err)
	}
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
}

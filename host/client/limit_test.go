package client

import (
	"context"
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
)

func TestReceiveLimitRefusesAnOversizeResponse(t *testing.T) {
	big := make([]byte, 1<<20)
	b := serveInProcess(t, &fakeBackend{dispatchResult: &pluginapi.DispatchResult{Outputs: [][]byte{big}}})
	_, err := b.Dispatch(WithReceiveLimit(context.Background(), 100), &pluginapi.DispatchRequest{Pipeline: 1})
	var tooLarge *ResponseTooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("got %T %v, want *ResponseTooLargeError", err, err)
	}
	if tooLarge.Method != "Dispatch" || tooLarge.Limit != 100 || tooLarge.Size < int64(len(big)) {
		t.Fatalf("error %+v, want Dispatch, limit 100, size >= %d", tooLarge, len(big))
	}
	limit := len(big) + ResponseOverhead + PerBufferOverhead
	res, err := b.Dispatch(WithReceiveLimit(context.Background(), limit), &pluginapi.DispatchRequest{Pipeline: 1})
	if err != nil || len(res.Outputs) != 1 || len(res.Outputs[0]) != len(big) {
		t.Fatalf("a response within the limit (%d bytes): %v", limit, err)
	}
	if _, err := b.Dispatch(context.Background(), &pluginapi.DispatchRequest{Pipeline: 1}); err != nil {
		t.Fatalf("without a limit: %v", err)
	}
}

func TestPlainPluginErrorIsTyped(t *testing.T) {
	b := serveInProcess(t, &fakeBackend{err: errors.New("out of host memory")})
	err := b.Open(context.Background(), 0)
	var plain *pluginapi.PluginError
	if !errors.As(err, &plain) || err.Error() != "out of host memory" {
		t.Fatalf("got %T %v, want *pluginapi.PluginError with the message", err, err)
	}
}

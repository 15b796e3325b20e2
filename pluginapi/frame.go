package pluginapi

import (
	"context"
	"errors"

	"github.com/kiln-dev/kiln/internal/wire"
)

// The data plane's frames are internal/wire's; what is the SDK's here is how
// its types and errors map onto them on the plugin's side: requests from the
// wire, completions to it (the host's side is package host/client's).

// rangeFromWire maps a range of the wire onto a BufferRange.
func rangeFromWire(r wire.Range) BufferRange {
	return BufferRange{Buffer: r.Buffer, Offset: r.Offset, Size: r.Size}
}

// commandsFromWire maps a decoded submit's commands back to the SDK's.
func commandsFromWire(cmds []wire.Command) []SubmitCommand {
	out := make([]SubmitCommand, 0, len(cmds))
	for _, c := range cmds {
		switch c.Op {
		case wire.OpDispatch:
			d := DispatchCommand{Pipeline: c.Pipeline, Grid: c.Grid, Uniforms: c.Uniforms}
			if c.Bindings != nil {
				d.Bindings = make([]BufferRange, len(c.Bindings))
				for j, b := range c.Bindings {
					d.Bindings[j] = rangeFromWire(b)
				}
			}
			out = append(out, d)
		case wire.OpCopy:
			out = append(out, CopyCommand{Src: rangeFromWire(c.Src), Dst: rangeFromWire(c.Dst)})
		case wire.OpFill:
			out = append(out, FillCommand{Dst: rangeFromWire(c.Dst), Value: c.Value})
		}
	}
	return out
}

// dispatchFromWire maps a decoded dispatch onto a DispatchRequest.
func dispatchFromWire(d *wire.Dispatch) *DispatchRequest {
	return &DispatchRequest{Pipeline: d.Pipeline, Grid: d.Grid, Inputs: d.Inputs, OutputCounts: d.OutputCounts, Uniforms: d.Uniforms}
}

// spansToWire maps the timed phases of a completion.
func spansToWire(spans []Span) *[]wire.Span {
	out := make([]wire.Span, len(spans))
	for i, s := range spans {
		out[i] = wire.Span{Kind: uint32(s.Kind), Start: s.Start, End: s.End}
	}
	return &out
}

// statusOf classifies a backend's error for a completion.
func statusOf(err error) uint32 {
	var (
		rej   *RejectedError
		unav  *UnavailableError
		dev   *DeviceError
		unimp *UnimplementedError
		bad   *badResult
	)
	switch {
	case err == nil:
		return wire.StatusOK
	case errors.As(err, &rej):
		return wire.StatusRejected
	case errors.As(err, &unav):
		return wire.StatusUnavailable
	case errors.As(err, &dev):
		return wire.StatusDevice
	case errors.As(err, &unimp):
		return wire.StatusUnimplemented
	case errors.As(err, &bad):
		return wire.StatusBadResult
	case errors.Is(err, context.Canceled):
		return wire.StatusCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return wire.StatusDeadline
	}
	return wire.StatusError
}

// badResult is a backend answer that breaks the contract (a wrong number of
// outputs); it reaches the host as wire.StatusBadResult.
type badResult struct{ detail string }

func (e *badResult) Error() string { return e.detail }

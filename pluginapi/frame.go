package pluginapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/kiln-dev/kiln/internal/wire"
)

// The data plane's frames are internal/wire's; what is the SDK's here is how
// its types and errors map onto them. The host's plane converts requests to
// the wire and completions from it, the plugin's plane the other way round.

// rangeToWire and rangeFromWire map a BufferRange onto the wire.
func rangeToWire(r BufferRange) wire.Range {
	return wire.Range{Buffer: r.Buffer, Offset: r.Offset, Size: r.Size}
}

func rangeFromWire(r wire.Range) BufferRange {
	return BufferRange{Buffer: r.Buffer, Offset: r.Offset, Size: r.Size}
}

// commandsToWire maps a submit's commands onto the wire; an unknown command
// type is an error.
func commandsToWire(cmds []SubmitCommand) ([]wire.Command, error) {
	out := make([]wire.Command, len(cmds))
	for i, c := range cmds {
		switch c := c.(type) {
		case DispatchCommand:
			w := wire.Command{Op: wire.OpDispatch, Pipeline: c.Pipeline, Grid: c.Grid, Uniforms: c.Uniforms}
			if c.Bindings != nil {
				w.Bindings = make([]wire.Range, len(c.Bindings))
				for j, b := range c.Bindings {
					w.Bindings[j] = rangeToWire(b)
				}
			}
			out[i] = w
		case CopyCommand:
			out[i] = wire.Command{Op: wire.OpCopy, Src: rangeToWire(c.Src), Dst: rangeToWire(c.Dst)}
		case FillCommand:
			out[i] = wire.Command{Op: wire.OpFill, Dst: rangeToWire(c.Dst), Value: c.Value}
		default:
			return nil, fmt.Errorf("command %d: unknown command %T", i, c)
		}
	}
	return out, nil
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

// dispatchToWire and dispatchFromWire map a DispatchRequest onto the wire.
func dispatchToWire(r *DispatchRequest) *wire.Dispatch {
	return &wire.Dispatch{Pipeline: r.Pipeline, Grid: r.Grid, Inputs: r.Inputs, OutputCounts: r.OutputCounts, Uniforms: r.Uniforms}
}

func dispatchFromWire(d *wire.Dispatch) *DispatchRequest {
	return &DispatchRequest{Pipeline: d.Pipeline, Grid: d.Grid, Inputs: d.Inputs, OutputCounts: d.OutputCounts, Uniforms: d.Uniforms}
}

// spansToWire and spansFromWire map the timed phases of a completion; nil
// stays nil.
func spansToWire(spans []Span) *[]wire.Span {
	out := make([]wire.Span, len(spans))
	for i, s := range spans {
		out[i] = wire.Span{Kind: uint32(s.Kind), Start: s.Start, End: s.End}
	}
	return &out
}

func spansFromWire(spans *[]wire.Span) *[]Span {
	if spans == nil {
		return nil
	}
	out := make([]Span, len(*spans))
	for i, s := range *spans {
		out[i] = Span{Kind: SpanKind(s.Kind), Start: s.Start, End: s.End}
	}
	return &out
}

// doneErr turns a completion's status into the error kind the plugin returned.
func doneErr(d *wire.Done) error {
	if d.Status == wire.StatusOK {
		return nil
	}
	msg := errors.New(d.Msg)
	switch d.Status {
	case wire.StatusRejected:
		return &RejectedError{Err: msg}
	case wire.StatusUnavailable:
		return &UnavailableError{Err: msg}
	case wire.StatusDevice:
		return &DeviceError{Err: msg}
	case wire.StatusCanceled:
		return fmt.Errorf("%s: %w", d.Msg, context.Canceled)
	case wire.StatusDeadline:
		return fmt.Errorf("%s: %w", d.Msg, context.DeadlineExceeded)
	case wire.StatusUnimplemented:
		return &UnimplementedError{Interface: d.Msg}
	case wire.StatusBadResult:
		return &ResultError{Detail: d.Msg}
	}
	return &PluginError{Err: msg}
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

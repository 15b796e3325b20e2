package client

import (
	"context"
	"errors"
	"fmt"
	"math"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kiln-dev/kiln/internal/wire"
	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// The host's side of the mapping between the SDK's types and the wire: requests
// to gRPC messages and data-plane frames, replies and completions back, errors
// back to the SDK's kinds. The plugin's side is pluginapi's.

// adapterIndex checks that an adapter index fits the wire's uint32.
func adapterIndex(i int) (uint32, error) {
	if i < 0 || uint64(i) > math.MaxUint32 {
		return 0, pluginapi.Rejected("adapter index %d is out of range. Fix: use an index from the backend's Describe", i)
	}
	return uint32(i), nil
}

func descriptionFromProto(r *kilnpb.DescribeResponse) *pluginapi.Description {
	d := &pluginapi.Description{
		ID:              r.GetId(),
		Version:         r.GetVersion(),
		ReferenceOracle: r.GetReferenceOracle(),
		Dispatches:      r.GetDispatches(),
		Features:        r.GetFeatures(),
	}
	if r.Precedence != nil {
		p := r.GetPrecedence()
		d.Precedence = &p
	}
	for _, a := range r.GetAdapters() {
		id := a.GetIdentity()
		d.Adapters = append(d.Adapters, pluginapi.Adapter{
			Index:     int(a.GetIndex()),
			Name:      a.GetName(),
			Available: a.GetAvailable(),
			Reason:    a.GetReason(),
			Note:      a.GetNote(),
			Profile:   profileFromProto(a.GetProfile()),
			Identity: pluginapi.DeviceIdentity{
				Vendor:        id.GetVendor(),
				Device:        id.GetDevice(),
				DriverVersion: id.GetDriverVersion(),
				DeviceType:    id.GetDeviceType(),
				Instance:      id.GetInstance(),
			},
		})
	}
	return d
}

func profileFromProto(p *kilnpb.DeviceProfile) pluginapi.DeviceProfile {
	return pluginapi.DeviceProfile{
		MaxStorageBufferBindingSize: p.GetMaxStorageBufferBindingSize(),
		MaxInvocationsPerWorkgroup:  p.GetMaxInvocationsPerWorkgroup(),
		SubgroupSize:                p.GetSubgroupSize(),
		SupportsSubgroupOps:         p.GetSupportsSubgroupOps(),
		HasSubgroupShuffle:          p.GetHasSubgroupShuffle(),
		HasSharedMemory:             p.GetHasSharedMemory(),
		SupportsF16:                 p.GetSupportsF16(),
		SupportsBF16:                p.GetSupportsBf16(),
		SupportsTensorCores:         p.GetSupportsTensorCores(),
		SupportsIndirectDispatch:    p.GetSupportsIndirectDispatch(),
		SupportsDeviceTimestamps:    p.GetSupportsDeviceTimestamps(),
		SupportsHardwareCounters:    p.GetSupportsHardwareCounters(),
		MemBWGBps:                   p.GetMemBwGbps(),
		TimingQuality:               pluginapi.TimingQuality(p.GetTimingQuality()),
		MemBWStatus:                 pluginapi.BandwidthStatus(p.GetMemBwStatus()),
		MemoryBytes:                 p.GetMemoryBytes(),
		MemoryFreeBytes:             p.GetMemoryFreeBytes(),
	}
}

// specToProto lists the map's entries in name order; a dtype travels as its stable
// tag (ir.DTypeTag).
func specToProto(m ir.SpecMap) []*kilnpb.SpecEntry {
	out := make([]*kilnpb.SpecEntry, 0, m.Len())
	for _, name := range m.Names() {
		v, _ := m.Get(name)
		bits := v.Bits()
		if t, ok := v.DType(); ok {
			bits = ir.DTypeTag(t)
		}
		out = append(out, &kilnpb.SpecEntry{Name: name, Kind: kilnpb.SpecKind(v.Kind()), Bits: bits})
	}
	return out
}

func inputsToProto(in [][]byte) []*kilnpb.Buffer {
	out := make([]*kilnpb.Buffer, len(in))
	for i, b := range in {
		out[i] = &kilnpb.Buffer{Data: b}
	}
	return out
}

func rangeToProto(r pluginapi.BufferRange) *kilnpb.BufferRange {
	return &kilnpb.BufferRange{Buffer: r.Buffer, Offset: r.Offset, Size: r.Size}
}

func commandsToProto(cmds []pluginapi.SubmitCommand) ([]*kilnpb.Command, error) {
	out := make([]*kilnpb.Command, len(cmds))
	for i, c := range cmds {
		switch c := c.(type) {
		case pluginapi.DispatchCommand:
			d := &kilnpb.DispatchCommand{Pipeline: c.Pipeline, GridX: c.Grid[0], GridY: c.Grid[1], GridZ: c.Grid[2], Uniforms: c.Uniforms}
			for _, b := range c.Bindings {
				d.Bindings = append(d.Bindings, rangeToProto(b))
			}
			out[i] = &kilnpb.Command{Op: &kilnpb.Command_Dispatch{Dispatch: d}}
		case pluginapi.CopyCommand:
			out[i] = &kilnpb.Command{Op: &kilnpb.Command_Copy{Copy: &kilnpb.CopyCommand{Src: rangeToProto(c.Src), Dst: rangeToProto(c.Dst)}}}
		case pluginapi.FillCommand:
			out[i] = &kilnpb.Command{Op: &kilnpb.Command_Fill{Fill: &kilnpb.FillCommand{Dst: rangeToProto(c.Dst), Value: c.Value}}}
		default:
			return nil, pluginapi.Rejected("command %d is a %T, which the SDK does not know. Fix: use pluginapi.DispatchCommand, pluginapi.CopyCommand or pluginapi.FillCommand", i, c)
		}
	}
	return out, nil
}

// rangeToWire maps a BufferRange onto the wire.
func rangeToWire(r pluginapi.BufferRange) wire.Range {
	return wire.Range{Buffer: r.Buffer, Offset: r.Offset, Size: r.Size}
}

// commandsToWire maps a submit's commands onto the wire; an unknown command
// type is a rejection.
func commandsToWire(cmds []pluginapi.SubmitCommand) ([]wire.Command, error) {
	out := make([]wire.Command, len(cmds))
	for i, c := range cmds {
		switch c := c.(type) {
		case pluginapi.DispatchCommand:
			w := wire.Command{Op: wire.OpDispatch, Pipeline: c.Pipeline, Grid: c.Grid, Uniforms: c.Uniforms}
			if c.Bindings != nil {
				w.Bindings = make([]wire.Range, len(c.Bindings))
				for j, b := range c.Bindings {
					w.Bindings[j] = rangeToWire(b)
				}
			}
			out[i] = w
		case pluginapi.CopyCommand:
			out[i] = wire.Command{Op: wire.OpCopy, Src: rangeToWire(c.Src), Dst: rangeToWire(c.Dst)}
		case pluginapi.FillCommand:
			out[i] = wire.Command{Op: wire.OpFill, Dst: rangeToWire(c.Dst), Value: c.Value}
		default:
			return nil, pluginapi.Rejected("command %d is a %T, which the SDK does not know. Fix: use DispatchCommand, CopyCommand or FillCommand", i, c)
		}
	}
	return out, nil
}

// dispatchToWire maps a DispatchRequest onto the wire.
func dispatchToWire(r *pluginapi.DispatchRequest) *wire.Dispatch {
	return &wire.Dispatch{Pipeline: r.Pipeline, Grid: r.Grid, Inputs: r.Inputs, OutputCounts: r.OutputCounts, Uniforms: r.Uniforms}
}

func spansFromWire(spans *[]wire.Span) []pluginapi.Span {
	if spans == nil {
		return nil
	}
	out := make([]pluginapi.Span, len(*spans))
	for i, s := range *spans {
		out[i] = pluginapi.Span{Kind: pluginapi.SpanKind(s.Kind), Start: s.Start, End: s.End}
	}
	return out
}

// doneErr turns a completion's status into the error kind the plugin returned.
func doneErr(d *wire.Done) error {
	if d.Status == wire.StatusOK {
		return nil
	}
	msg := errors.New(d.Msg)
	switch d.Status {
	case wire.StatusRejected:
		return &pluginapi.RejectedError{Err: msg}
	case wire.StatusUnavailable:
		return &pluginapi.UnavailableError{Err: msg}
	case wire.StatusDevice:
		return &pluginapi.DeviceError{Err: msg}
	case wire.StatusCanceled:
		return fmt.Errorf("%s: %w", d.Msg, context.Canceled)
	case wire.StatusDeadline:
		return fmt.Errorf("%s: %w", d.Msg, context.DeadlineExceeded)
	case wire.StatusUnimplemented:
		return &pluginapi.UnimplementedError{Interface: d.Msg}
	case wire.StatusBadResult:
		return &ResultError{Detail: d.Msg}
	}
	return &pluginapi.PluginError{Err: msg}
}

// fromStatus turns an error from a gRPC call back into the backend's error kind.
// Typed errors come back as the same type with the same message; a deadline or a
// cancellation wraps the context error; an error the plugin returned without a
// kind comes back as a PluginError with its message; anything else (the
// connection broke, the plugin died) is returned wrapped, so status.Code still
// reads it.
func fromStatus(ctx context.Context, method string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("kiln plugin %s: %w", method, err)
	}
	msg := errors.New(st.Message())
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != wire.ErrorDomain {
			continue
		}
		switch info.Reason {
		case wire.ReasonRejected:
			return &pluginapi.RejectedError{Err: msg}
		case wire.ReasonUnavailable:
			return &pluginapi.UnavailableError{Err: msg}
		case wire.ReasonDevice:
			return &pluginapi.DeviceError{Err: msg}
		}
	}
	switch st.Code() {
	case codes.InvalidArgument:
		return &pluginapi.RejectedError{Err: msg}
	case codes.FailedPrecondition:
		return &pluginapi.UnavailableError{Err: msg}
	case codes.DeadlineExceeded, codes.Canceled:
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("kiln plugin %s: %s: %w", method, st.Message(), ctxErr)
		}
		if st.Code() == codes.Canceled {
			return fmt.Errorf("kiln plugin %s: %s: %w", method, st.Message(), context.Canceled)
		}
		return fmt.Errorf("kiln plugin %s: %s: %w", method, st.Message(), context.DeadlineExceeded)
	case codes.Unknown:
		return &pluginapi.PluginError{Err: msg}
	}
	return fmt.Errorf("kiln plugin %s: %w", method, err)
}

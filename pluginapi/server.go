package pluginapi

import (
	"context"
	"errors"
	"time"

	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/ir"
)

// server is the plugin-side gRPC shim: it turns wire messages into the Backend's
// types, calls the backend through the SDK's checks (impl is Checked), and turns errors into
// gRPC statuses. It does not recover panics: a panicking backend crashes the
// process, which is how the host learns that the plugin crashed.
type server struct {
	kilnpb.UnimplementedBackendServer
	impl Backend
	// device is protocol 2's Device service (device_server.go); nil on protocol 1.
	device *deviceServer
}

// newServer is the plugin side's server of impl at a protocol version: the
// Backend service and, from protocol 2, the Device service, both calling impl
// through one layer of the SDK's checks (Checked), so that a pipeline compiled
// through one is known to the other's dispatches (the data plane's).
func newServer(impl Backend, version int) *server {
	srv := &server{impl: Checked(impl)}
	if version >= ProtocolV2 {
		dev := newDevice(impl)
		dev.checked = srv.impl
		srv.device = &deviceServer{v1: srv, dev: dev}
	}
	return srv
}

func (s *server) Describe(ctx context.Context, _ *kilnpb.DescribeRequest) (*kilnpb.DescribeResponse, error) {
	d, err := s.impl.Describe(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if d == nil {
		return nil, toStatus(errors.New("backend Describe returned no description and no error"))
	}
	out, err := descriptionToProto(d)
	if err != nil {
		return nil, toStatus(err)
	}
	return out, nil
}

func (s *server) Open(ctx context.Context, req *kilnpb.OpenRequest) (*kilnpb.OpenResponse, error) {
	if err := s.impl.Open(ctx, int(req.GetAdapter())); err != nil {
		return nil, toStatus(err)
	}
	return &kilnpb.OpenResponse{}, nil
}

func (s *server) Compile(ctx context.Context, req *kilnpb.CompileRequest) (*kilnpb.CompileResponse, error) {
	creq, err := compileRequestFromProto(req)
	if err != nil {
		return nil, toStatus(err)
	}
	start := time.Now()
	res, err := s.impl.Compile(ctx, creq)
	elapsed := time.Since(start).Nanoseconds()
	if err != nil {
		return nil, toStatus(err)
	}
	if res == nil {
		return nil, toStatus(errors.New("backend Compile returned no result and no error"))
	}
	nanos := res.CompileNanos
	if nanos == 0 {
		nanos = elapsed
	}
	return &kilnpb.CompileResponse{Pipeline: res.Pipeline, Blob: res.Blob, CompileNanos: nanos}, nil
}

// compileRequestFromProto decodes the program and the specialization map; any
// problem is a RejectedError. The server's Backend is Checked, whose Compile
// checks the request (CheckCompile).
func compileRequestFromProto(req *kilnpb.CompileRequest) (*CompileRequest, error) {
	p, err := ir.Decode(req.GetProgram())
	if err != nil {
		return nil, Rejected("decode program (%d bytes): %w", len(req.GetProgram()), err)
	}
	spec, err := specFromProto(req.GetSpec())
	if err != nil {
		return nil, err
	}
	return &CompileRequest{
		Adapter:       int(req.GetAdapter()),
		Program:       p,
		Spec:          spec,
		WorkgroupSize: [3]uint32{req.GetWorkgroupX(), req.GetWorkgroupY(), req.GetWorkgroupZ()},
		CachedBlob:    req.CachedBlob,
	}, nil
}

func (s *server) Dispatch(ctx context.Context, req *kilnpb.DispatchRequest) (*kilnpb.DispatchResponse, error) {
	dreq := &DispatchRequest{
		Pipeline:     req.GetPipeline(),
		Grid:         [3]uint32{req.GetGridX(), req.GetGridY(), req.GetGridZ()},
		Inputs:       inputsFromProto(req.GetInputs()),
		OutputCounts: req.GetOutputCounts(),
		Uniforms:     req.GetUniforms(),
	}
	start := time.Now()
	res, err := s.impl.Dispatch(ctx, dreq)
	elapsed := time.Since(start).Nanoseconds()
	if err != nil {
		return nil, toStatus(err)
	}
	if res == nil {
		return nil, toStatus(errors.New("backend Dispatch returned no result and no error"))
	}
	host := res.HostNanos
	if host == 0 {
		host = elapsed
	}
	return &kilnpb.DispatchResponse{Outputs: res.Outputs, HostNanos: host, DeviceNanos: res.DeviceNanos}, nil
}

func (s *server) Release(ctx context.Context, req *kilnpb.ReleaseRequest) (*kilnpb.ReleaseResponse, error) {
	if err := s.impl.Release(ctx, req.GetPipeline()); err != nil {
		return nil, toStatus(err)
	}
	return &kilnpb.ReleaseResponse{}, nil
}

func (s *server) Close(ctx context.Context, _ *kilnpb.CloseRequest) (*kilnpb.CloseResponse, error) {
	if s.device != nil {
		defer s.device.closePlane()
	}
	if err := s.impl.Close(ctx); err != nil {
		return nil, toStatus(err)
	}
	return &kilnpb.CloseResponse{}, nil
}

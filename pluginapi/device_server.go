package pluginapi

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kiln-dev/kiln/internal/wire"
	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/ir"
)

// deviceServer is the plugin side of protocol 2's Device service: the gRPC form
// of every optional interface (the fallback when there is no data plane) and the
// call that opens the data plane.
type deviceServer struct {
	kilnpb.UnimplementedDeviceServer
	v1  *server
	dev *device

	mu    sync.Mutex
	plane *planeServer
}

// deviceStatus is toStatus plus UNIMPLEMENTED for a missing optional interface.
func deviceStatus(err error) error {
	var unimp *UnimplementedError
	if errors.As(err, &unimp) {
		return status.Error(codes.Unimplemented, err.Error())
	}
	return toStatus(err)
}

func (s *deviceServer) Describe(ctx context.Context, req *kilnpb.DescribeRequest) (*kilnpb.DeviceDescription, error) {
	d, err := s.v1.Describe(ctx, req)
	if err != nil {
		return nil, err
	}
	c := s.dev.caps()
	return &kilnpb.DeviceDescription{Description: d, Capabilities: &kilnpb.Capabilities{
		Buffers: c.Buffers, Submit: c.Submit, Artifacts: c.Artifacts, Health: c.Health, PeerCopy: c.PeerCopy,
		ConcurrentAdapters: c.ConcurrentAdapters, Spans: c.Spans, PipelinedDispatch: c.PipelinedDispatch,
	}}, nil
}

func (s *deviceServer) OpenDataPlane(context.Context, *kilnpb.OpenDataPlaneRequest) (*kilnpb.OpenDataPlaneResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.plane != nil {
		return nil, status.Error(codes.FailedPrecondition, "the data plane is already open. Fix: open it once per plugin process")
	}
	p, err := listenPlane(s.dev)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	s.plane = p
	return &kilnpb.OpenDataPlaneResponse{Socket: p.socketPath(), Token: p.token}, nil
}

func (s *deviceServer) Cancel(_ context.Context, req *kilnpb.CancelRequest) (*kilnpb.CancelResponse, error) {
	s.mu.Lock()
	p := s.plane
	s.mu.Unlock()
	if p != nil {
		p.cancel(req.GetSeq())
	}
	return &kilnpb.CancelResponse{}, nil
}

// closePlane stops the data plane, if one is open.
func (s *deviceServer) closePlane() {
	s.mu.Lock()
	p := s.plane
	s.mu.Unlock()
	if p != nil {
		p.close()
	}
}

func (s *deviceServer) AllocBuffer(ctx context.Context, req *kilnpb.AllocBufferRequest) (*kilnpb.AllocBufferResponse, error) {
	res, err := s.dev.alloc(ctx, &AllocRequest{Adapter: int(req.GetAdapter()), Size: req.GetSize(), Usage: BufferUsage(req.GetUsage())})
	if err != nil {
		return nil, deviceStatus(err)
	}
	return &kilnpb.AllocBufferResponse{Buffer: res.Buffer}, nil
}

func (s *deviceServer) FreeBuffer(ctx context.Context, req *kilnpb.FreeBufferRequest) (*kilnpb.FreeBufferResponse, error) {
	if err := s.dev.free(ctx, req.GetBuffer()); err != nil {
		return nil, deviceStatus(err)
	}
	return &kilnpb.FreeBufferResponse{}, nil
}

func (s *deviceServer) WriteBuffer(ctx context.Context, req *kilnpb.WriteBufferRequest) (*kilnpb.WriteBufferResponse, error) {
	if err := s.dev.write(ctx, req.GetBuffer(), req.GetOffset(), req.GetData()); err != nil {
		return nil, deviceStatus(err)
	}
	return &kilnpb.WriteBufferResponse{}, nil
}

func (s *deviceServer) ReadBuffer(ctx context.Context, req *kilnpb.ReadBufferRequest) (*kilnpb.ReadBufferResponse, error) {
	size := req.GetSize()
	if size > wire.MaxChunkBytes {
		return nil, deviceStatus(Rejected("read of %d bytes in one message, more than %d. Fix: read in chunks", size, wire.MaxChunkBytes))
	}
	if err := s.dev.checkRange("read", BufferRange{Buffer: req.GetBuffer(), Offset: req.GetOffset(), Size: size}); err != nil {
		return nil, deviceStatus(err)
	}
	dst := make([]byte, size)
	if err := s.dev.read(ctx, req.GetBuffer(), req.GetOffset(), dst); err != nil {
		return nil, deviceStatus(err)
	}
	return &kilnpb.ReadBufferResponse{Data: dst}, nil
}

func (s *deviceServer) Submit(ctx context.Context, req *kilnpb.SubmitRequest) (*kilnpb.SubmitResponse, error) {
	cmds, err := commandsFromProto(req.GetCommands())
	if err != nil {
		return nil, deviceStatus(err)
	}
	res, err := s.dev.submit(ctx, &SubmitRequest{Adapter: int(req.GetAdapter()), Commands: cmds})
	if err != nil {
		return nil, deviceStatus(err)
	}
	return &kilnpb.SubmitResponse{HostNanos: res.HostNanos, DeviceNanos: res.DeviceNanos}, nil
}

func (s *deviceServer) Artifact(ctx context.Context, req *kilnpb.ArtifactRequest) (*kilnpb.ArtifactResponse, error) {
	p, err := ir.Decode(req.GetProgram())
	if err != nil {
		return nil, deviceStatus(Rejected("decode program (%d bytes): %w", len(req.GetProgram()), err))
	}
	spec, err := specFromProto(req.GetSpec())
	if err != nil {
		return nil, deviceStatus(err)
	}
	wg := [3]uint32{req.GetWorkgroupX(), req.GetWorkgroupY(), req.GetWorkgroupZ()}
	if err := checkProgram(p, spec, wg); err != nil {
		return nil, deviceStatus(err)
	}
	a, err := s.dev.artifact(ctx, &ArtifactRequest{Adapter: int(req.GetAdapter()), Program: p, Spec: spec, WorkgroupSize: wg, Kind: req.GetKind()})
	if err != nil {
		return nil, deviceStatus(err)
	}
	return &kilnpb.ArtifactResponse{Data: a.Data, Info: a.Info}, nil
}

func (s *deviceServer) Health(ctx context.Context, _ *kilnpb.HealthRequest) (*kilnpb.HealthResponse, error) {
	if err := s.dev.checkHealth(ctx); err != nil {
		return nil, deviceStatus(err)
	}
	return &kilnpb.HealthResponse{}, nil
}

// errPlaneClosed reports a data plane that was closed on purpose.
var errPlaneClosed = fmt.Errorf("kiln data plane is closed")

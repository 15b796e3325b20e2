package pluginapi

import (
	"context"

	"github.com/kiln-dev/kiln/ir"
	kilnpb "github.com/kiln-dev/kiln/pluginapi/proto"
)

// client is the host-side gRPC shim: a Backend whose methods are calls into the
// plugin process. Errors come back as the plugin's error kinds (see fromStatus).
type client struct {
	rpc kilnpb.BackendClient
}

var _ Backend = (*client)(nil)

func (c *client) Describe(ctx context.Context) (*Description, error) {
	r, err := c.rpc.Describe(ctx, &kilnpb.DescribeRequest{})
	if err != nil {
		return nil, fromStatus(ctx, "Describe", err)
	}
	return descriptionFromProto(r), nil
}

func (c *client) Open(ctx context.Context, adapter int) error {
	idx, err := adapterIndex(adapter)
	if err != nil {
		return err
	}
	_, err = c.rpc.Open(ctx, &kilnpb.OpenRequest{Adapter: idx})
	return fromStatus(ctx, "Open", err)
}

func (c *client) Compile(ctx context.Context, req *CompileRequest) (*CompileResult, error) {
	idx, err := adapterIndex(req.Adapter)
	if err != nil {
		return nil, err
	}
	if req.Program == nil {
		return nil, Rejected("compile request has no program. Fix: set CompileRequest.Program")
	}
	prog, err := ir.Encode(req.Program)
	if err != nil {
		return nil, Rejected("encode program %q: %w", req.Program.Name, err)
	}
	r, err := c.rpc.Compile(ctx, &kilnpb.CompileRequest{
		Adapter:    idx,
		Program:    prog,
		Spec:       specToProto(req.Spec),
		WorkgroupX: req.WorkgroupSize[0],
		WorkgroupY: req.WorkgroupSize[1],
		WorkgroupZ: req.WorkgroupSize[2],
		CachedBlob: req.CachedBlob,
	})
	if err != nil {
		return nil, fromStatus(ctx, "Compile", err)
	}
	return &CompileResult{Pipeline: r.GetPipeline(), Blob: r.Blob, CompileNanos: r.GetCompileNanos()}, nil
}

func (c *client) Dispatch(ctx context.Context, req *DispatchRequest) (*DispatchResult, error) {
	r, err := c.rpc.Dispatch(ctx, &kilnpb.DispatchRequest{
		Pipeline:     req.Pipeline,
		GridX:        req.Grid[0],
		GridY:        req.Grid[1],
		GridZ:        req.Grid[2],
		Inputs:       inputsToProto(req.Inputs),
		OutputCounts: req.OutputCounts,
		Uniforms:     req.Uniforms,
	})
	if err != nil {
		return nil, fromStatus(ctx, "Dispatch", err)
	}
	return &DispatchResult{Outputs: r.GetOutputs(), HostNanos: r.GetHostNanos(), DeviceNanos: r.GetDeviceNanos()}, nil
}

func (c *client) Release(ctx context.Context, pipeline uint64) error {
	_, err := c.rpc.Release(ctx, &kilnpb.ReleaseRequest{Pipeline: pipeline})
	return fromStatus(ctx, "Release", err)
}

func (c *client) Close(ctx context.Context) error {
	_, err := c.rpc.Close(ctx, &kilnpb.CloseRequest{})
	return fromStatus(ctx, "Close", err)
}

package client

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Conn is the host's side of a connection to one plugin process, what
// [Dispense] returns: its methods are calls into the plugin, and errors come
// back as the plugin's error kinds (pluginapi.RejectedError, …). It is a
// pluginapi.Backend, and it has the methods of every optional interface, so a
// type assertion on a Conn says nothing about the plugin: [Conn.Capabilities]
// says which ones the plugin has (what it declared when described), and a call
// of one it lacks fails with a *pluginapi.UnimplementedError. On protocol 2
// with the shared-memory data plane, buffer bytes, submits and the inline
// dispatch of [Conn.DispatchSized] travel through shared memory and fixed
// frames instead of gRPC.
//
// The host side checks what it sends against its own table of the plugin's
// buffers and never trusts a size the plugin reports beyond what it asked for.
type Conn struct {
	rpc kilnpb.BackendClient
	// v2 is the protocol-2 side (conn.go); nil on protocol 1.
	v2 *v2client
}

var _ pluginapi.Backend = (*Conn)(nil)

// receiveLimitKey is the context key of WithReceiveLimit.
type receiveLimitKey struct{}

// WithReceiveLimit returns a context under which a call of a [Conn] refuses a
// response larger than limit bytes from the length the response announces,
// before receiving it, with a [*ResponseTooLargeError]. A host sets it to what it expects: a dispatch's
// outputs plus a small overhead, so a plugin cannot make the host receive (and
// hold) a gigabyte where it asked for sixteen bytes. A limit of zero or less
// leaves pluginapi.MaxMessageBytes.
func WithReceiveLimit(ctx context.Context, limit int) context.Context {
	return context.WithValue(ctx, receiveLimitKey{}, limit)
}

// ResponseOverhead bounds the bytes a response message adds around its
// payloads: field tags, lengths and the timing fields. Add it, plus
// [PerBufferOverhead] per buffer, to the payload bytes a call should return to
// get its receive limit.
const (
	ResponseOverhead  = 64
	PerBufferOverhead = 16
)

// ResponseTooLargeError says a plugin's response announced more bytes than the
// call's receive limit; the host refused it unread.
type ResponseTooLargeError struct {
	// Method is the call ("Dispatch").
	Method string
	// Size is the length the response announced, Limit the call's limit.
	Size, Limit int64
}

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("kiln plugin %s: the response announced %d bytes, over this call's receive limit of %d; refused before receiving it", e.Method, e.Size, e.Limit)
}

// callOptions are the per-call gRPC options ctx asks for.
func callOptions(ctx context.Context) []grpc.CallOption {
	if limit, ok := ctx.Value(receiveLimitKey{}).(int); ok && limit > 0 {
		return []grpc.CallOption{grpc.MaxCallRecvMsgSize(limit)}
	}
	return nil
}

// callError turns a gRPC call's error into the backend's error kind, and a
// response refused by the receive limit into a ResponseTooLargeError.
func callError(ctx context.Context, method string, err error) error {
	if err == nil {
		return nil
	}
	if limit, ok := ctx.Value(receiveLimitKey{}).(int); ok && limit > 0 && status.Code(err) == codes.ResourceExhausted {
		// grpc-go's own words when a message header announces too many bytes:
		// "grpc: received message larger than max (N vs. M)".
		msg := status.Convert(err).Message()
		if strings.Contains(msg, "received message larger than max") || strings.Contains(msg, "received message after decompression larger than max") {
			e := &ResponseTooLargeError{Method: method, Limit: int64(limit)}
			if i := strings.LastIndexByte(msg, '('); i >= 0 {
				var n, m int64
				if _, scanErr := fmt.Sscanf(msg[i:], "(%d vs. %d)", &n, &m); scanErr == nil {
					e.Size = n
				}
			}
			return e
		}
	}
	return fromStatus(ctx, method, err)
}

func (c *Conn) Describe(ctx context.Context) (*pluginapi.Description, error) {
	if c.v2 != nil {
		return c.v2.describe(ctx)
	}
	r, err := c.rpc.Describe(ctx, &kilnpb.DescribeRequest{}, callOptions(ctx)...)
	if err != nil {
		return nil, callError(ctx, "Describe", err)
	}
	return descriptionFromProto(r), nil
}

func (c *Conn) Open(ctx context.Context, adapter int) error {
	idx, err := adapterIndex(adapter)
	if err != nil {
		return err
	}
	_, err = c.rpc.Open(ctx, &kilnpb.OpenRequest{Adapter: idx}, callOptions(ctx)...)
	return callError(ctx, "Open", err)
}

func (c *Conn) Compile(ctx context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	idx, err := adapterIndex(req.Adapter)
	if err != nil {
		return nil, err
	}
	if req.Program == nil {
		return nil, pluginapi.Rejected("compile request has no program. Fix: set pluginapi.CompileRequest.Program")
	}
	prog, err := ir.Encode(req.Program)
	if err != nil {
		return nil, pluginapi.Rejected("encode program %q: %w", req.Program.Name, err)
	}
	r, err := c.rpc.Compile(ctx, &kilnpb.CompileRequest{
		Adapter:    idx,
		Program:    prog,
		Spec:       specToProto(req.Spec),
		WorkgroupX: req.WorkgroupSize[0],
		WorkgroupY: req.WorkgroupSize[1],
		WorkgroupZ: req.WorkgroupSize[2],
		CachedBlob: req.CachedBlob,
	}, callOptions(ctx)...)
	if err != nil {
		return nil, callError(ctx, "Compile", err)
	}
	return &pluginapi.CompileResult{Pipeline: r.GetPipeline(), Blob: r.Blob, CompileNanos: r.GetCompileNanos()}, nil
}

func (c *Conn) Dispatch(ctx context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	r, err := c.rpc.Dispatch(ctx, &kilnpb.DispatchRequest{
		Pipeline:     req.Pipeline,
		GridX:        req.Grid[0],
		GridY:        req.Grid[1],
		GridZ:        req.Grid[2],
		Inputs:       inputsToProto(req.Inputs),
		OutputCounts: req.OutputCounts,
		Uniforms:     req.Uniforms,
	}, callOptions(ctx)...)
	if err != nil {
		return nil, callError(ctx, "Dispatch", err)
	}
	return &pluginapi.DispatchResult{Outputs: r.GetOutputs(), HostNanos: r.GetHostNanos(), DeviceNanos: r.GetDeviceNanos()}, nil
}

func (c *Conn) Release(ctx context.Context, pipeline uint64) error {
	_, err := c.rpc.Release(ctx, &kilnpb.ReleaseRequest{Pipeline: pipeline}, callOptions(ctx)...)
	return callError(ctx, "Release", err)
}

func (c *Conn) Close(ctx context.Context) error {
	if c.v2 != nil {
		defer c.v2.closePlane()
	}
	_, err := c.rpc.Close(ctx, &kilnpb.CloseRequest{}, callOptions(ctx)...)
	return callError(ctx, "Close", err)
}

package gpukit

import (
	"context"
	"fmt"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/handles"
)

// CheckCompile is the start of every Compile: a request without a program is a
// RejectedError, and an ended ctx returns its error.
func CheckCompile(ctx context.Context, backend string, req *pluginapi.CompileRequest) error {
	if req == nil || req.Program == nil {
		return pluginapi.Rejected("%s: compile request without a program. Fix: set CompileRequest.Program", backend)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: compile %q: %w", backend, req.Program.Name, err)
	}
	return nil
}

// DispatchPipeline returns the pipeline a dispatch names, held (see
// [handles.Table.GetHeld]); an unknown handle is a RejectedError.
func DispatchPipeline[T any](backend string, pipelines *handles.Table[T], h uint64, hold func(T)) (T, error) {
	p, ok := pipelines.GetHeld(h, hold)
	if !ok {
		return p, pluginapi.Rejected("%s has no pipeline %d (never compiled or already released). Fix: dispatch a handle returned by Compile", backend, h)
	}
	return p, nil
}

// ReleasePipeline removes pipeline h for Release; an unknown handle is a
// RejectedError.
func ReleasePipeline[T any](backend string, pipelines *handles.Table[T], h uint64) (T, error) {
	p, ok := pipelines.Remove(h)
	if !ok {
		return p, pluginapi.Rejected("%s has no pipeline %d (never compiled or already released). Fix: release only handles returned by Compile, once", backend, h)
	}
	return p, nil
}

// Buffer returns resident buffer h; an unknown handle is a RejectedError.
func Buffer[T any](backend string, buffers *handles.Table[T], h uint64) (T, error) {
	r, ok := buffers.Get(h)
	if !ok {
		return r, pluginapi.Rejected("%s has no buffer %d (never allocated or already freed). Fix: use handles AllocBuffer returned, and free each once", backend, h)
	}
	return r, nil
}

// FreeBuffer removes resident buffer h for FreeBuffer; an unknown handle is a
// RejectedError.
func FreeBuffer[T any](backend string, buffers *handles.Table[T], h uint64) (T, error) {
	r, ok := buffers.Remove(h)
	if !ok {
		return r, pluginapi.Rejected("%s has no buffer %d (never allocated or already freed). Fix: free each buffer once", backend, h)
	}
	return r, nil
}

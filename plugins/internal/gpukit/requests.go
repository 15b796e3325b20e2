package gpukit

import (
	"context"
	"fmt"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/handles"
)

// CompileContext is the start of every Compile: an ended ctx returns its
// error, naming the program. The request passed the SDK's checks
// (pluginapi.CheckCompile), so it has a program.
func CompileContext(ctx context.Context, backend string, req *pluginapi.CompileRequest) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: compile %q: %w", backend, req.Program.Name, err)
	}
	return nil
}

// DispatchPipeline returns the pipeline a dispatch names, held (see
// [handles.Table.GetHeld]); an unknown handle is a RejectedError.
func DispatchPipeline[T any](backend string, pipelines *handles.Table[T], h uint64, hold func(T)) (T, error) {
	p, ok := pipelines.GetHeld(h, hold)
	return found(p, ok, backend, h, "pipeline", "never compiled or already released", "dispatch a handle returned by Compile")
}

// ReleasePipeline removes pipeline h for Release and destroys it; an unknown
// handle is a RejectedError.
func ReleasePipeline[T any](backend string, pipelines *handles.Table[T], h uint64, destroy func(T)) error {
	p, ok := pipelines.Remove(h)
	if _, err := found(p, ok, backend, h, "pipeline", "never compiled or already released", "release only handles returned by Compile, once"); err != nil {
		return err
	}
	destroy(p)
	return nil
}

// Buffer returns resident buffer h; an unknown handle is a RejectedError.
func Buffer[T any](backend string, buffers *handles.Table[T], h uint64) (T, error) {
	r, ok := buffers.Get(h)
	return found(r, ok, backend, h, "buffer", "never allocated or already freed", "use handles AllocBuffer returned, and free each once")
}

// FreeBuffer removes resident buffer h for FreeBuffer; an unknown handle is a
// RejectedError.
func FreeBuffer[T any](backend string, buffers *handles.Table[T], h uint64) (T, error) {
	r, ok := buffers.Remove(h)
	return found(r, ok, backend, h, "buffer", "never allocated or already freed", "free each buffer once")
}

// found returns v when a lookup of handle h found it, and otherwise the
// RejectedError "<backend> has no <what> <h> (<why>). Fix: <fix>".
func found[T any](v T, ok bool, backend string, h uint64, what, why, fix string) (T, error) {
	if !ok {
		return v, pluginapi.Rejected("%s has no %s %d (%s). Fix: %s", backend, what, h, why, fix)
	}
	return v, nil
}

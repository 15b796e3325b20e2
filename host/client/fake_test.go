package client

import (
	"context"
	"sync"

	"github.com/kiln-dev/kiln/pluginapi"
)

// fakeBackend is a Backend for the SDK's own tests: it records what reaches it,
// echoes every non-nil input as an output, and fails or panics on request.
type fakeBackend struct {
	desc *pluginapi.Description
	// err, when set, is returned by Open, Compile, Dispatch, Release and Close.
	err error
	// panicOnDispatch makes Dispatch panic.
	panicOnDispatch bool
	// result overrides Compile's result.
	result *pluginapi.CompileResult
	// dispatchResult overrides Dispatch's result (echo otherwise).
	dispatchResult *pluginapi.DispatchResult

	mu         sync.Mutex
	opened     []int
	compiles   []*pluginapi.CompileRequest
	dispatches []*pluginapi.DispatchRequest
	released   []uint64
	closed     int
}

func (f *fakeBackend) Describe(context.Context) (*pluginapi.Description, error) {
	if f.desc == nil {
		return testDescription(), nil
	}
	return f.desc, nil
}

func (f *fakeBackend) Open(_ context.Context, adapter int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened = append(f.opened, adapter)
	return f.err
}

func (f *fakeBackend) Compile(_ context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compiles = append(f.compiles, req)
	if f.err != nil {
		return nil, f.err
	}
	if f.result != nil {
		return f.result, nil
	}
	return &pluginapi.CompileResult{Pipeline: uint64(len(f.compiles)), CompileNanos: 42}, nil
}

func (f *fakeBackend) Dispatch(_ context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	if f.panicOnDispatch {
		panic("fake backend: dispatch panics on purpose")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dispatches = append(f.dispatches, req)
	if f.err != nil {
		return nil, f.err
	}
	if f.dispatchResult != nil {
		return f.dispatchResult, nil
	}
	var out [][]byte
	for _, in := range req.Inputs {
		if in != nil {
			out = append(out, in)
		}
	}
	return &pluginapi.DispatchResult{Outputs: out, HostNanos: 7, DeviceNanos: 3}, nil
}

func (f *fakeBackend) Release(_ context.Context, pipeline uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, pipeline)
	return f.err
}

func (f *fakeBackend) Close(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return f.err
}

func (f *fakeBackend) compileCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.compiles)
}

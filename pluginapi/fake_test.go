package pluginapi

import "context"

// fakeBackend is the smallest Backend for the SDK's own tests: it describes
// itself as testDescription and does nothing else. The tests that drive a
// backend over the wire are host/client's, with a fake that records calls.
type fakeBackend struct{}

func (*fakeBackend) Describe(context.Context) (*Description, error) { return testDescription(), nil }
func (*fakeBackend) Open(context.Context, int) error                { return nil }
func (*fakeBackend) Compile(context.Context, *CompileRequest) (*CompileResult, error) {
	return &CompileResult{Pipeline: 1}, nil
}
func (*fakeBackend) Dispatch(context.Context, *DispatchRequest) (*DispatchResult, error) {
	return &DispatchResult{}, nil
}
func (*fakeBackend) Release(context.Context, uint64) error { return nil }
func (*fakeBackend) Close(context.Context) error           { return nil }

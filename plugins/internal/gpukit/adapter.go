package gpukit

import "github.com/kiln-dev/kiln/pluginapi"

// AdapterAt returns adapters[index] when it is available: an index out of range
// is a RejectedError, an unavailable adapter an UnavailableError carrying its
// reason. info returns an adapter's description; backend names the backend in
// the errors ("cuda").
func AdapterAt[A any](backend string, adapters []A, index int, info func(A) *pluginapi.Adapter) (A, error) {
	var none A
	if index < 0 || index >= len(adapters) {
		return none, pluginapi.Rejected("%s has no adapter %d (it has %d). Fix: use an adapter index from 0 to %d as `kiln backends` lists them", backend, index, len(adapters), len(adapters)-1)
	}
	a := adapters[index]
	if in := info(a); !in.Available {
		return none, pluginapi.Unavailable("%s adapter %d (%s) is unavailable: %s", backend, index, in.Name, in.Reason)
	}
	return a, nil
}

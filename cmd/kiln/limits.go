package main

import (
	"context"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/runs"
	"github.com/kiln-dev/kiln/host"
)

// limits are what a run may allocate: the memory available, and the storage
// binding limit of the named backend (and of the reference when verifying),
// which are started for it. An unknown or unusable backend is an error here,
// before any buffer is allocated.
func limits(ctx context.Context, h *host.Host, backend string, verify bool) (runs.Limits, error) {
	l := runs.Limits{MemAvailable: runs.AvailableMemory()}
	names := []string{}
	if backend != "" {
		names = append(names, backend)
	}
	if verify && backend != runs.Reference {
		names = append(names, runs.Reference)
	}
	for _, name := range names {
		b, err := h.Acquire(ctx, name)
		if err != nil {
			return l, err
		}
		if m := b.Adapter().Profile.MaxStorageBufferBindingSize; m > 0 && (l.MaxBinding == 0 || m < l.MaxBinding) {
			l.MaxBinding, l.Backend = m, b.Name()
		}
	}
	return l, nil
}

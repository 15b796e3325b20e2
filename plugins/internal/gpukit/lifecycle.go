package gpukit

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/handles"
)

// Adapter is what an [Adapters] table needs of a backend's adapter.
type Adapter interface {
	// Info is the adapter's description: its index, name, whether it is
	// available and why not.
	Info() *pluginapi.Adapter
	// Close stops the adapter's background work, waits for its device's work
	// and releases the device.
	Close()
}

// Device is an adapter whose device is opened on first use.
type Device[D any] interface {
	Adapter
	// Open returns the adapter's device, opening it on first use.
	Open() (D, error)
}

// DeviceAt returns an available adapter, looked up by at (which starts the
// backend when it must), and its device, opened on first use.
func DeviceAt[A Device[D], D any](at func(int) (A, error), index int) (A, D, error) {
	a, err := at(index)
	if err != nil {
		var none D
		return a, none, err
	}
	d, err := a.Open()
	return a, d, err
}

// Open is a GPU backend's Open: an ended ctx returns its error, else the
// adapter's device is opened (opening it again does nothing) by deviceAt,
// which is the backend's [DeviceAt].
func Open[A, D any](ctx context.Context, backend string, index int, deviceAt func(int) (A, D, error)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("open %s adapter %d: %w", backend, index, err)
	}
	_, _, err := deviceAt(index)
	return err
}

// Adapters is a GPU backend's adapter table and its lifecycle: listed once (on
// the first call that needs the adapters, or ahead of it), looked up by index,
// closed once, after which every call fails with ErrClosed. It has no lock of
// its own: the backend's lock that guards its pipeline and buffer tables
// guards it too, as each method says, so that nothing is added to a table
// after Close.
type Adapters[A Adapter] struct {
	// Backend names the backend in errors ("cuda"); API names the one
	// unavailable adapter that stands for an unusable API ("CUDA").
	Backend, API string
	// ErrClosed is the error of every call after Close.
	ErrClosed error

	started, closed bool
	list            []A
}

// Start lists the adapters once: start returns them, or why the API is
// unusable (a missing driver, no device), and then the table holds one
// unavailable adapter, named API and carrying the reason, that unavailable
// makes from its description. It reports whether this call listed them (false
// when an earlier one did); after Close it returns ErrClosed. The backend's
// lock is held for writing.
func (t *Adapters[A]) Start(start func() ([]A, string), unavailable func(pluginapi.Adapter) A) (bool, error) {
	if t.closed {
		return false, t.ErrClosed
	}
	if t.started {
		return false, nil
	}
	t.started = true
	list, reason := start()
	if reason != "" {
		list = []A{unavailable(pluginapi.Adapter{Index: 0, Name: t.API, Reason: reason})}
	}
	t.list = list
	return true, nil
}

// Log reports the adapters to log, as a backend does once it has started:
// each available adapter at Info level ("CUDA adapter", its index and name,
// then what attrs adds), each unavailable one at Warn level with its reason.
// The backend's lock is held for reading.
func (t *Adapters[A]) Log(log hclog.Logger, attrs func(A) []any) {
	for _, a := range t.list {
		info := a.Info()
		if info.Available {
			log.Info(t.API+" adapter", append([]any{"index", info.Index, "name", info.Name}, attrs(a)...)...)
		} else {
			log.Warn(t.API+" adapter unavailable", "index", info.Index, "name", info.Name, "reason", info.Reason)
		}
	}
}

// Started reports whether the adapters were listed. The backend's lock is held
// for reading.
func (t *Adapters[A]) Started() bool { return t.started }

// Closed reports whether the table was closed. The backend's lock is held for
// reading.
func (t *Adapters[A]) Closed() bool { return t.closed }

// List returns the adapters: none before Start or after Close. The backend's
// lock is held for reading; the slice stays valid after it is let go.
func (t *Adapters[A]) List() []A { return t.list }

// At returns adapter index when it is available (see [AdapterAt]); after Close
// it returns ErrClosed. The backend's lock is held for reading.
func (t *Adapters[A]) At(index int) (A, error) {
	if t.closed {
		var none A
		return none, t.ErrClosed
	}
	return AdapterAt(t.Backend, t.list, index, A.Info)
}

// Close marks the table closed and closes every adapter, in order; it reports
// false, doing nothing, when the table was closed already. The backend's lock
// is held for writing, and the backend has released what runs on the devices
// first (its pipelines and buffers: see [DestroyAll]).
func (t *Adapters[A]) Close() bool {
	if t.closed {
		return false
	}
	t.closed = true
	for _, a := range t.list {
		a.Close()
	}
	t.list = nil
	return true
}

// Live returns the adapters, or ErrClosed after Close. The backend's lock is
// held for reading; the slice stays valid after it is let go.
func (t *Adapters[A]) Live() ([]A, error) {
	if t.closed {
		return nil, t.ErrClosed
	}
	return t.list, nil
}

// FirstLost is the Health of a GPU backend over its live adapters (see
// [Adapters.Live]): the first error lost reports (an opened device that
// failed; nil for one that works or was never opened), else ctx's error.
func FirstLost[A any](ctx context.Context, adapters []A, lost func(A) error) error {
	for _, a := range adapters {
		if err := lost(a); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// DestroyAll removes every entry of a pipeline or buffer table, for Close, and
// destroys each (destroy may be nil when there is nothing to free).
func DestroyAll[T any](table *handles.Table[T], destroy func(T)) {
	for _, v := range table.RemoveAll() {
		if destroy != nil {
			destroy(v)
		}
	}
}

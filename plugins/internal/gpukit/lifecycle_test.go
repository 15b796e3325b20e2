package gpukit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/handles"
)

type testAdapter struct {
	info   pluginapi.Adapter
	closed int
	opened int
	err    error
}

func (a *testAdapter) Info() *pluginapi.Adapter { return &a.info }
func (a *testAdapter) Close()                   { a.closed++ }
func (a *testAdapter) Open() (int, error)       { a.opened++; return a.opened, a.err }

var errTestClosed = errors.New("the test backend is closed")

func newTable() *Adapters[*testAdapter] {
	return &Adapters[*testAdapter]{Backend: "test", API: "Test", ErrClosed: errTestClosed}
}

func unavailable(info pluginapi.Adapter) *testAdapter { return &testAdapter{info: info} }

// TestAdaptersStartOnceAndClose pins the lifecycle both GPU backends share:
// listed once, looked up by index, closed once, ErrClosed after.
func TestAdaptersStartOnceAndClose(t *testing.T) {
	tab := newTable()
	if _, err := tab.At(0); err == nil {
		t.Error("At before Start found an adapter")
	}
	gpu := &testAdapter{info: pluginapi.Adapter{Index: 0, Name: "GPU", Available: true}}
	calls := 0
	start := func() ([]*testAdapter, string) { calls++; return []*testAdapter{gpu}, "" }
	for i, want := range []bool{true, false} {
		started, err := tab.Start(start, unavailable)
		if started != want || err != nil {
			t.Fatalf("Start %d: %v, %v; want %v", i, started, err, want)
		}
	}
	if calls != 1 || !tab.Started() || tab.Closed() {
		t.Fatalf("start ran %d times, started %v, closed %v", calls, tab.Started(), tab.Closed())
	}
	if a, err := tab.At(0); a != gpu || err != nil {
		t.Errorf("At(0) = %v, %v", a, err)
	}
	var rejected *pluginapi.RejectedError
	if _, err := tab.At(1); !errors.As(err, &rejected) {
		t.Errorf("At(1) = %v, want a RejectedError", err)
	}
	if live, err := tab.Live(); len(live) != 1 || err != nil {
		t.Errorf("Live = %v, %v", live, err)
	}
	if !tab.Close() || tab.Close() || gpu.closed != 1 || !tab.Closed() {
		t.Fatalf("Close twice: adapter closed %d times, table closed %v; want once and true", gpu.closed, tab.Closed())
	}
	if _, err := tab.At(0); err != errTestClosed {
		t.Errorf("At after Close = %v, want ErrClosed", err)
	}
	if _, err := tab.Live(); err != errTestClosed {
		t.Errorf("Live after Close = %v, want ErrClosed", err)
	}
	if started, err := tab.Start(start, unavailable); started || err != errTestClosed || calls != 1 {
		t.Errorf("Start after Close = %v, %v (start ran %d times)", started, err, calls)
	}
	if len(tab.List()) != 0 {
		t.Errorf("List after Close = %v", tab.List())
	}
}

// TestAdaptersUnusableAPI: an API that cannot start is one unavailable adapter
// named after it, carrying the reason.
func TestAdaptersUnusableAPI(t *testing.T) {
	tab := newTable()
	if _, err := tab.Start(func() ([]*testAdapter, string) { return nil, "no driver. Fix: install one" }, unavailable); err != nil {
		t.Fatal(err)
	}
	list := tab.List()
	if len(list) != 1 || list[0].info != (pluginapi.Adapter{Index: 0, Name: "Test", Reason: "no driver. Fix: install one"}) {
		t.Fatalf("adapters %+v, want one unavailable adapter with the reason", list)
	}
	var unavailableErr *pluginapi.UnavailableError
	if _, err := tab.At(0); !errors.As(err, &unavailableErr) {
		t.Errorf("At(0) = %v, want an UnavailableError", err)
	}
}

func TestFirstLost(t *testing.T) {
	lost := errors.New("device lost")
	adapters := []*testAdapter{{}, {err: lost}, {err: errors.New("later")}}
	check := func(a *testAdapter) error { return a.err }
	if err := FirstLost(context.Background(), adapters, check); err != lost {
		t.Errorf("FirstLost = %v, want the first lost device's error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := FirstLost(ctx, adapters[:1], check); !errors.Is(err, context.Canceled) {
		t.Errorf("FirstLost of healthy adapters with an ended context = %v", err)
	}
	if err := FirstLost(context.Background(), adapters[:1], check); err != nil {
		t.Errorf("FirstLost of healthy adapters = %v", err)
	}
}

func TestDestroyAll(t *testing.T) {
	var tab handles.Table[*int]
	one, two := 1, 2
	tab.Add(&one)
	tab.Add(&two)
	sum := 0
	DestroyAll(&tab, func(p *int) { sum += *p })
	if sum != 3 || tab.Len() != 0 {
		t.Errorf("destroyed a sum of %d, %d left; want 3 and none", sum, tab.Len())
	}
	tab.Add(&one)
	DestroyAll(&tab, nil)
	if tab.Len() != 0 {
		t.Errorf("DestroyAll without destroy left %d", tab.Len())
	}
}

// TestDeviceAtAndOpen: a backend's Open looks the adapter up and opens its
// device, unless its context has ended; a lookup's error stops it.
func TestDeviceAtAndOpen(t *testing.T) {
	tab := newTable()
	gpu := &testAdapter{info: pluginapi.Adapter{Name: "GPU", Available: true}}
	if _, err := tab.Start(func() ([]*testAdapter, string) { return []*testAdapter{gpu}, "" }, unavailable); err != nil {
		t.Fatal(err)
	}
	deviceAt := func(i int) (*testAdapter, int, error) { return DeviceAt[*testAdapter, int](tab.At, i) }
	if a, d, err := deviceAt(0); a != gpu || d != 1 || err != nil {
		t.Fatalf("DeviceAt(0) = %v, %d, %v", a, d, err)
	}
	if err := Open(context.Background(), "test", 0, deviceAt); err != nil || gpu.opened != 2 {
		t.Errorf("Open = %v (opened %d times)", err, gpu.opened)
	}
	var rejected *pluginapi.RejectedError
	if err := Open(context.Background(), "test", 3, deviceAt); !errors.As(err, &rejected) || gpu.opened != 2 {
		t.Errorf("Open of a missing adapter = %v (opened %d times)", err, gpu.opened)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Open(ctx, "test", 0, deviceAt)
	if want := "open test adapter 0: context canceled"; err == nil || err.Error() != want || gpu.opened != 2 {
		t.Errorf("Open with an ended context = %v (opened %d times), want %q", err, gpu.opened, want)
	}
}

func TestAdaptersLog(t *testing.T) {
	tab := newTable()
	list := []*testAdapter{{info: pluginapi.Adapter{Index: 0, Name: "GPU", Available: true}}, {info: pluginapi.Adapter{Index: 1, Name: "old", Reason: "too old"}}}
	if _, err := tab.Start(func() ([]*testAdapter, string) { return list, "" }, unavailable); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	tab.Log(hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info}), func(a *testAdapter) []any { return []any{"extra", a.info.Name + "!"} })
	got := out.String()
	for _, want := range []string{"[INFO]  Test adapter: index=0 name=GPU extra=\"GPU!\"", "[WARN]  Test adapter unavailable: index=1 name=old reason=\"too old\""} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}

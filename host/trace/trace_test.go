package trace

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestWriterWritesCheckedTraces pins the writer: what it writes parses, passes
// Check, keeps names with quotes, control and non-UTF-8 bytes intact as JSON,
// puts overlapping slices of one process on separate lanes and ties a flow
// across processes.
func TestWriterWritesCheckedTraces(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, 1000)
	w.Process(1, "host \"quoted\"", "host", 0)
	w.Process(2, "plugin\x01\xff", "plugin", 1)
	a, _ := w.Span(1, "outer", "host", 1000, 5000, String("program", "a\"b\\c\n"), Int("n", -3))
	b, _ := w.Span(1, "overlaps", "host", 2000, 7000)
	c, _ := w.Span(2, "run", "plugin", 2500, 4000)
	if a.Tid == b.Tid {
		t.Errorf("overlapping slices share lane %d", a.Tid)
	}
	id := w.NewFlow()
	w.Flow(id, 's', "x", a, 1500)
	w.Flow(id, 't', "x", c, 2600)
	w.Flow(id, 'f', "x", b, 6000)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := ParseBytes(out.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	if names := f.ProcessNames(); names[1] != `host "quoted"` || names[2] != "plugin\x01\ufffd" {
		t.Errorf("names %q", names)
	}
	if fl := f.Flows(); len(fl) != 1 || len(fl[0].Points) != 3 || fl[0].Slices[1] == nil || fl[0].Slices[1].Name != "run" {
		t.Errorf("flows %+v", fl)
	}
	for _, e := range f.TraceEvents {
		if e.Name == "outer" && (e.Ts != 0 || *e.Dur != 4 || e.Args["program"] != "a\"b\\c\n") {
			t.Errorf("outer slice %+v", e)
		}
	}
	w.Span(1, "late", "host", 1, 2) // after Close: dropped, no panic
	if w.Dropped() != 0 {
		t.Errorf("dropped %d", w.Dropped())
	}
}

// TestWriterBoundsLanes pins the lane bound: slices that all overlap take at
// most maxLanes lanes; the rest are dropped and counted.
func TestWriterBoundsLanes(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, 0)
	for i := range maxLanes + 5 {
		w.Span(1, "s", "host", int64(i), 1<<40)
	}
	if w.Dropped() != 5 {
		t.Errorf("dropped %d, want 5", w.Dropped())
	}
	w.Close()
	f, err := ParseBytes(out.Bytes())
	if err != nil || f.Check() != nil {
		t.Fatalf("%v %v", err, f.Check())
	}
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestWriterReportsWriteErrors pins that a failing writer's error comes back
// from Close.
func TestWriterReportsWriteErrors(t *testing.T) {
	w := NewWriter(failing{}, 0)
	w.Span(1, "s", "host", 0, 1)
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Close: %v", err)
	}
}

// TestCheckRefuses pins what Check refuses.
func TestCheckRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"negative ts":          `[{"name":"a","ph":"X","ts":-1,"dur":1,"pid":1,"tid":1}]`,
		"no dur":               `[{"name":"a","ph":"X","ts":1,"pid":1,"tid":1}]`,
		"unknown phase":        `[{"name":"a","ph":"Q","ts":1,"pid":1,"tid":1}]`,
		"partial overlap":      `[{"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1},{"name":"b","ph":"X","ts":5,"dur":10,"pid":1,"tid":1}]`,
		"flow without id":      `[{"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1},{"name":"f","cat":"c","ph":"s","ts":1,"pid":1,"tid":1}]`,
		"flow outside a slice": `[{"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1},{"name":"f","cat":"c","ph":"s","id":1,"ts":20,"pid":1,"tid":1}]`,
		"flow back in time": `[{"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1},{"name":"f","cat":"c","ph":"s","id":1,"ts":5,"pid":1,"tid":1},` +
			`{"name":"f","cat":"c","ph":"f","bp":"e","id":1,"ts":2,"pid":1,"tid":1}]`,
		"two starts": `[{"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1},{"name":"f","cat":"c","ph":"s","id":1,"ts":1,"pid":1,"tid":1},` +
			`{"name":"f","cat":"c","ph":"s","id":1,"ts":2,"pid":1,"tid":1}]`,
		"bad metadata": `[{"name":"colour","ph":"M","pid":1,"tid":1,"args":{"name":"x"}}]`,
	} {
		f, err := ParseBytes([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.Check() == nil {
			t.Errorf("%s: passed", name)
		}
	}
	if _, err := ParseBytes([]byte(`{"traceEvents": 5}`)); err == nil {
		t.Error("a non-array traceEvents parsed")
	}
	if _, err := ParseBytes(nil); err == nil {
		t.Error("nothing parsed")
	}
}

// FuzzParseCheck feeds Parse, Check, Flows, Summarize and WriteSVG any bytes:
// none may panic.
func FuzzParseCheck(f *testing.F) {
	var out bytes.Buffer
	w := NewWriter(&out, 0)
	a, _ := w.Span(1, "a", "host", 0, 10)
	id := w.NewFlow()
	w.Flow(id, 's', "x", a, 1)
	w.Flow(id, 'f', "x", a, 9)
	w.Close()
	f.Add(out.Bytes())
	f.Add([]byte(`[{"name":"a","ph":"X","ts":0,"dur":1e308,"pid":1,"tid":1}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := ParseBytes(b)
		if err != nil {
			return
		}
		_ = tr.Check()
		_ = tr.Flows()
		_ = Summarize(tr, 3).Print(&bytes.Buffer{}, tr.ProcessNames())
		_ = WriteSVG(&bytes.Buffer{}, tr)
	})
}

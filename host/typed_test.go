package host

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// roundTrip encodes xs, checks the bytes against want (little-endian, from
// the bits) and decodes them back bit for bit.
func roundTrip[T Element](t *testing.T, xs []T, want []byte, bits func(T) uint64) {
	t.Helper()
	b := Bytes(xs)
	if !bytes.Equal(b, want) {
		t.Fatalf("Bytes(%v) = %x, want %x", xs, b, want)
	}
	back, err := Values[T](b)
	if err != nil || len(back) != len(xs) {
		t.Fatalf("Values = %v, %v", back, err)
	}
	for i := range xs {
		if bits(back[i]) != bits(xs[i]) {
			t.Fatalf("element %d: %#x came back as %#x", i, bits(xs[i]), bits(back[i]))
		}
	}
}

func TestBytesAndValuesRoundTripEveryElementType(t *testing.T) {
	quietNaN, payloadNaN := math.Float32frombits(0x7fc00000), math.Float32frombits(0xffa00001)
	negZero := float32(math.Copysign(0, -1))
	roundTrip(t, []float32{1, negZero, quietNaN, payloadNaN, float32(math.Inf(-1)), math.SmallestNonzeroFloat32},
		[]byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x80, 0, 0, 0xc0, 0x7f, 1, 0, 0xa0, 0xff, 0, 0, 0x80, 0xff, 1, 0, 0, 0},
		func(f float32) uint64 { return uint64(math.Float32bits(f)) })
	roundTrip(t, []int32{-1, math.MinInt32, 7}, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0x80, 7, 0, 0, 0},
		func(v int32) uint64 { return uint64(uint32(v)) })
	roundTrip(t, []uint32{0xdeadbeef, 0}, []byte{0xef, 0xbe, 0xad, 0xde, 0, 0, 0, 0}, func(v uint32) uint64 { return uint64(v) })
	roundTrip(t, []uint16{0x3c00, 0x7e00, 0x8000}, []byte{0, 0x3c, 0, 0x7e, 0, 0x80}, func(v uint16) uint64 { return uint64(v) })
	type celsius float32
	roundTrip(t, []celsius{-40, 21.5}, Bytes([]float32{-40, 21.5}), func(c celsius) uint64 { return uint64(math.Float32bits(float32(c))) })
	if got := Bytes[float32](nil); len(got) != 0 {
		t.Fatalf("Bytes(nil) = %x", got)
	}
	if _, err := Values[float32](make([]byte, 6)); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("Values of 6 bytes as float32: err = %v", err)
	}
	if _, err := Values[uint16](make([]byte, 3)); err == nil {
		t.Fatal("Values of 3 bytes as uint16 was accepted")
	}
}

func TestNamedInputsArePlacedByBinding(t *testing.T) {
	p := fourBuffers(t)
	w := Work{
		Invocations:  [3]uint32{2, 1, 1},
		Inputs:       [][]byte{Bytes([]float32{1, 2})},
		Named:        []NamedInput{Input("y", []float32{3, 4})},
		OutputCounts: []uint32{0, 0, 2},
	}
	req, sizes, err := plan(p, [3]uint32{}, w)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(req.Inputs[0], Bytes([]float32{1, 2})) || !bytes.Equal(req.Inputs[1], Bytes([]float32{3, 4})) || !reflect.DeepEqual(sizes, []int{8, 8, 12}) {
		t.Fatalf("inputs %x, sizes %v", req.Inputs, sizes)
	}
	if got := launchBytes(w); got != 8+8+4*2 {
		t.Fatalf("launchBytes = %d, want the named input counted", got)
	}
}

func TestNamedInputErrors(t *testing.T) {
	p := fourBuffers(t)
	cases := []struct {
		name string
		w    Work
		want string
	}{
		{"unknown name", Work{Named: []NamedInput{Input("z", []float32{1})}}, `no buffer "z" in the program; it has fixed, out, x, y`},
		{"by name and by binding", Work{Inputs: [][]byte{nil, Bytes([]float32{1})}, Named: []NamedInput{Input("y", []float32{1})}}, "both by name and by binding"},
		{"named twice", Work{Named: []NamedInput{Input("x", []float32{1}), Input("x", []float32{2})}}, "named twice"},
		{"write-only", Work{Named: []NamedInput{Input("out", []uint32{1})}}, "write-only"},
		{"wrong element size", Work{Named: []NamedInput{Input("x", []uint16{1, 2})}}, "holds 4-byte f32 elements, its input has 2-byte uint16 elements. Fix: pass []float32"},
		{"wrong element type", Work{Named: []NamedInput{Input("x", []int32{1})}}, "holds f32, its input is int32. Fix: pass []float32"},
		{"made without Input", Work{Named: []NamedInput{{name: "x"}}}, "0-byte"},
	}
	for _, c := range cases {
		_, _, err := plan(p, [3]uint32{}, c.w)
		var le *LaunchError
		if !errors.As(err, &le) || !strings.Contains(le.Detail, c.want) || !strings.Contains(le.Detail, "Fix:") {
			t.Errorf("%s: err = %v, want a LaunchError containing %q and a Fix", c.name, err, c.want)
		}
	}
}

func TestOutputsByName(t *testing.T) {
	h := openHost(t, "cpuref")
	ctx := context.Background()
	res, err := h.Dispatch(ctx, fourBuffers(t), Launch{Backend: "cpu-ref", Work: Work{
		Invocations:  [3]uint32{3, 1, 1},
		Named:        []NamedInput{Input("x", []float32{1.5, float32(math.Copysign(0, -1)), 3}), Input("y", []float32{0, 0, 0})},
		OutputCounts: []uint32{0, 0, 3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	y, err := OutputAs[float32](res, "y")
	if err != nil || len(y) != 3 || y[0] != 1.5 || math.Float32bits(y[1]) != 0x80000000 || y[2] != 3 {
		t.Fatalf("y = %v, %v", y, err)
	}
	if out, err := OutputAs[uint32](res, "out"); err != nil || !reflect.DeepEqual(out, []uint32{0, 1, 2}) {
		t.Fatalf("out = %v, %v", out, err)
	}
	if raw, err := res.Output("fixed"); err != nil || len(raw) != 12 {
		t.Fatalf("fixed = %x, %v", raw, err)
	}
	for name, call := range map[string]func() error{
		"an input":        func() error { _, err := res.Output("x"); return err },
		"an unknown name": func() error { _, err := res.Output("nope"); return err },
		"the wrong type":  func() error { _, err := OutputAs[float32](res, "out"); return err },
		"raw 2-byte":      func() error { _, err := OutputAs[uint16](res, "y"); return err },
		"no program":      func() error { _, err := (&Result{}).Output("y"); return err },
	} {
		var le *LaunchError
		if err := call(); !errors.As(err, &le) || !strings.Contains(le.Detail, "Fix:") {
			t.Errorf("%s: err = %v, want a LaunchError with a Fix", name, err)
		}
	}
}

func TestTypedBufferTransfers(t *testing.T) {
	h := openHost(t, "cpuref")
	ctx := context.Background()
	b, err := h.Acquire(ctx, "cpu-ref")
	if err != nil {
		t.Fatal(err)
	}
	buf, err := b.Alloc(ctx, 16, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free(ctx)
	in := []float32{1, float32(math.Copysign(0, -1)), math.Float32frombits(0x7fc00001), -2}
	if err := Upload(ctx, buf, in); err != nil {
		t.Fatal(err)
	}
	got, err := Download[float32](ctx, buf)
	if err != nil || len(got) != 4 {
		t.Fatalf("Download = %v, %v", got, err)
	}
	for i := range in {
		if math.Float32bits(got[i]) != math.Float32bits(in[i]) {
			t.Fatalf("element %d: %#x came back as %#x", i, math.Float32bits(in[i]), math.Float32bits(got[i]))
		}
	}
	halves := make([]uint16, 2)
	if err := ReadInto(ctx, buf, halves); err != nil || !reflect.DeepEqual(halves, []uint16{0, 0x3f80}) {
		t.Fatalf("ReadInto = %x, %v", halves, err)
	}
	odd, err := b.Alloc(ctx, 6, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer odd.Free(ctx)
	if _, err := Download[float32](ctx, odd); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("Download of 6 bytes as float32: err = %v", err)
	}
}

func TestSlogReceivesTheHostsLog(t *testing.T) {
	var buf bytes.Buffer
	l := fromSlog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Named("kiln-backend-x").Named("stderr").With("pid", 7).Warn("plugin said", "n", 1)
	l.Trace("dropped below the handler's level")
	w := l.Named("stdout").StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error})
	w.Write([]byte("line one\nline two\n"))
	out := buf.String()
	for _, want := range []string{`level=WARN msg="plugin said" pid=7 logger=kiln-backend-x.stderr n=1`, `level=ERROR msg="line one" logger=stdout`, `msg="line two"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "dropped") || strings.Count(out, "logger=kiln-backend-x") != 1 {
		t.Errorf("log:\n%s", out)
	}
	if !l.IsDebug() || l.IsTrace() || l.GetLevel() != hclog.Debug {
		t.Errorf("levels: debug %v trace %v level %v", l.IsDebug(), l.IsTrace(), l.GetLevel())
	}
}

func TestOpenSendsTheLogToSlog(t *testing.T) {
	var buf bytes.Buffer
	h, err := Open(context.Background(), Options{PluginDir: pluginDir(t, "cpuref"), Slog: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Acquire(context.Background(), "cpu-ref"); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if buf.Len() == 0 {
		t.Fatal("nothing reached the slog.Logger")
	}
}

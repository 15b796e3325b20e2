package verify

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

func u32Bytes(vals ...uint32) []byte { return f32s(vals...) }

func f32Bytes(vals ...float32) []byte {
	bits := make([]uint32, len(vals))
	for i, v := range vals {
		bits[i] = math.Float32bits(v)
	}
	return f32s(bits...)
}

// one compares one buffer "buf" of type t with one reference under b.
func one(t ir.Type, b Bound, got, want []byte) error {
	_, err := Buffers([]Buffer{{Name: "buf", Type: t}}, b, [][]byte{got}, [][]byte{want})
	return err
}

type exactCase struct {
	name      string
	typ       ir.Type
	got, want []byte
	errHas    []string
}

func TestBuffersExact(t *testing.T) {
	nanA, nanB := uint32(0x7fc00000), uint32(0xffc00001)
	cases := []exactCase{
		{"equal u32", ir.U32, u32Bytes(1, 2, 3), u32Bytes(1, 2, 3), nil},
		{"differ u32", ir.U32, u32Bytes(1, 2, 5), u32Bytes(1, 2, 6), []string{"buf[2]: got", "got 5", "want 6"}},
		{"differ i32", ir.I32, u32Bytes(0xffffffff), u32Bytes(1), []string{"buf[0]: got", "got -1", "want 1"}},
		{"any NaN equals any NaN on f32", ir.F32, u32Bytes(nanA), u32Bytes(nanB), nil},
		{"NaN bit patterns differ on u32", ir.U32, u32Bytes(nanA), u32Bytes(nanB), []string{"buf[0]: got"}},
		{"-0 is not +0", ir.F32, u32Bytes(0x80000000), u32Bytes(0), []string{"buf[0]: got", "got -0", "want 0"}},
		{"one ulp apart", ir.F32, f32Bytes(math.Nextafter32(1, 2)), f32Bytes(1), []string{"0x3f800001", "0x3f800000"}},
		{"length", ir.U32, u32Bytes(1), u32Bytes(1, 2), []string{"output buf", "got 4 bytes (1 elements), want 8 bytes (2 elements)"}},
		{"partial element", ir.U32, []byte{1, 0, 0, 0, 1}, []byte{1, 0, 0, 0, 2}, []string{"output buf: 5 bytes, not whole 4-byte elements"}},
	}
	for _, c := range cases {
		err := one(c.typ, Bound{}, c.got, c.want)
		checkErr(t, c.name, err, c.errHas)
	}
}

func TestBuffersWithin(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	tol := Bound{Abs: 0.01, Rel: 0.1}
	cases := []struct {
		name      string
		got, want float32
		tol       Bound
		errHas    []string
	}{
		{"equal", 3, 3, Bound{}, nil},
		{"within abs", 1.0099, 1, Bound{Abs: 0.01}, nil},
		{"beyond abs", 1.0101, 1, Bound{Abs: 0.01}, []string{"buf[0]: got", "got 1.0101", "want 1 "}},
		{"within rel", 109, 100, Bound{Rel: 0.1}, nil},
		{"beyond rel", 111, 100, Bound{Rel: 0.1}, []string{"difference 11"}},
		{"abs and rel add up", 1.105, 1, tol, nil},
		{"NaN matches NaN", nan, nan, tol, nil},
		{"NaN for a number", nan, 1, Bound{Abs: 1e30}, []string{"got NaN"}},
		{"number for NaN", 1, nan, Bound{Abs: 1e30}, []string{"want NaN"}},
		{"same infinity", inf, inf, tol, nil},
		{"other infinity", -inf, inf, Bound{Abs: 1e30}, []string{"got -Inf"}},
		{"number for infinity", math.MaxFloat32, inf, Bound{Abs: 1e30, Rel: 1}, []string{"want +Inf"}},
		{"infinity for number", inf, 1, Bound{Abs: 1e30}, []string{"got +Inf"}},
	}
	for _, c := range cases {
		err := one(ir.F32, c.tol, f32Bytes(c.got), f32Bytes(c.want))
		checkErr(t, c.name, err, c.errHas)
	}
	err := one(ir.F32, tol, f32Bytes(1, 2), f32Bytes(1))
	checkErr(t, "length", err, []string{"output buf", "want 4 bytes"})
}

func checkErr(t *testing.T, name string, err error, has []string) {
	t.Helper()
	if len(has) == 0 {
		if err != nil {
			t.Errorf("%s: unexpected error %v", name, err)
		}
		return
	}
	if err == nil {
		t.Errorf("%s: no error, want one containing %q", name, has)
		return
	}
	for _, h := range has {
		if !strings.Contains(err.Error(), h) {
			t.Errorf("%s: error %q does not contain %q", name, err, h)
		}
	}
}

// FuzzBuffers feeds arbitrary bytes to Buffers, bit-exact and within a bound: it
// never panics, accepts a buffer compared with itself, and rejects a difference
// in any whole element of an integer buffer.
func FuzzBuffers(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x3f, 1, 2, 3, 4}, uint(5))
	f.Add([]byte{0, 0, 0xc0, 0x7f}, uint(0))
	f.Add([]byte{1, 2, 3}, uint(1))
	f.Fuzz(func(t *testing.T, data []byte, flip uint) {
		for _, typ := range []ir.Type{ir.U32, ir.I32, ir.F32} {
			if err := one(typ, Bound{}, data, data); (err == nil) != (len(data)%4 == 0) {
				t.Fatalf("Buffers(%s) of %d bytes with itself: %v", typ, len(data), err)
			}
		}
		if err := one(ir.F32, Bound{ULP: 3, Abs: 0.5}, data, data); (err == nil) != (len(data)%4 == 0) {
			t.Fatalf("Buffers(f32, 3 ULP) of %d bytes with itself: %v", len(data), err)
		}
		if len(data) < 4 || len(data)%4 != 0 {
			return
		}
		other := slices.Clone(data)
		other[flip%uint(len(data))] ^= 0x01
		if one(ir.U32, Bound{}, other, data) == nil {
			t.Fatalf("Buffers accepted a flipped bit")
		}
	})
}

func f32bits(v float32) uint32 { return math.Float32bits(v) }

func TestULP(t *testing.T) {
	one := f32bits(1)
	cases := []struct {
		a, b uint32
		want uint64
	}{
		{one, one, 0},
		{one, one + 1, 1},
		{0x00000000, 0x80000000, 0}, // +0 and -0
		{0x00000001, 0x80000001, 2}, // smallest denormals across zero
		{f32bits(math.MaxFloat32), 0x7F800000, 1},
		{f32bits(-1), f32bits(1), 2 * uint64(one)},
	}
	for _, c := range cases {
		if got := ULP(c.a, c.b); got != c.want {
			t.Errorf("ULP(%#x, %#x) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := ULP(c.b, c.a); got != c.want {
			t.Errorf("ULP(%#x, %#x) = %d, want %d (not symmetric)", c.b, c.a, got, c.want)
		}
	}
}

// TestBoundElement pins the element rules every comparison in kiln shares.
func TestBoundElement(t *testing.T) {
	one, w := f32bits(1), f32bits(1.5)
	exact := Bound{}
	three := Bound{ULP: 3}
	sin := Bound{ULP: 3, Abs: 0x1p-11}
	log := Bound{ULP: 3, Abs: 0x1p-21, AbsBelow: logAbsBelow}
	exp := Bound{ULP: 3, Exp: true}
	e20 := f32bits(float32(math.Exp(20))) // exp(20): 3 + 40 ULP
	cases := []struct {
		name      string
		b         Bound
		got, want uint32
		ok        bool
		ulp       uint64
		measured  bool
	}{
		{"equal", exact, one, one, true, 0, true},
		{"one ULP under bit-exact", exact, one + 1, one, false, 1, true},
		{"-0 is not +0 under bit-exact", exact, 0x80000000, 0, false, 0, true},
		{"any NaN for any NaN", exact, 0xFFC00001, 0x7FC00000, true, 0, true},
		{"NaN for a number", Bound{ULP: 1 << 30}, 0x7FC00000, one, false, 0, false},
		{"number for NaN", Bound{Abs: 1e30}, one, 0x7FC00000, false, 0, false},
		{"+0 for a denormal (flushed result)", exact, 0, 0x00000001, true, 0, true},
		{"-0 for a positive denormal", exact, 0x80000000, 0x007FFFFF, true, 0, true},
		{"a denormal for -0 (flushed reference)", exact, 0x80000005, 0x80000000, true, 0, true},
		{"0 for 2^-126 (tiny before rounding)", exact, 0, 0x80800000, true, 0, true},
		{"0 for the normal above 2^-126", exact, 0, 0x00800001, false, 0x00800001, true},
		{"one denormal for another", exact, 0x00000002, 0x00000001, false, 1, true},
		{"3 ULP within 3", three, w + 3, w, true, 3, true},
		{"-2 ULP within 3", three, w - 2, w, true, 2, true},
		{"4 ULP beyond 3", three, w + 4, w, false, 4, true},
		{"MaxFloat32 for +Inf is 1 ULP", three, f32bits(math.MaxFloat32), 0x7F800000, true, 1, true},
		{"sin within 2^-11 near 0", sin, f32bits(1e-6 + 0x1p-12), f32bits(1e-6), true, ULP(f32bits(1e-6+0x1p-12), f32bits(1e-6)), true},
		{"sin 2^-10 off", sin, f32bits(1e-6 + 0x1p-10), f32bits(1e-6), false, ULP(f32bits(1e-6+0x1p-10), f32bits(1e-6)), true},
		{"log absolute inside [0.5, 2]", log, f32bits(1e-7 + 0x1p-22), f32bits(1e-7), true, ULP(f32bits(1e-7+0x1p-22), f32bits(1e-7)), true},
		{"log absolute not outside [0.5, 2]", log, f32bits(1.5) + 4, f32bits(1.5), false, 4, true},
		{"exp(20) 43 ULP off", exp, e20 + 43, e20, true, 43, true},
		{"exp(20) 44 ULP off", exp, e20 + 44, e20, false, 44, true},
		{"absolute never accepts an infinity", Bound{Abs: 1e30, Rel: 1}, f32bits(math.MaxFloat32), 0x7F800000, false, 1, true},
	}
	for _, c := range cases {
		v := c.b.Element(c.got, c.want)
		if v.OK != c.ok || v.ULP != c.ulp || v.Measured != c.measured {
			t.Errorf("%s: Element(%#x, %#x) under %s = %+v, want ok %v, %d ULP, measured %v", c.name, c.got, c.want, c.b, v, c.ok, c.ulp, c.measured)
		}
	}
}

// A reference of exactly 1.5 accepts an element 3 ULP away under the bound of a
// program that divides, but not under the exact bound; a flushed denormal
// matches either way.
func ExampleBound_Element() {
	want := math.Float32bits(1.5)
	div := Bound{ULP: 3, Ops: []string{"div"}}
	fmt.Println(div.Element(want+3, want).OK, Bound{}.Element(want+3, want).OK)
	fmt.Println(Bound{}.Element(0x80000000, 0x00000001).OK, div)
	// Output:
	// true false
	// true 3 ULP (div)
}

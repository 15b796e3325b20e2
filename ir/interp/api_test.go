package interp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
)

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", parts)
	}
	for _, s := range parts {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func copyProgram() *ir.Program {
	b := ir.NewBuilder("test.copy", 4, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	b.FixedBuffer("fixed", ir.U32, ir.Read, 2)
	out := b.Buffer("out", ir.U32, ir.Write)
	gid := b.Let("gid", ir.GlobalID(0))
	b.Store(out, gid, ir.Load(in, gid))
	return b.Program()
}

func TestLaunchErrors(t *testing.T) {
	p := copyProgram()
	ok := [][]byte{u32Bytes(1), u32Bytes(1, 2), nil}
	tests := []struct {
		name  string
		l     Launch
		parts []string
	}{
		{"too many inputs", Launch{Grid: [3]uint32{1, 1, 1}, Inputs: append(ok, nil)}, []string{"3 buffers", "4 inputs", "Fix:"}},
		{"size not a multiple of 4", Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{{1, 2, 3}, u32Bytes(1, 2)}}, []string{`"in"`, "3 bytes", "Fix:"}},
		{"fixed count mismatch", Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{nil, u32Bytes(1, 2, 3)}}, []string{`"fixed"`, "2 elements", "12 bytes", "Fix: pass 8 bytes"}},
		{"input for a write buffer", Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{nil, u32Bytes(1, 2), u32Bytes(1)}}, []string{`"out"`, "write-only", "Fix:"}},
		{"grid beyond u32 global ids", Launch{Grid: [3]uint32{1 << 31, 1, 1}, Inputs: ok}, []string{"axis 0", "Fix:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), p, Options{}, tc.l)
			wantErr(t, err, tc.parts...)
		})
	}
	if _, err := Run(context.Background(), p, Options{}, Launch{Grid: [3]uint32{1, 1, 1}, Inputs: ok[:2]}); err != nil {
		t.Errorf("inputs may stop before trailing write buffers: %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	_, err := Compile(nil, Options{})
	wantErr(t, err, "Fix:")
	b := ir.NewBuilder("test.invalid", 1, 1, 1)
	b.Store("nowhere", u32(0), u32(1))
	_, err = Compile(b.Program(), Options{})
	wantErr(t, err, "test.invalid", "nowhere")
}

func specProgram() *ir.Program {
	b := ir.NewBuilder("test.spec", 1, 1, 1)
	a := b.Param("a", ir.F32, ir.LitF32(2))
	flag := b.Param("flag", ir.Bool, ir.LitBool(false))
	out := b.Buffer("out", ir.F32, ir.Write)
	b.Store(out, u32(0), a)
	b.Store(out, u32(1), ir.Select(flag, ir.LitF32(1), ir.LitF32(-1)))
	return b.Program()
}

func TestSpecialization(t *testing.T) {
	l := Launch{Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{2}}
	outs := mustRun(t, specProgram(), Options{}, l)
	if !bytes.Equal(outs[0], f32Bytes(2, -1)) {
		t.Errorf("defaults: got %v", outs[0])
	}
	var spec ir.SpecMap
	spec.Set("a", ir.SpecF32(5.5))
	spec.Set("flag", ir.SpecBool(true))
	outs = mustRun(t, specProgram(), Options{Spec: spec}, l)
	if !bytes.Equal(outs[0], f32Bytes(5.5, 1)) {
		t.Errorf("specialized: got %v", outs[0])
	}

	var unknown ir.SpecMap
	unknown.Set("b", ir.SpecF32(1))
	_, err := Compile(specProgram(), Options{Spec: unknown})
	wantErr(t, err, `"b"`, "[a flag]", "Fix:")

	var wrong ir.SpecMap
	wrong.Set("a", ir.SpecI32(1))
	_, err = Compile(specProgram(), Options{Spec: wrong})
	wantErr(t, err, `"a"`, "f32", "i32", "Fix:")

	var dtype ir.SpecMap
	dtype.Set("a", ir.SpecDType(ir.F32))
	_, err = Compile(specProgram(), Options{Spec: dtype})
	wantErr(t, err, `"a"`, "dtype", "Fix:")
}

func TestWorkgroupSizeOverride(t *testing.T) {
	b := ir.NewBuilder("test.override", 4, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	gid := b.Let("gid", ir.Add(ir.GlobalID(0), ir.Mul(ir.GlobalID(1), u32(4))))
	b.Store(out, gid, ir.Add(ir.Mul(ir.WorkgroupSize(0), u32(100)), ir.Add(ir.Mul(ir.WorkgroupSize(1), u32(10)), ir.WorkgroupSize(2))))
	k, err := Compile(b.Program(), Options{WorkgroupSize: [3]uint32{2, 3, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if k.WorkgroupSize() != [3]uint32{2, 3, 1} {
		t.Errorf("WorkgroupSize() = %v", k.WorkgroupSize())
	}
	if k.Program().Name != "test.override" {
		t.Errorf("Program() = %q", k.Program().Name)
	}
	outs, err := k.Run(context.Background(), Launch{Grid: [3]uint32{2, 1, 1}, OutputCounts: []uint32{12}})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range bytesU32(outs[0]) {
		if v != 231 {
			t.Fatalf("out[%d] = %d, want 231 for every invocation of a 2x3x1 workgroup", i, v)
		}
	}
	for _, bad := range [][3]uint32{{0, 1, 1}, {64, 32, 1}} {
		_, err := Compile(b.Program(), Options{WorkgroupSize: bad})
		wantErr(t, err, "override", "Fix:")
	}
}

// Every builtin on every axis, on a 3-D grid of 3-D workgroups.
func TestBuiltinsMultiDimensional(t *testing.T) {
	wg := [3]uint32{2, 3, 2}
	grid := [3]uint32{2, 2, 3}
	size := [3]uint32{wg[0] * grid[0], wg[1] * grid[1], wg[2] * grid[2]}
	total := size[0] * size[1] * size[2]
	b := ir.NewBuilder("test.builtins", wg[0], wg[1], wg[2])
	var outs [5]string
	kinds := []func(uint8) ir.Expr{ir.GlobalID, ir.LocalID, ir.WorkgroupID, ir.NumWorkgroups, ir.WorkgroupSize}
	for i := range outs {
		outs[i] = b.Buffer(fmt.Sprintf("out%d", i), ir.U32, ir.Write)
	}
	g := [3]ir.Expr{ir.GlobalID(0), ir.GlobalID(1), ir.GlobalID(2)}
	idx := b.Let("idx", ir.Add(g[0], ir.Mul(u32(size[0]), ir.Add(g[1], ir.Mul(u32(size[1]), g[2])))))
	for i, kind := range kinds {
		packed := ir.Or(kind(0), ir.Or(ir.Shl(kind(1), u32(8)), ir.Shl(kind(2), u32(16))))
		b.Store(outs[i], idx, packed)
	}
	counts := []uint32{total, total, total, total, total}
	res := mustRun(t, b.Program(), Options{}, Launch{Grid: grid, OutputCounts: counts})
	pack := func(v [3]uint32) uint32 { return v[0] | v[1]<<8 | v[2]<<16 }
	for z := range size[2] {
		for y := range size[1] {
			for x := range size[0] {
				i := x + size[0]*(y+size[1]*z)
				gid := [3]uint32{x, y, z}
				var l, w [3]uint32
				for a := range 3 {
					l[a], w[a] = gid[a]%wg[a], gid[a]/wg[a]
				}
				want := []uint32{pack(gid), pack(l), pack(w), pack(grid), pack(wg)}
				for k, o := range res {
					if got := bytesU32(o)[i]; got != want[k] {
						t.Fatalf("builtin %d at global id %v = %#x, want %#x", k, gid, got, want[k])
					}
				}
			}
		}
	}
}

func infiniteLoop() *ir.Program {
	b := ir.NewBuilder("test.forever", 8, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	n := b.Var("n", ir.U32, u32(0))
	b.While(ir.LitBool(true), func(body *ir.Block) { body.Assign("n", ir.Add(n, u32(1))) })
	b.Store(out, lid, n)
	return b.Program()
}

func TestCancellationStopsInfiniteLoop(t *testing.T) {
	l := Launch{Grid: [3]uint32{4, 1, 1}, OutputCounts: []uint32{32}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, infiniteLoop(), Options{}, l)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want it to wrap context.DeadlineExceeded", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	_, err = Run(ctx, infiniteLoop(), Options{}, l)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want it to wrap context.Canceled", err)
	}
	_, err = Run(ctx, copyProgram(), Options{}, Launch{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a run with a cancelled context: err = %v, want context.Canceled", err)
	}
}

// Cancellation is also seen between workgroups, on a grid too large to finish.
func TestCancellationBetweenWorkgroups(t *testing.T) {
	b := ir.NewBuilder("test.many", 1, 1, 1)
	b.Buffer("out", ir.U32, ir.Write)
	b.Let("x", ir.GlobalID(0))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, b.Program(), Options{}, Launch{Grid: [3]uint32{1 << 31, 1 << 31, 1}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want it to wrap context.DeadlineExceeded", err)
	}
}

// A Kernel runs concurrently from several goroutines, each run with its own data,
// and every worker count gives the same result.
func TestConcurrentRunsAndWorkerCounts(t *testing.T) {
	k, err := Compile(matmulProgram(), Options{Spec: matmulSpec(20, 12, 9)})
	if err != nil {
		t.Fatal(err)
	}
	run := func(k *Kernel, seed int) ([]byte, []byte) {
		a, bm := make([]float32, 20*9), make([]float32, 9*12)
		for i := range a {
			a[i] = float32((i*seed)%13) - 6
		}
		for i := range bm {
			bm[i] = float32((i+seed)%7) * 0.5
		}
		want := make([]float32, 20*12)
		for r := range 20 {
			for c := range 12 {
				var acc float32
				for j := range 9 {
					acc += float32(a[r*9+j] * bm[j*12+c])
				}
				want[r*12+c] = acc
			}
		}
		outs, err := k.Run(context.Background(), Launch{
			Grid: [3]uint32{1, 2, 1}, Inputs: [][]byte{f32Bytes(a...), f32Bytes(bm...), nil}, OutputCounts: []uint32{0, 0, 20 * 12},
		})
		if err != nil {
			t.Error(err)
			return nil, nil
		}
		return outs[0], f32Bytes(want...)
	}
	var wg sync.WaitGroup
	for seed := 1; seed <= 6; seed++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, want := run(k, seed); !bytes.Equal(got, want) {
				t.Errorf("seed %d: concurrent run differs from the Go reference", seed)
			}
		}()
	}
	wg.Wait()
	for _, n := range []int{1, 3} {
		k2 := *k
		k2.workers = n
		if got, want := run(&k2, 9); !bytes.Equal(got, want) {
			t.Errorf("%d workers: result differs from the Go reference", n)
		}
	}
}

func matmulSpec(m, n, k uint32) ir.SpecMap {
	var spec ir.SpecMap
	spec.Set("m", ir.SpecU32(m))
	spec.Set("n", ir.SpecU32(n))
	spec.Set("k", ir.SpecU32(k))
	return spec
}

func TestVectorAddMatchesGo(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 257, 5000} {
		a, bv := make([]float32, n), make([]float32, n)
		want := make([]float32, n)
		for i := range a {
			a[i], bv[i] = float32(i)*0.1, 1/float32(i+1)
			want[i] = a[i] + bv[i]
		}
		outs := mustRun(t, vectorAddProgram(), Options{}, Launch{
			Grid:   ir.GridFor([3]uint32{uint32(n), 1, 1}, [3]uint32{256, 1, 1}),
			Inputs: [][]byte{f32Bytes(a...), f32Bytes(bv...), nil}, OutputCounts: []uint32{0, 0, uint32(n)},
		})
		if !bytes.Equal(outs[0], f32Bytes(want...)) {
			t.Errorf("n=%d: vector add differs from Go", n)
		}
	}
}

// Buffers may be declared in any order; inputs and outputs follow the bindings.
func TestBuffersDeclaredOutOfBindingOrder(t *testing.T) {
	p := &ir.Program{
		Name:          "test.order",
		WorkgroupSize: [3]uint32{2, 1, 1},
		Buffers: []ir.BufferDecl{
			{Name: "out", Binding: 2, Type: ir.U32, Access: ir.Write},
			{Name: "b", Binding: 0, Type: ir.U32, Access: ir.Read},
			{Name: "a", Binding: 1, Type: ir.U32, Access: ir.ReadWrite},
		},
		Body: []ir.Stmt{
			ir.StoreStmt{Target: "out", Index: lid, Value: ir.Sub(ir.Load("a", lid), ir.Load("b", lid))},
			ir.StoreStmt{Target: "a", Index: lid, Value: ir.Len("out")},
		},
	}
	outs := mustRun(t, p, Options{}, Launch{
		Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{u32Bytes(1, 2), u32Bytes(10, 20), nil}, OutputCounts: []uint32{0, 0, 3},
	})
	if got := bytesU32(outs[0]); !slices.Equal(got, []uint32{3, 3}) {
		t.Errorf("a (binding 1) = %v, want [3 3]", got)
	}
	if got := bytesU32(outs[1]); !slices.Equal(got, []uint32{9, 18, 0}) {
		t.Errorf("out (binding 2) = %v, want [9 18 0]", got)
	}
}

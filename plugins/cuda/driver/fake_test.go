package driver

import (
	"errors"
	"testing"

	"github.com/ebitengine/purego"
)

// TestDynamicSharedMemory runs SetFunctionAttribute and Launch against a fake
// driver (Go functions behind purego callbacks in place of libcuda's): the
// attribute and its value reach cuFuncSetAttribute, the dynamic shared size
// reaches cuLaunchKernel's sharedMemBytes, and a driver without
// cuFuncSetAttribute gives a *SymbolMissingError instead of calling address 0.
func TestDynamicSharedMemory(t *testing.T) {
	type setCall struct{ fn, attr, value uintptr }
	var sets []setCall
	var launched []uintptr
	d := &Driver{library: "fake-libcuda.so"}
	d.fns[fnFuncSetAttribute] = purego.NewCallback(func(fn, attr, value uintptr) uintptr {
		sets = append(sets, setCall{fn, attr, value})
		return 0
	})
	d.fns[fnLaunchKernel] = purego.NewCallback(func(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra uintptr) uintptr {
		launched = append(launched, fn, gx, bx, shared)
		return 0
	})
	if !d.HasSetFunctionAttribute() {
		t.Fatal("the fake driver has cuFuncSetAttribute, HasSetFunctionAttribute says not")
	}
	c := &Context{d: d, dev: Device{d: d}}
	const fn, size = Function(0x1234), 176 << 10
	if err := c.SetFunctionAttribute(fn, FuncMaxDynamicSharedSizeBytes, size); err != nil {
		t.Fatal(err)
	}
	p := NewParams(1)
	defer p.Free()
	if err := c.Launch(fn, [3]uint32{32, 16, 1}, [3]uint32{512, 1, 1}, size, 0, p); err != nil {
		t.Fatal(err)
	}
	if len(sets) != 1 || sets[0] != (setCall{0x1234, 8, size}) {
		t.Errorf("cuFuncSetAttribute calls %v, want (0x1234, 8, %d)", sets, size)
	}
	if len(launched) != 4 || launched[0] != 0x1234 || launched[1] != 32 || launched[2] != 512 || launched[3] != size {
		t.Errorf("cuLaunchKernel got function, grid x, block x, shared %v; want 0x1234, 32, 512, %d", launched, size)
	}

	bare := &Driver{library: "libcuda-without-setattribute.so"}
	var sm *SymbolMissingError
	if bare.HasSetFunctionAttribute() {
		t.Error("a driver without cuFuncSetAttribute says it has it")
	}
	if err := (&Context{d: bare, dev: Device{d: bare}}).SetFunctionAttribute(fn, FuncMaxDynamicSharedSizeBytes, size); !errors.As(err, &sm) || sm.Symbol != "cuFuncSetAttribute" {
		t.Errorf("SetFunctionAttribute without the symbol: %v", err)
	}
}

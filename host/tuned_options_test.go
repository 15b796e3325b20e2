package host

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/ir"
)

// Backend.TunedOptions reads the record of a kernel's searched options (kiln
// tune's tile of matmul_tc) keyed by the kernel, its fixed options and the
// device: another type or kernel finds none, and a record whose workgroup
// size the adapter cannot run is ignored as any record is.
func TestTunedOptionsReadsTheKernelsRecord(t *testing.T) {
	store, err := autotune.Load(filepath.Join(t.TempDir(), "autotune.toml"))
	if err != nil {
		t.Fatal(err)
	}
	h := openWith(t, Options{Autotune: store, NoCache: true, NoPGO: true}, "fx-blob")
	b, err := h.Acquire(context.Background(), "fx-blob")
	if err != nil {
		t.Fatal(err)
	}
	fixed := func(typ ir.Type) ir.SpecMap {
		var m ir.SpecMap
		m.Set("type", ir.SpecDType(typ))
		return m
	}
	if _, ok := b.TunedOptions("matmul_tc", fixed(ir.BF16)); ok {
		t.Fatal("a record in an empty store")
	}
	if err := store.Put(autotune.OptionsKey("matmul_tc", fixed(ir.BF16), fixtureAdapter), autotune.Record{WorkgroupSize: [3]uint32{128, 1, 1}, Params: "tk=64 tm=64 tn=128"}); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.TunedOptions("matmul_tc", fixed(ir.BF16)); !ok || got != "tk=64 tm=64 tn=128" {
		t.Fatalf("got %q, %v", got, ok)
	}
	if _, ok := b.TunedOptions("matmul_tc", fixed(ir.F16)); ok {
		t.Fatal("f16 found bf16's record")
	}
	if _, ok := b.TunedOptions("matmul", fixed(ir.BF16)); ok {
		t.Fatal("another kernel found matmul_tc's record")
	}
	// The fixture allows 256 invocations.
	if err := store.Put(autotune.OptionsKey("matmul_tc", fixed(ir.BF16), fixtureAdapter), autotune.Record{WorkgroupSize: [3]uint32{512, 1, 1}, Params: "tk=64 tm=256 tn=128"}); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.TunedOptions("matmul_tc", fixed(ir.BF16)); ok {
		t.Fatalf("a record the adapter cannot run: %q", got)
	}
}

package autotune_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/ir"
)

// A tuner records its winner per program variant and device; a later compile
// of the same variant on the same device reads it back.
func ExampleStore() {
	dir, _ := os.MkdirTemp("", "kiln-autotune-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "autotune.toml")

	b := ir.NewBuilder("example.fill", 64, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	b.Store(out, ir.GlobalID(0), ir.LitU32(7))
	prog := b.MustBuild()
	device := autotune.DeviceAdapter("vulkan", "5f0c4d6e2a1b3c4d5e6f708192a3b4c5")
	key := autotune.KeyFor(prog, ir.SpecMap{}, device)

	st, err := autotune.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	st.Put(key, autotune.Record{WorkgroupSize: [3]uint32{256, 1, 1}, Unroll: 4, RecordedAt: "2026-05-02"})
	if _, err := st.SaveIfDirty(context.Background()); err != nil {
		fmt.Println(err)
		return
	}

	again, _ := autotune.Load(path)
	rec, ok := again.Get(key)
	fmt.Println(ok, rec.WorkgroupSize, rec.Unroll)
	// Output: true [256 1 1] 4
}

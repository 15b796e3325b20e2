package pgo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kiln-dev/kiln/pgo"
)

// A route is used only while the backend it names is live with the adapter
// and plugin version it was measured on.
func ExampleTable_Fresh() {
	dir, _ := os.MkdirTemp("", "kiln-pgo-example-")
	defer os.RemoveAll(dir)
	t := pgo.New(filepath.Join(dir, "pgo.toml"))
	t.Set("kiln.vector.add.f32", pgo.Route{Backend: "vulkan:0", AdapterFingerprint: "5f0c", PluginVersion: "1.0.0",
		Observations: []pgo.Observation{{Backend: "vulkan:0", MedianNs: 41000}}, MeasuredAt: time.Now()})
	if _, err := t.Save(context.Background()); err != nil {
		fmt.Println(err)
		return
	}

	live := []pgo.Live{{ID: "vulkan:0", AdapterFingerprint: "5f0c", PluginVersion: "1.0.0"}}
	r, why := t.Fresh("kiln.vector.add.f32", live)
	fmt.Printf("%q %q\n", r.Backend, why)

	live[0].PluginVersion = "1.1.0"
	_, why = t.Fresh("kiln.vector.add.f32", live)
	fmt.Println(why)
	// Output:
	// "vulkan:0" ""
	// the PGO route for kiln.vector.add.f32 is stale: vulkan:0 was measured with plugin version "1.0.0", the live one is "1.1.0"
}

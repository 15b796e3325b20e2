package cache_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kiln-dev/kiln/cache"
)

// A pipeline cache keeps what a backend returns from a compile under the
// pipeline's key; a read of another key, or of a damaged entry, is a miss with
// its reason.
func ExampleDiskCache() {
	dir, _ := os.MkdirTemp("", "kiln-cache-example-")
	defer os.RemoveAll(dir)
	c, err := cache.Open(filepath.Join(dir, "pipelines"))
	if err != nil {
		fmt.Println(err)
		return
	}
	key := cache.Key{BackendID: "vulkan", PluginVersion: "1.0.0", WorkgroupSize: [3]uint32{64, 1, 1}, DeviceFingerprint: "5f0c"}
	if err := c.Write(key, []byte("compiled pipeline")); err != nil {
		fmt.Println(err)
		return
	}
	hit, _ := c.Get(key)
	fmt.Printf("hit %v: %s\n", hit.Hit(), hit.Payload)

	newer := key
	newer.PluginVersion = "1.0.1"
	miss, _ := c.Get(newer)
	fmt.Println("another plugin build:", miss.Miss)

	os.WriteFile(c.PathFor(key), []byte("torn"), 0o644)
	miss, _ = c.Get(key)
	fmt.Println("a torn entry:", miss.Miss)

	if err := c.Flush(context.Background()); err != nil {
		fmt.Println(err)
	}
	u, _ := c.Usage()
	fmt.Printf("hits %d, misses %v\n", u.Local.Hits, u.Local.Misses)
	// Output:
	// hit true: compiled pipeline
	// another plugin build: absent
	// a torn entry: truncated
	// hits 1, misses map[absent:1 truncated:1]
}

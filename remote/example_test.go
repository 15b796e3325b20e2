package remote_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/remote"
)

// Two machines share a fleet tier (here a shared directory; s3://, gs:// and
// azblob:// URLs work the same once their driver is imported, e.g.
// import _ "github.com/kiln-dev/kiln/remote/s3"): the second reads what the
// first compiled.
func ExampleCache() {
	dir, _ := os.MkdirTemp("", "kiln-remote-example-")
	defer os.RemoveAll(dir)
	shared := filepath.Join(dir, "fleet")
	os.MkdirAll(shared, 0o755)
	url := "file://" + filepath.ToSlash(shared)

	machine := func(name string) (*remote.Cache, error) {
		local, err := cache.Open(filepath.Join(dir, name, "pipelines"))
		if err != nil {
			return nil, err
		}
		r, err := remote.Open(context.Background(), url, remote.Options{})
		if err != nil {
			return nil, err
		}
		return remote.NewCache(local, r), nil
	}
	key := cache.Key{BackendID: "vulkan", PluginVersion: "1.0.0", DeviceFingerprint: "5f0c"}

	first, err := machine("first")
	if err != nil {
		fmt.Println(err)
		return
	}
	first.Write(key, []byte("compiled once for the fleet"))
	first.Flush(context.Background()) // waits (bounded) for the upload

	second, err := machine("second")
	if err != nil {
		fmt.Println(err)
		return
	}
	l, _ := second.Get(key)
	fmt.Printf("hit %v, from the fleet tier %v: %s\n", l.Hit(), l.Remote, l.Payload)
	l, _ = second.Get(key)
	fmt.Printf("again: from the fleet tier %v\n", l.Remote)
	// Output:
	// hit true, from the fleet tier true: compiled once for the fleet
	// again: from the fleet tier false
}

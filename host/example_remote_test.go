package host_test

import (
	"context"
	"fmt"

	"gocloud.dev/blob/memblob"

	"github.com/kiln-dev/kiln/host"
)

// The application opens the fleet tier's bucket itself, with the
// gocloud.dev/blob driver it already uses (here an in-memory bucket;
// s3blob.OpenBucket with the application's own AWS client works the same), and
// the host reads through it and publishes to it. The host links no cloud SDK
// of its own, and leaves the bucket open for the application to close.
func ExampleOptions_remoteBucket() {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()

	h, err := host.Open(ctx, host.Options{RemoteBucket: bucket})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	res, err := h.Dispatch(ctx, saxpy(), host.Launch{
		Backend: "cpu-ref",
		Work:    host.Work{Invocations: [3]uint32{2, 1, 1}, Inputs: [][]byte{f32s(1, 2), f32s(0, 0)}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	u := h.Remote().Usage()
	fmt.Println(floats(res.Outputs[0]), res.Cache, "- the fleet tier was asked:", u.Misses)
	// Output: [2 4] miss - the fleet tier was asked: map[absent:1]
}

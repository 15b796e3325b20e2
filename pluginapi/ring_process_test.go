//go:build linux

package pluginapi

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// TestProcessKilledPluginReleasesTheRings pins the ring segment's lifetime
// across a real plugin process: each side maps it once while the plane is
// open, the host keeps no descriptor of it, and when the plugin is killed
// with SIGKILL the host notices, loses the plane and unmaps its rings.
func TestProcessKilledPluginReleasesTheRings(t *testing.T) {
	base := ringMappings(t)
	c, b, logs := startHelper(t, "segments")
	conn := b.(Conn)
	ctx := context.Background()
	if _, err := conn.Describe(ctx); err != nil {
		t.Fatalf("Describe: %v\nlog:\n%s", err, logs)
	}
	if !conn.Capabilities().SharedMemory {
		t.Fatalf("no data plane: %+v\nlog:\n%s", conn.Capabilities(), logs)
	}
	if _, err := conn.AllocBuffer(ctx, &AllocRequest{Size: 64}); err != nil {
		t.Fatal(err)
	}
	pid := c.ReattachConfig().Pid
	if n := ringMappings(t); n != base+1 {
		t.Errorf("the host maps %d ring segments, baseline %d", n, base)
	}
	if n := ringDescriptors(t); n != 0 {
		t.Errorf("the host keeps %d descriptors of ring segments", n)
	}
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(maps, []byte("/memfd:"+RingSegmentName)); n != 1 {
		t.Errorf("the plugin maps %d ring segments, want 1", n)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return conn.Lost() != nil }) {
		t.Fatal("the host did not notice the killed plugin")
	}
	if !eventually(func() bool { return ringMappings(t) == base }) {
		t.Fatalf("%d ring mappings after the plugin was killed, baseline %d", ringMappings(t), base)
	}
	if _, err := conn.AllocBuffer(ctx, &AllocRequest{Size: 64}); err == nil {
		t.Error("an allocation on the plane of a killed plugin succeeded")
	}
}

//go:build linux

package client

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/pluginapi"
)

// TestProcessKilledPluginReleasesTheRings pins the ring segment's lifetime
// across a real plugin process: each side maps it once while the plane is
// open, the host keeps no descriptor of it, and when the plugin is killed
// with SIGKILL the host notices, loses the plane and unmaps its rings.
func TestProcessKilledPluginReleasesTheRings(t *testing.T) {
	c, conn := startPlaneHelper(t)
	ctx := context.Background()
	if _, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 64}); err != nil {
		t.Fatal(err)
	}
	pid := c.ReattachConfig().Pid
	_, pl := conn.v2.snapshot()
	at := mappedRing(t, pl)
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(maps, []byte("/memfd:"+wire.RingSegmentName)); n != 1 {
		t.Errorf("the plugin maps %d ring segments, want 1", n)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return conn.Lost() != nil }) {
		t.Fatal("the host did not notice the killed plugin")
	}
	if !eventually(func() bool { return !ringMappedAt(t, at) }) {
		t.Fatal("the ring segment is still mapped after the plugin was killed")
	}
	if _, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 64}); err == nil {
		t.Error("an allocation on the plane of a killed plugin succeeded")
	}
}

// mappedRing returns the address of p's ring segment, failing the test unless
// this process maps it there and keeps no descriptor of a ring segment.
func mappedRing(t *testing.T, p *plane) uintptr {
	t.Helper()
	p.mu.Lock()
	at := ringAddr(p.rings)
	p.mu.Unlock()
	if !ringMappedAt(t, at) {
		t.Fatalf("the plane's ring segment is not mapped at %#x", at)
	}
	if n := ringDescriptors(t); n != 0 {
		t.Errorf("the host keeps %d descriptors of ring segments", n)
	}
	return at
}

// ringMappedAt reports whether this process maps a ring segment at address at.
func ringMappedAt(t *testing.T, at uintptr) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, strconv.FormatUint(uint64(at), 16)+"-") && strings.Contains(line, "/memfd:"+wire.RingSegmentName) {
			return true
		}
	}
	return false
}

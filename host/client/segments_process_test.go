//go:build linux

package client

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/pluginapi"
)

// segmentBackend is memBackend with Segments and Artifacts: it records every
// segment notice and, for every view the SDK hands it, which attached segment
// the view lies in. Artifact of kind "notices" returns the record, one notice
// per line. It keeps UsageMap buffers of any size but 8 bytes in their shared
// memory and refuses to attach segments over 1 MiB.
type segmentBackend struct {
	*memBackend
	mu       sync.Mutex
	attached map[uint64][]byte
	notices  []string
}

func newSegmentBackend() *segmentBackend {
	return &segmentBackend{memBackend: newMemBackend(), attached: map[uint64][]byte{}}
}

func (s *segmentBackend) note(format string, args ...any) {
	s.notices = append(s.notices, fmt.Sprintf(format, args...))
}

// where names the attached segment view lies in: "3@128", or "none".
func (s *segmentBackend) where(view []byte) string {
	for id, mem := range s.attached {
		if off, ok := pluginapi.ViewOffset(mem, view); ok {
			return fmt.Sprintf("%d@%d", id, off)
		}
	}
	return "none"
}

func (s *segmentBackend) AttachSegment(_ context.Context, id uint64, mem []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	aligned := len(mem)%os.Getpagesize() == 0 && pageAligned(mem)
	if len(mem) > 1<<20 {
		s.note("refuse %d", id)
		return pluginapi.DeviceFailed("segment %d of %d bytes is too large to register", id, len(mem))
	}
	s.note("attach %d %d aligned=%v", id, len(mem), aligned)
	s.attached[id] = mem
	return nil
}

func (s *segmentBackend) DetachSegment(_ context.Context, id uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.note("detach %d", id)
	delete(s.attached, id)
	return nil
}

func (s *segmentBackend) AllocBuffer(ctx context.Context, req *pluginapi.AllocRequest) (*pluginapi.AllocResult, error) {
	s.mu.Lock()
	at := "none"
	if req.Shared != nil {
		at = s.where(req.Shared)
	}
	s.note("alloc %d shared=%d at %d@%d, found %s", req.Size, len(req.Shared), req.SharedSegment, req.SharedOffset, at)
	s.mu.Unlock()
	if req.Size == 8 {
		plain := *req
		plain.Shared = nil
		return s.memBackend.AllocBuffer(ctx, &plain)
	}
	return s.memBackend.AllocBuffer(ctx, req)
}

func (s *segmentBackend) WriteBuffer(ctx context.Context, h, off uint64, src []byte) error {
	s.mu.Lock()
	s.note("write from %s", s.where(src))
	s.mu.Unlock()
	return s.memBackend.WriteBuffer(ctx, h, off, src)
}

func (s *segmentBackend) ReadBuffer(ctx context.Context, h, off uint64, dst []byte) error {
	s.mu.Lock()
	s.note("read into %s", s.where(dst))
	s.mu.Unlock()
	return s.memBackend.ReadBuffer(ctx, h, off, dst)
}

func (s *segmentBackend) Artifact(_ context.Context, req *pluginapi.ArtifactRequest) (*pluginapi.Artifact, error) {
	if req.Kind != "notices" {
		return nil, pluginapi.Rejected("kind %q. Fix: ask for notices", req.Kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return &pluginapi.Artifact{Data: []byte(strings.Join(s.notices, "\n"))}, nil
}

// pageAligned reports whether mem starts on a page boundary.
func pageAligned(mem []byte) bool {
	return len(mem) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%uintptr(os.Getpagesize()) == 0
}

// processMemfdMappings counts pid's mappings of data-plane segments.
func processMemfdMappings(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("/memfd:"+wire.SegmentName))
}

// TestProcessSegmentNotices pins the Segments notices in a real plugin process:
// a segment is attached before any view of it reaches the backend (a mapped
// buffer's before AllocBuffer, which learns where Shared lies), is page-aligned
// and whole pages long, and is detached before it is unmapped (after
// FreeBuffer, after an AllocBuffer that declined it); staged write and read
// views lie in attached segments; a refused attach fails the allocation and
// leaves nothing mapped in the plugin.
func TestProcessSegmentNotices(t *testing.T) {
	c, conn := startPlaneHelper(t)
	ctx := context.Background()
	page := os.Getpagesize()

	mapped, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 100, Usage: pluginapi.UsageMap})
	if err != nil {
		t.Fatal(err)
	}
	if !mapped.Mapped || len(conn.Mapping(mapped.Buffer)) != 100 {
		t.Fatalf("mapped buffer: %+v, mapping of %d bytes", mapped, len(conn.Mapping(mapped.Buffer)))
	}
	if _, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 8, Usage: pluginapi.UsageMap}); err != nil {
		t.Fatal(err)
	}
	plain, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 16})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("sixteen bytes ok")
	if err := conn.WriteBuffer(ctx, plain.Buffer, 0, data); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	if err := conn.ReadBuffer(ctx, plain.Buffer, 0, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %q, %v", got, err)
	}
	if err := conn.FreeBuffer(ctx, mapped.Buffer); err != nil {
		t.Fatal(err)
	}
	_, err = conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 2 << 20, Usage: pluginapi.UsageMap})
	if err == nil || !strings.Contains(err.Error(), "too large to register") {
		t.Fatalf("alloc whose segment the backend refused: %v", err)
	}

	a, err := conn.Artifact(ctx, &pluginapi.ArtifactRequest{Program: saxpyProgram(), Kind: "notices"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("attach 1 %d aligned=true", page),
		"alloc 100 shared=100 at 1@0, found 1@0",
		fmt.Sprintf("attach 2 %d aligned=true", page),
		"alloc 8 shared=8 at 2@0, found 2@0",
		"detach 2",
		"alloc 16 shared=0 at 0@0, found none",
		fmt.Sprintf("attach 3 %d aligned=true", minStagingBytes),
		"write from 3@0",
		"read into 3@0",
		"detach 1",
		"refuse 4",
	}
	if g := strings.Split(string(a.Data), "\n"); strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("notices:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
	// Only the staging segment is still mapped in the plugin: the freed, the
	// declined and the refused segments were unmapped.
	if n := processMemfdMappings(t, c.ReattachConfig().Pid); n != 1 {
		t.Errorf("the plugin maps %d segments, want 1 (the staging segment)", n)
	}
}

// startPlaneHelper starts the helper plugin in "segments" mode, describes it
// and requires the shared-memory data plane.
func startPlaneHelper(t *testing.T) (*plugin.Client, *Conn) {
	t.Helper()
	c, conn, logs := startHelper(t, "segments")
	if _, err := conn.Describe(context.Background()); err != nil {
		t.Fatalf("Describe: %v\nlog:\n%s", err, logs)
	}
	if !conn.Capabilities().SharedMemory {
		t.Fatalf("no data plane: %+v\nlog:\n%s", conn.Capabilities(), logs)
	}
	return c, conn
}

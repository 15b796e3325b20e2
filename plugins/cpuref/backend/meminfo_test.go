package backend

import (
	"strings"
	"testing"
)

func TestParseMeminfo(t *testing.T) {
	in := "MemTotal:       16318412 kB\nMemFree:          123456 kB\nMemAvailable:    8000000 kB\nBuffers: 1 kB\n"
	total, avail := parseMeminfo(strings.NewReader(in))
	if total != 16318412<<10 || avail != 8000000<<10 {
		t.Errorf("parseMeminfo = %d, %d", total, avail)
	}
	for _, bad := range []string{"", "MemTotal: 12\n", "MemTotal: x kB\n", "MemTotal: 1 2 kB\n", "MemTotal 12 kB\n", "MemTotal: 99999999999999999999 kB\n"} {
		if total, avail := parseMeminfo(strings.NewReader(bad)); total != 0 || avail != 0 {
			t.Errorf("parseMeminfo(%q) = %d, %d, want unknown", bad, total, avail)
		}
	}
}

// TestProfileReportsTheMachinesMemory pins that cpu-ref's profile carries the
// machine's memory (on Linux) and says its bandwidth is not measured.
func TestProfileReportsTheMachinesMemory(t *testing.T) {
	p := Profile()
	total, _ := machineMemory()
	if total > 0 && (p.MemoryBytes == 0 || p.MemoryFreeBytes > p.MemoryBytes) {
		t.Errorf("memory %d free of %d, machine %d", p.MemoryFreeBytes, p.MemoryBytes, total)
	}
	if p.MemBWStatus.String() != "unmeasured" || p.MemBWGBps != 0 {
		t.Errorf("bandwidth %v (%v), want 0, unmeasured", p.MemBWGBps, p.MemBWStatus)
	}
}

func FuzzParseMeminfo(f *testing.F) {
	f.Add("MemTotal:       16318412 kB\nMemAvailable:    8000000 kB\n")
	f.Add("MemTotal: 18446744073709551615 kB\n")
	f.Fuzz(func(t *testing.T, in string) {
		total, avail := parseMeminfo(strings.NewReader(in))
		if total%1024 != 0 || avail%1024 != 0 {
			t.Errorf("parseMeminfo(%q) = %d, %d: not whole kB", in, total, avail)
		}
	})
}

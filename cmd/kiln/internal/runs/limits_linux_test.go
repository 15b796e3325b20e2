package runs

import "testing"

func TestAvailableMemory(t *testing.T) {
	if AvailableMemory() == 0 {
		t.Fatal("MemAvailable unreadable from /proc/meminfo")
	}
}

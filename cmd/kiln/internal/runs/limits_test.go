package runs

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir/kernels"
)

func TestKernelBytesNeverFallShort(t *testing.T) {
	for _, k := range kernels.All() {
		for _, size := range []int{0, 1, 100, 1000, 1100} {
			exact, exactLargest := sum(caseBytes(k, size))
			est, largest := KernelBytes(k, size)
			if est < exact || largest < exactLargest {
				t.Errorf("%s at %d: estimate %d (largest %d) below the case's %d (%d)", k.Name, size, est, largest, exact, exactLargest)
			}
			if exact > 0 && est > 4*exact+4096 {
				t.Errorf("%s at %d: estimate %d is far above the case's %d", k.Name, size, est, exact)
			}
		}
	}
}

func TestCheckKernelRefusesWhatCannotBeAllocated(t *testing.T) {
	saxpy, _ := kernels.Lookup("saxpy")
	matmul, _ := kernels.Lookup("matmul")
	l := Limits{MemAvailable: 8 << 30, MaxBinding: 1 << 30, Backend: "cpu-ref:0"}
	for _, tc := range []struct {
		k    kernels.Kernel
		size int
		want string
	}{
		{saxpy, 1_000_000_000_000, "the most elements a u32 length counts"},
		{saxpy, 300_000_000, "cpu-ref:0's storage binding limit"},
		{matmul, 100_000, "storage binding limit"},
		{saxpy, -1, "negative"},
	} {
		err := l.CheckKernel(tc.k, tc.size)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s at %d: %v, want %q", tc.k.Name, tc.size, err, tc.want)
		}
	}
	mem := Limits{MemAvailable: 1 << 30}
	if err := mem.CheckKernel(saxpy, 200_000_000); err == nil || !strings.Contains(err.Error(), "only 1 GiB is available") {
		t.Errorf("1.6 GB of buffers with 1 GiB available: %v", err)
	}
	if err := l.CheckKernel(saxpy, 4096); err != nil {
		t.Errorf("a small size: %v", err)
	}
	if err := (Limits{}).CheckKernel(saxpy, 1<<30); err != nil {
		t.Errorf("no limits known: %v", err)
	}
}

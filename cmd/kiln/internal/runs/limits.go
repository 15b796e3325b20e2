package runs

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/units"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// Limits bound what a run may allocate, so that sizes that cannot be allocated
// are refused with a message instead of crashing the Go runtime.
type Limits struct {
	// MemAvailable is the memory this machine can give, in bytes; 0 is unknown
	// (no memory check).
	MemAvailable uint64
	// MaxBinding is the chosen backend's storage binding limit in bytes (the
	// smallest of the backends involved); 0 is unknown.
	MaxBinding uint64
	// Backend names whose limit MaxBinding is, for messages.
	Backend string
}

// copies is how many copies of a run's buffers exist at once: the CLI's, the
// wire's and the plugin's (verification adds the reference's).
const copies = 4

// Check refuses one buffer of n bytes (what names it for the message) that
// does not fit the backend's binding limit or the memory available.
func (l Limits) Check(what string, n uint64) error {
	if l.MaxBinding > 0 && n > l.MaxBinding {
		return fmt.Errorf("%s: a buffer of %s, over %s's storage binding limit of %s. Fix: use a smaller size", what, units.Bytes(n), l.Backend, units.Bytes(l.MaxBinding))
	}
	return l.checkMemory(what, n)
}

func (l Limits) checkMemory(what string, n uint64) error {
	if l.MemAvailable == 0 {
		return nil
	}
	if need := saturatingMul(n, copies); need > l.MemAvailable {
		return fmt.Errorf("%s: needs about %s of memory (%s of buffers, held %d times over by kiln, the wire and the plugin), but only %s is available. Fix: use a smaller size", what, units.Bytes(need), units.Bytes(n), copies, units.Bytes(l.MemAvailable))
	}
	return nil
}

// CheckKernel refuses a corpus kernel size whose buffers would not fit, before
// any is allocated. The buffer bytes come from the kernel's own cases at two
// small sizes, extrapolated by the size's power (linear, quadratic, …).
func (l Limits) CheckKernel(k kernels.Kernel, size int) error {
	what := fmt.Sprintf("--size %d for kernel %s", size, k.Name)
	if size < 0 {
		return fmt.Errorf("%s: the size is negative. Fix: pass --size 4096", what)
	}
	if uint64(size) > math.MaxUint32 {
		return fmt.Errorf("%s: over %d, the most elements a u32 length counts. Fix: use a smaller size", what, uint64(math.MaxUint32))
	}
	total, largest := KernelBytes(k, size)
	if l.MaxBinding > 0 && largest > l.MaxBinding {
		return fmt.Errorf("%s: its largest buffer is about %s, over %s's storage binding limit of %s. Fix: use a smaller size", what, units.Bytes(largest), l.Backend, units.Bytes(l.MaxBinding))
	}
	return l.checkMemory(what, total)
}

// sampleSizes are the sizes KernelBytes measures a kernel at.
var sampleSizes = [2]int{64, 1024}

// KernelBytes estimates the bytes of every buffer of kernel k's case at size,
// and of its largest buffer. Up to the larger sample size it measures the case
// itself; beyond, it scales each buffer of the larger sample by
// (size/sample)^p, p the power the two samples show for that buffer rounded up
// to a whole number, plus the sample's bytes again, so the estimate never falls
// short of buffers that grow as a polynomial of the size.
func KernelBytes(k kernels.Kernel, size int) (total, largest uint64) {
	if size <= sampleSizes[1] {
		return sum(caseBytes(k, size))
	}
	b0, b1 := caseBytes(k, sampleSizes[0]), caseBytes(k, sampleSizes[1])
	scale := float64(size) / float64(sampleSizes[1])
	grown := make([]uint64, len(b1))
	for i := range b1 {
		p := 0.0
		if b0[i] > 0 {
			p = max(0, math.Ceil(math.Log(float64(b1[i])/float64(b0[i]))/math.Log(float64(sampleSizes[1])/float64(sampleSizes[0]))-0.1))
		} else if b1[i] > 0 {
			p = 1
		}
		v := float64(b1[i])*math.Pow(scale, p) + float64(b1[i]) // the sample again covers rounding up
		grown[i] = math.MaxUint64 / 4
		if v < math.MaxUint64/4 {
			grown[i] = uint64(v)
		}
	}
	return sum(grown)
}

// sum returns the total and the largest of byte counts.
func sum(bytes []uint64) (total, largest uint64) {
	for _, n := range bytes {
		total += n
		largest = max(largest, n)
	}
	return total, largest
}

// caseBytes is the exact bytes of each buffer of k's case at size, by binding.
func caseBytes(k kernels.Kernel, size int) []uint64 {
	c := KernelJob(k, size, 1, "").Launch.Work
	p := k.Program()
	out := make([]uint64, len(p.Buffers))
	for _, d := range p.Buffers {
		n := uint64(len(c.Inputs[d.Binding]))
		if !d.Access.Readable() {
			n = uint64(d.Count) * uint64(d.Type.Size())
			if d.Count == 0 && int(d.Binding) < len(c.OutputCounts) {
				n = uint64(c.OutputCounts[d.Binding]) * uint64(d.Type.Size())
			}
		}
		out[d.Binding] = n
	}
	return out
}

func saturatingMul(a, b uint64) uint64 {
	if a != 0 && a > math.MaxUint64/b {
		return math.MaxUint64
	}
	return a * b
}

// AvailableMemory returns the kernel's estimate of the memory available to new
// work (MemAvailable in /proc/meminfo), or 0 where it cannot be read.
func AvailableMemory() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

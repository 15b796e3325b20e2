package units

import (
	"fmt"
	"strconv"
)

// Bytes writes a byte count with binary units: "512 B", "1.5 KiB", "256 MiB",
// "1.2 GiB". Whole multiples of a unit are written without a fraction; others
// with one decimal. A negative count is written as bytes.
func Bytes[N ~int | ~int64 | ~uint64 | ~uint32](n N) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(int64(n), 10) + " B"
	}
	v, suffix := float64(n), ""
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), suffix)
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}

package backend

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// machineMemory is the machine's memory and how much of it is available, in
// bytes, from /proc/meminfo; 0 where it cannot tell.
func machineMemory() (total, available uint64) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	return parseMeminfo(io.LimitReader(f, 1<<16))
}

// parseMeminfo reads the MemTotal and MemAvailable lines of /proc/meminfo
// ("MemTotal:       16318412 kB"), in bytes; a line that is missing or
// malformed gives 0.
func parseMeminfo(r io.Reader) (total, available uint64) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || key != "MemTotal" && key != "MemAvailable" {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil || kb > 1<<53 {
			continue
		}
		if key == "MemTotal" {
			total = kb << 10
		} else {
			available = kb << 10
		}
	}
	return total, available
}

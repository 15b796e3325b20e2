package pluginapi

import "strconv"

// BandwidthStatus says what DeviceProfile.MemBWGBps is. The zero value,
// BandwidthUnstated, is what a plugin built before kiln asked reports.
type BandwidthStatus int

// The bandwidth statuses.
const (
	// BandwidthUnstated: the backend does not say; a nonzero figure may be an
	// estimate or a measurement.
	BandwidthUnstated BandwidthStatus = iota
	// BandwidthMeasuring: a measurement is under way; the figure is an estimate
	// until it ends, or 0 when there is none. A later Describe reports the result.
	BandwidthMeasuring
	// BandwidthMeasured: a kiln kernel measured the figure on this device.
	BandwidthMeasured
	// BandwidthEstimated: the figure is an estimate from the device's attributes
	// (its peak) and no measurement is under way (none started yet, or it failed).
	BandwidthEstimated
	// BandwidthUnmeasured: the backend does not measure this device (a CPU
	// reference, a device it cannot time) or the measurement failed without an
	// estimate; the figure is 0.
	BandwidthUnmeasured
)

var bandwidthStatusNames = [...]string{
	BandwidthUnstated:   "unstated",
	BandwidthMeasuring:  "measuring",
	BandwidthMeasured:   "measured",
	BandwidthEstimated:  "estimated",
	BandwidthUnmeasured: "unmeasured",
}

// String returns the status's name ("measured"), or "BandwidthStatus(N)" for a
// value outside the defined ones.
func (s BandwidthStatus) String() string {
	if s >= 0 && int(s) < len(bandwidthStatusNames) {
		return bandwidthStatusNames[s]
	}
	return "BandwidthStatus(" + strconv.Itoa(int(s)) + ")"
}

//go:build !race

package ptx

// raceEnabled reports that the tests run under the race detector.
const raceEnabled = false

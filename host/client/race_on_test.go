//go:build race

package client

// raceEnabled reports whether the race detector is on; memory-heavy tests shrink.
const raceEnabled = true

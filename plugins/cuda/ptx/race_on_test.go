//go:build race

package ptx

// raceEnabled reports that the tests run under the race detector, which makes the
// interpreter about ten times slower: the corpus runs at its smaller sizes then.
const raceEnabled = true

//go:build race

package kernels_test

// raceEnabled reports that the tests run under the race detector, which makes
// the interpreter about ten times slower: TestTunablesKeepResults runs fewer
// of matmul_reg's combinations then.
const raceEnabled = true

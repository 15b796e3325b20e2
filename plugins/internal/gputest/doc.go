// Package gputest holds what the GPU backends' tests and benchmarks share: opening
// a device or skipping without one ([Device]), running a program once ([Run]),
// the small test programs ([AddOne], [Spin]), the checks every dispatching
// backend must pass whatever its API ([GridWithAZeroAxisRunsNothing],
// [ReleaseAndClose], [ConcurrentDispatches], ...), and the benchmark bodies
// whose names and metrics the GPU scripts read ([VectorAdd], [Matmul],
// [Submits], ...). Everything takes a [pluginapi.Backend]; a backend's own test
// files keep what looks at its internals.
//
// Only the backends' tests import it (plugins/cuda/backend,
// plugins/vulkan/backend); it imports pluginapi and ir, never a plugin.
package gputest

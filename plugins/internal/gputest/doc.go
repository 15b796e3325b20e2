// Package gputest holds what the GPU backends' tests and benchmarks share, so
// that each is written once: opening a device or skipping without one
// ([Device]), running a program once ([Run]), the small test programs ([AddOne],
// [Spin], [SpinUniform]), the checks every dispatching backend must pass
// whatever its API ([GridWithAZeroAxisRunsNothing], [ReleaseAndClose],
// [ConcurrentDispatches], [LongLoops], [AbandonedDispatch], [DispatchRejects],
// [CorpusMatchesReference], [CheckProgramLimits], [FuzzBindings]), and the
// benchmark bodies and timing loops whose names and metrics the GPU scripts
// read ([VectorAdd], [Matmul], [Dispatches], [Submits]). Everything takes a
// [pluginapi.Backend] (or a [Resident] one) plus small hooks for what differs; a
// backend's own test files keep what looks at its internals.
//
// Only the backends' tests import it; it imports pluginapi, its conformance kit
// and ir, never a plugin.
package gputest

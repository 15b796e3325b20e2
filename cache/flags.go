package cache

import (
	"fmt"
	"strings"
)

// FeatureFlags are the capability bits a pipeline was compiled to assume. They
// are part of the [Key], so a pipeline compiled with subgroup operations is
// never reused where they are absent even when everything else matches. Bits
// 1<<0 .. 1<<8 are assigned below and never renumbered; higher bits are
// reserved for additions.
type FeatureFlags uint32

// The assigned feature bits.
const (
	// FeatureSubgroupOps: the lowering emits subgroup (wave) operations.
	FeatureSubgroupOps FeatureFlags = 1 << iota
	// FeatureF16: native f16 arithmetic.
	FeatureF16
	// FeatureBF16: native bf16 arithmetic.
	FeatureBF16
	// FeatureTensorCores: tensor-core / matrix-engine instructions.
	FeatureTensorCores
	// FeatureAsyncCompute: an async-compute queue at dispatch time.
	FeatureAsyncCompute
	// FeaturePushConstants: push constants at dispatch time.
	FeaturePushConstants
	// FeatureIndirectDispatch: indirect dispatch commands.
	FeatureIndirectDispatch
	// FeatureSpeculative: speculative (fused prefilter and confirmer) dispatch.
	FeatureSpeculative
	// FeaturePersistentThread: persistent-thread (device-side work queue) dispatch.
	FeaturePersistentThread
)

var featureNames = []string{
	"subgroup_ops", "f16", "bf16", "tensor_cores", "async_compute",
	"push_constants", "indirect_dispatch", "speculative", "persistent_thread",
}

// Contains reports whether f has every bit of other.
func (f FeatureFlags) Contains(other FeatureFlags) bool { return f&other == other }

// Union returns the bits of f and of other.
func (f FeatureFlags) Union(other FeatureFlags) FeatureFlags { return f | other }

// Bits returns the raw bit pattern.
func (f FeatureFlags) Bits() uint32 { return uint32(f) }

// String names the set bits, "subgroup_ops|f16"; unassigned bits print as hex and
// the empty set as "none".
func (f FeatureFlags) String() string {
	if f == 0 {
		return "none"
	}
	var parts []string
	for i, name := range featureNames {
		if f&(1<<i) != 0 {
			parts = append(parts, name)
		}
	}
	if rest := f &^ (1<<len(featureNames) - 1); rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(rest)))
	}
	return strings.Join(parts, "|")
}

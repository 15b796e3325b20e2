// Package autotune keeps the tuner's decisions (workgroup size, unroll depth,
// tile shape) per (program variant, adapter) across runs, in one TOML file
// written only by the host, by default $XDG_CONFIG_HOME/kiln/autotune.toml:
//
//	schema = 1
//
//	[[record]]
//	key = "81000100010000000240632400000000"  # Key: a SpecCacheKey folded to 32 hex digits
//	adapter = "vulkan:0"
//	workgroup_size = [128, 1, 1]
//	unroll = 4
//	tile = [16, 16, 1]
//	recorded_at = "2026-05-02"
//
// A missing file is an empty store. A malformed file is an error ending in a Fix,
// and is never overwritten; a file of a newer schema is refused. SaveIfDirty
// takes the file's lock, re-reads it, applies this Store's puts and forgets on top
// and replaces the file atomically, so processes saving at the same time never
// lose each other's records and a killed process never leaves a torn file.
//
// The host, at compile:
//
//	st, err := autotune.Load(path)
//	if rec, ok := st.Get(autotune.KeyFor(prog, spec, "vulkan:0")); ok { wg = rec.WorkgroupSize }
//
// and, after tuning, st.Put(key, rec) then st.SaveIfDirty(ctx).
package autotune

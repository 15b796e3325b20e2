// Package autotune keeps the tuner's decisions (workgroup size, unroll depth,
// tile shape) per (program variant, adapter) across runs, in one TOML file
// written only by the host, by default $XDG_CONFIG_HOME/kiln/autotune.toml:
//
//	schema = 1
//
//	[[record]]
//	key = "81000100010000000240632400000000"  # Key: a SpecCacheKey folded to 32 hex digits
//	adapter = "vulkan/5f0c4d6e2a1b3c4d5e6f708192a3b4c5"  # DeviceAdapter: backend id / device fingerprint
//	workgroup_size = [128, 1, 1]
//	unroll = 4
//	tile = [16, 16, 1]
//	recorded_at = "2026-05-02"
//
// The host keys records by DeviceAdapter — the backend's id and the adapter's
// device fingerprint — so a record follows the device, not its index.
//
// A missing file is an empty store. A malformed file is an error ending in a Fix,
// and is never overwritten; a file of a newer schema is refused. SaveIfDirty
// takes the file's lock, re-reads it, applies this Store's puts and forgets on top
// and replaces the file atomically, so processes saving at the same time never
// lose each other's records and a killed process never leaves a torn file; Get
// and Put never wait for that lock. A store file that is a symbolic link stays
// one, and keeps its mode. See docs/design.md, "Autotune records".
//
// The host, at compile:
//
//	st, err := autotune.Load(path)
//	key := autotune.KeyFor(prog, spec, autotune.DeviceAdapter("vulkan", fingerprint))
//	if rec, ok := st.Get(key); ok { wg = rec.WorkgroupSize }
//
// and, after tuning, st.Put(key, rec) then st.SaveIfDirty(ctx).
package autotune

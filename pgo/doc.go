// Package pgo is profile-guided routing: for each op (a program's stable name)
// it records which backend ran it fastest, measured by [Table.Certify], in a
// TOML table the host alone writes, by default $XDG_CONFIG_HOME/kiln/pgo.toml:
//
//	schema = 1
//
//	[routes.'kiln.vector.add.f32']
//	backend = 'vulkan:0'
//	adapter_fingerprint = '5f0c…'
//	plugin_version = '0.1.0'
//	measured_at = 2026-05-02T10:00:00Z
//
//	[[routes.'kiln.vector.add.f32'.observations]]
//	backend = 'vulkan:0'
//	median_ns = 41000
//
// A route remembers the adapter fingerprint and plugin version it was measured
// on; once either no longer matches the live backend of that id the route is
// stale: [Table.Fresh] refuses it (routing falls back to the preferred backend)
// and [Table.Stale] lists it (for kiln doctor).
//
// Certify takes the backends through the small [Candidate] interface, so this
// package never imports the host; the host wraps its backend handle in a thin
// adapter. A missing table is empty; a malformed one is an error ending in
// "Fix: regenerate it with 'kiln certify'" and is never merged into; one of a
// newer schema is refused and never written. [Table.Save] takes the table's
// lock, re-reads it and applies this [Table]'s changes on top before an atomic
// replace; [Table.SaveRegenerating] does the same but replaces a table that is
// malformed when the lock is held, which is how `kiln certify` regenerates one
// without ever dropping routes another process saved meanwhile. See
// docs/design.md, "PGO routes".
package pgo

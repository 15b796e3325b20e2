// Package cache is kiln's disk cache of compiled pipelines, written only by the
// host. A backend returns an opaque blob from Compile; the host stores it under a
// Key (program digest, binding layout, push-constant size, workgroup size, feature
// flags, specialization hash, backend id, device fingerprint, and the key format's
// version) and hands it back with the next compile of the same key.
//
// The cache lives in DefaultRoot ($XDG_CACHE_HOME/kiln/pipelines), one file per
// entry under a two-hex-digit shard directory (PathFor). Every entry starts with a
// header holding a magic number, the format version, the key's own encoding, the
// payload length and an xxhash64 checksum, so a truncated, bit-flipped or foreign
// file is a miss: Read removes it and counts it in Stats.Corrupt, never fails on
// it. Writes install the file by atomic rename; Flush makes them durable. The
// total size is capped (DefaultMaxBytes, or KILN_CACHE_MAX_BYTES) and trimmed
// least recently used first, with last use kept in each entry's mtime, refreshed
// at most hourly as Go's build cache does.
//
// Integration, as the host does it:
//
//	c, err := cache.Open(root)                      // at host start
//	digest, err := cache.ProgramDigest(prog)
//	key := cache.Key{ProgramDigest: digest, BindingSignature: ir.BindingSignature(prog),
//		PushConstantSize: 4 * uint32(len(prog.Buffers)), WorkgroupSize: wg,
//		Features: cache.FeaturePushConstants, SpecHash: spec.CacheHash(), BackendID: id,
//		DeviceFingerprint: adapter.Identity.Fingerprint()}
//	blob, hit, err := c.Read(key)                   // send blob with the compile request
//	err = c.Write(key, res.Blob)                    // store what the plugin returned
//	err = c.Flush(ctx)                              // at host close: durable, then trim
//
// Stats, Verify, Trim and Clear back `kiln cache stats|verify|trim|clear`;
// CheckHeaders is the read-only health check `kiln doctor` runs.
package cache

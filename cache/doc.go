// Package cache is kiln's disk cache of compiled pipelines, written only by the
// host. A backend returns an opaque blob from Compile; the host stores it under
// a [Key] (program digest, binding layout, push-constant size, workgroup size,
// feature flags, specialization hash, backend id, plugin version, device
// fingerprint, and the key format's version) and hands it back with the next
// compile of the same key — never to another build of the plugin.
//
// The cache lives in [DefaultRoot] ($XDG_CACHE_HOME/kiln/pipelines), one file
// per entry under a two-hex-digit shard directory ([DiskCache.PathFor]). Every
// entry starts with a header holding a magic number, the format version, the
// key's own encoding, the payload length and an xxhash64 checksum, so a
// truncated, bit-flipped or foreign file is a miss: [DiskCache.Get] returns the
// [MissReason], removes the file and counts it, never fails on it. Writes
// install the file by atomic rename; [DiskCache.Flush] makes them durable. The
// total size is capped ([DefaultMaxBytes], or KILN_CACHE_MAX_BYTES) and trimmed
// least recently used first, with last use kept in each entry's mtime,
// refreshed at most hourly as Go's build cache does. A process that has written
// a quarter of the cap since the last trim flushes and trims in the background;
// the trim record is taken under a lock before trimming, so one of many
// processes trims; and [DiskCache.Trim], [DiskCache.Verify] and
// [DiskCache.InvalidateImpacted] remove only the very file they listed, never
// an entry a writer installed since.
//
// Integration, as the host does it:
//
//	c, err := cache.Open(root)                      // at host start
//	digest, err := cache.ProgramDigest(prog)
//	key := cache.Key{ProgramDigest: digest, BindingSignature: ir.BindingSignature(prog),
//		PushConstantSize: 4 * uint32(len(prog.Buffers)), WorkgroupSize: wg,
//		Features: cache.FeaturePushConstants, SpecHash: spec.CacheHash(), BackendID: id,
//		PluginVersion: version, DeviceFingerprint: adapter.Identity.Fingerprint()}
//	l, err := c.Get(key)                            // send l.Payload with the compile request
//	err = c.Write(key, res.Blob)                    // store what the plugin returned
//	err = c.Flush(ctx)                              // at host close: durable, trim, usage
//
// [DiskCache.Stats], [DiskCache.Usage], Verify, Trim and [DiskCache.Clear] back
// `kiln cache stats|verify|trim|clear`; [DiskCache.CheckHeaders] is the
// read-only health check `kiln doctor` runs. [EncodeEntry], [DecodeEntry] and
// [ParseEntry] give the fleet tier (package remote) the same entry format and
// checks. See docs/design.md, "Pipeline cache".
package cache

// Package remote is kiln's fleet tier: a shared remote behind the host's local
// stores, on an existing object store reached through gocloud.dev/blob — S3
// (and S3-compatible servers), Google Cloud Storage, Azure Blob Storage, or a
// shared directory (file://) — so a team's machines pay a cold compile, a
// tuning run or a certification once for the fleet, not once per machine.
//
// [Open] takes the URL (host.Options.Remote, or $KILN_REMOTE):
//
//	s3://bucket/prefix?region=eu-west-1
//	gs://bucket/prefix
//	azblob://container/prefix
//	file:///shared/kiln
//
// plus kiln_timeout (the deadline of every remote call, 3s by default) and
// kiln_flush_timeout (how long a closing host waits for queued uploads, 10s).
//
// Drivers: file:// is built in. The object stores' drivers are opt-in
// imports, as database/sql drivers are, so a program links only the cloud SDK
// it uses:
//
//	import _ "github.com/kiln-dev/kiln/remote/s3"    // s3://
//	import _ "github.com/kiln-dev/kiln/remote/gcs"   // gs://
//	import _ "github.com/kiln-dev/kiln/remote/azure" // azblob://
//
// (or gocloud.dev's own gocloud.dev/blob/s3blob, gcsblob, azureblob, which
// register the same schemes). [Open] of a URL whose driver is not linked is an
// error that names the scheme and ends with the import that fixes it; the host
// logs it and runs from its local stores. The kiln CLI imports every driver.
// An application that already holds a *blob.Bucket passes it to [New] (or
// host.Options.RemoteBucket) instead of a URL.
//
// Pipelines: [Cache] puts a [Store] behind a local [cache.DiskCache]. A local
// miss reads the object named by the key (kiln/v1/pipelines/<key hex>), which
// must be a whole, checksummed entry whose key echo is exactly the key —
// anything else is a miss with its reason — and keeps it locally; a compile's
// new entry is queued for upload (write-behind, bounded in bytes and in time at
// flush), never uploaded on the compile's path. Tuning records and PGO routes
// are published as one small object per publication, never overwritten, the
// newest measurement winning ([Store.PublishTuning], [Store.PublishRoute],
// [Store.Tuning], [Store.Route]); a host reads them through, and [Store.Push]
// and [Store.Pull] seed a fleet from one machine.
//
// Every call has a deadline; a failed call is logged, counted ([Store.Usage])
// and marks the remote down for a backoff during which calls are skipped at no
// cost. A remote outage never fails a dispatch. See docs/design.md, "Fleet tier
// (remote)".
package remote

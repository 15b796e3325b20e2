// Package gcs links the fleet tier's driver for gs:// URLs (Google Cloud
// Storage, through gocloud.dev/blob/gcsblob). Import it for its side effect,
// as a database/sql driver:
//
//	import _ "github.com/kiln-dev/kiln/remote/gcs"
//
// Then host.Options.Remote (or $KILN_REMOTE) may be gs://bucket/prefix.
// Credentials come from Google's Application Default Credentials. Importing
// gocloud.dev/blob/gcsblob instead does the same. The package links the Google
// Cloud SDK; an application without gs:// URLs leaves it out.
package gcs

import _ "gocloud.dev/blob/gcsblob" // registers gs:// with gocloud.dev/blob

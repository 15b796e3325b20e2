// Package s3 links the fleet tier's driver for s3:// URLs (Amazon S3 and
// S3-compatible servers, through gocloud.dev/blob/s3blob). Import it for its
// side effect, as a database/sql driver:
//
//	import _ "github.com/kiln-dev/kiln/remote/s3"
//
// Then host.Options.Remote (or $KILN_REMOTE) may be
// s3://bucket/prefix?region=eu-west-1, with the driver's parameters
// (endpoint=, use_path_style=true, …). Credentials come from the AWS SDK's
// usual chain. Importing gocloud.dev/blob/s3blob instead does the same. The
// package links the AWS SDK; an application without s3:// URLs leaves it out.
package s3

import _ "gocloud.dev/blob/s3blob" // registers s3:// with gocloud.dev/blob

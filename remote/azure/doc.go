// Package azure links the fleet tier's driver for azblob:// URLs (Azure Blob
// Storage, through gocloud.dev/blob/azureblob). Import it for its side effect,
// as a database/sql driver:
//
//	import _ "github.com/kiln-dev/kiln/remote/azure"
//
// Then host.Options.Remote (or $KILN_REMOTE) may be
// azblob://container/prefix. The account and credentials come from the
// driver's environment variables (AZURE_STORAGE_ACCOUNT, …). Importing
// gocloud.dev/blob/azureblob instead does the same. The package links the Azure
// SDK; an application without azblob:// URLs leaves it out.
package azure

import _ "gocloud.dev/blob/azureblob" // registers azblob:// with gocloud.dev/blob

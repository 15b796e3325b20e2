package main

// The kiln CLI reaches every object store a fleet tier URL ($KILN_REMOTE,
// --remote) may name; an embedding application imports only the ones it uses.
import (
	_ "github.com/kiln-dev/kiln/remote/azure"
	_ "github.com/kiln-dev/kiln/remote/gcs"
	_ "github.com/kiln-dev/kiln/remote/s3"
)

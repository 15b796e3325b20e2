// Package remotetest starts fleet tiers for tests: an S3 server (gofakes3,
// in-process on loopback), a shared directory, and endpoints that hang or
// refuse connections. Only tests import it.
package remotetest

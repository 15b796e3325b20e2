// Package echoplugin is the yardstick for a kiln plugin's start: a bare
// go-plugin gRPC plugin (no kiln handshake, no TLS, no services but
// go-plugin's own) that a benchmark starts next to a kiln plugin. Any binary
// can play it: one that calls ServeIfAsked first thing in main (or TestMain)
// serves it when started by Start, and runs normally otherwise, so the kiln
// binary carries it and `kiln bench` needs no go tool.
package echoplugin

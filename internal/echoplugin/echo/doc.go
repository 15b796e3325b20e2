// Command echo is internal/echoplugin's bare go-plugin plugin as a binary of
// its own, the smallest a go-plugin gRPC plugin gets: BenchmarkStart (package
// host) builds it as the yardstick for a kiln plugin's start.
package main

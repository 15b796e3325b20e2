// Package trace writes and reads Chrome trace-event JSON (the format
// ui.perfetto.dev and chrome://tracing open): complete events ("X") on
// tracks of processes and threads, flow events ("s", "t", "f") that tie
// slices of different processes together, and the metadata that names
// them. The host writes its trace through a Writer (host.Options.Trace);
// `kiln trace summary` and `kiln trace svg` read one back with Parse, which
// also checks it against the format (docs/design.md, "Tracing").
//
// Every time here is nanoseconds of the machine's monotonic clock
// (CLOCK_MONOTONIC on Linux), which the host and its plugins share; a Clock
// maps Go's time.Time onto it.
package trace

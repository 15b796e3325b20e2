// Package hostotel turns a kiln host's dispatches, submits and compiles into
// OpenTelemetry spans. It lives apart from package host so that an embedding
// application links OpenTelemetry only when it asks for spans:
//
//	h, _ := host.Open(ctx, host.Options{Hook: hostotel.New(tp)})
//
// Each span starts when the host began the operation and ends when it
// returned, under the caller's context (so it nests under the caller's own
// span), and carries the backend, the adapter, the program, the pipeline
// cache's outcome and the plugin's and the device's time as attributes; a
// failed operation records its error. A host without a Hook costs nothing
// (docs/design.md, "Tracing").
package hostotel

package wire

// What both sides of the gRPC connection set alike: its windows and buffers,
// and the status details that mark a kiln error kind.

// WindowBytes is the HTTP/2 flow-control window of a stream and of the
// connection on both sides. gRPC starts at 64 KiB and grows it slowly, which
// halves the throughput of large buffers; a fixed 16 MiB window doubled it in
// BenchmarkWireRoundTrip.
const WindowBytes = 16 << 20

// IOBufferBytes is the socket read and write buffer of both sides (gRPC's
// default is 32 KiB). Each connection allocates them at once, so they weigh on
// every plugin start: 1 MiB cost 2–5 ms of a start (host BenchmarkStart, loaded
// 2-core machine) and bought nothing in BenchmarkWireRoundTrip (817–1010 MB/s
// against 934–1027 MB/s at 64 KiB, interleaved).
const IOBufferBytes = 64 << 10

// MaxChunkBytes is the most buffer bytes one gRPC write or read carries;
// larger transfers are split.
const MaxChunkBytes = 64 << 20

// ErrorDomain marks the gRPC status details (an ErrorInfo) that carry a kiln
// error kind, so a transport failure with the same code is never mistaken for
// one.
const ErrorDomain = "kiln.dev/pluginapi"

// The ErrorInfo reasons of the error kinds.
const (
	ReasonRejected    = "REJECTED"
	ReasonUnavailable = "UNAVAILABLE"
	ReasonDevice      = "DEVICE"
)

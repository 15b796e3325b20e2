// Package wire is the data plane's format, shared by the host and the plugin
// SDK: the frames, the two rings that carry them, the shared memfd segments
// that carry buffer bytes, and the socket that carries descriptors and tells
// each side when the other is gone; and what both ends of the connection keep
// alike: the gRPC sizes and error-kind marker, and the [Table] of live buffers
// each side checks ranges against. The planes built on it (which requests
// exist, what a completion means) live with each side: the plugin's in package
// pluginapi, the host's in host/client. Nothing here is for plugin authors;
// package pluginapi is theirs.
//
// # Rings
//
// Requests and completions travel through two single-producer, single-consumer
// byte rings in one more memfd, the ring segment ([RingSegmentName]), which the
// host creates and sends with the hello frame. Its first page holds a header (u64
// magic "kilnring", u32 version 1, u32 request ring size, u32 completion ring
// size) and a control block per ring, at offsets 256 (requests, host to plugin)
// and 512 (completions, plugin to host); the request ring's 2 MiB of data start at
// 4096 and the completion ring's 64 KiB follow. A control block has four words,
// each on a 64-byte line of its own:
//
//	+0    u64  head: bytes published; written by the producer only
//	+64   u64  tail: bytes consumed; written by the consumer only
//	+128  u32  sleeping: 1 while the consumer may sleep; written by the consumer only
//	+192  u32  wake: the futex word, bumped to wake the consumer
//
// Indices count bytes and never wrap; byte i lies at i mod size, so a frame may
// run over the ring's end. The producer copies a whole frame in, then stores
// head; the consumer copies the whole frame out into its own memory, then stores
// tail. A consumer that finds no frame polls head for up to 50 µs when it expects
// one soon (the host after a request, the plugin after an answer), back to back
// at first (the first 20 µs on machines of at least 4 CPUs) and then yielding the
// CPU between looks, then stores sleeping = 1, reads wake, looks at head once
// more and sleeps in FUTEX_WAIT on wake (at most 100 ms, then it checks that the
// peer's end of the socket is still open). A producer stores head, then reads
// sleeping, and only when it is set bumps wake and calls FUTEX_WAKE: while both
// sides are busy a round trip makes no system call. A frame with a descriptor
// keeps its place: the host sends the descriptor on the socket first, with an
// 8-byte note holding the frame's sequence number, then publishes the frame, and
// the plugin takes the note when it reads the frame. The socket stays open as
// the liveness channel: either side closing it ends the plane at once.
//
// Neither side trusts the other's words. A consumer accepts a head only if it
// does not move back and is at most a ring ahead of its own tail, then needs a
// whole header within what was published, a frame size within its direction's
// limit and within what was published, and decodes the frame from its private
// copy; a producer accepts a tail only if it does not move back and does not
// pass its own head. On the host any failed check closes the plane with a
// ProtocolError; on the plugin it ends the plane.
//
// # Frame format
//
// Frames are little-endian records in the data plane's rings (the hello frame
// alone goes on the socket). Reserved bytes and padding are zero; variable parts
// (tokens, uniform bytes, messages) are padded to a multiple of 8 bytes; a request
// frame is at most 1 MiB. Every frame starts with a 16-byte header:
//
//	offset 0  u32  size of the frame, header included
//	offset 4  u8   kind
//	offset 5  u8   flags: bit 0 set when a file descriptor rides with the frame;
//	               bit 1 set on a completion that carries a spans trailer
//	offset 6  u16  zero
//	offset 8  u64  sequence number (the host's; a completion repeats its request's)
//
// Requests, host to plugin (a "staged range" is u32 segment, u32 zero, u64 offset,
// u64 size: bytes of a segment the host attached):
//
//	1 hello     u32 n, u32 0, n token bytes (n <= 64); the ring segment's
//	            memfd rides along
//	2 attach    u32 segment, u32 0, u64 size; a memfd rides along
//	3 detach    u32 segment, u32 0
//	4 alloc     u32 adapter, u32 usage, u64 size, u32 segment, u32 0;
//	            a memfd rides along when segment is not 0
//	5 free      u64 buffer
//	6 write     u64 buffer, u64 offset, staged range (the bytes to write)
//	7 read      u64 buffer, u64 offset, staged range (where the bytes go)
//	8 submit    u32 adapter, u32 n, n commands
//	9 dispatch  u64 pipeline, u32 grid x, y, z, u32 n, n bindings (u32 has-input,
//	            u32 output count, staged range of the input), u32 m, u32 uniform
//	            length, m staged ranges for the outputs, the uniform bytes
//	11 copy     source, then destination, each u64 buffer, u64 offset, u64 size
//	            (PeerCopier.PeerCopy; sent only to a plugin that reported it)
//
// A submit command is u8 opcode, three zero bytes, u32 length of the record (these
// 8 bytes included), then: opcode 1 dispatch — u64 pipeline, u32 grid x, y, z,
// u32 n bindings, u32 uniform length, u32 0, n × (u64 buffer, u64 offset, u64
// size), the uniform bytes; opcode 2 copy — source and destination, each u64
// buffer, u64 offset, u64 size; opcode 3 fill — destination range, u32 value, u32 0.
//
// Every request gets one completion, kind 10: u32 status (0 ok, 1 rejected, 2
// unavailable, 3 device error, 4 cancelled, 5 deadline exceeded, 6 other error, 7
// unimplemented, 8 bad result), u32 message length (at most 16 KiB), then for a
// status of 0 the result of the request's kind — alloc: u64 buffer, u32 mapped (0
// or 1), u32 0; submit: i64 host nanoseconds, i64 device nanoseconds; dispatch: the
// two times, u32 m (the request's output count), u32 0, m × u64 output size — and
// the message; with flag bit 1 (a submit's or dispatch's completion, from a plugin
// started with pluginapi.SpansEnv) a spans trailer follows: u32 n (1 to 8), u32 0, n × (u32
// kind, u32 0, i64 start, i64 end) on CLOCK_MONOTONIC. A request whose caller gave
// up is cancelled with the Device service's Cancel call.
package wire

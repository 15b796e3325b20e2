// Command multigpu dispatches on every GPU of a machine at once, as a server
// application would: one goroutine per adapter, each with its own resident
// buffers (host.Backend.Alloc) and a batch of back-to-back vector adds
// (host.Batch, host.Backend.Submit). It prints each adapter's bandwidth alone,
// then all of them together as a share of the sum alone (medians of -rounds
// rounds, after -warmup with every adapter busy), and verifies every
// adapter's output. -adapters N uses only the first N adapters of each
// backend (2 of a 4-GPU machine, say).
//
// With -kill ID it also shows fault isolation: every adapter of every backend
// in -backend runs vector adds in a loop while the plugin of backend ID is
// SIGKILLed; that backend's adapters report their lost buffers and every other
// adapter finishes its work, verified.
//
// With -copy SRC,DST it instead copies -mib MiB from one backend's buffer into
// another's (host.CopyBuffer: peer access between two CUDA GPUs, through the
// host between plugins), each way, and prints the bandwidth.
//
//	go run ./examples/multigpu -plugins bin/plugins -backend cuda -mib 1024
//	go run ./examples/multigpu -plugins bin/plugins -backend cuda,vulkan -kill cuda
//	go run ./examples/multigpu -plugins bin/plugins -copy cuda:0,cuda:1 -mib 1024 -reps 20
//
// See docs/design.md, "Several GPUs".
package main

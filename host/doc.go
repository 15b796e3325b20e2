// Package host is kiln's embedding API, in the spirit of database/sql: an
// application calls [Open], which discovers backend plugins (executables named
// kiln-backend-* in a plugins directory that only the user and root can
// change); each starts lazily, on first need, in its own process over
// hashicorp/go-plugin. [Host.Acquire] picks a backend by id ("cpu-ref",
// "vulkan:1"), waiting only for that plugin, [Host.AcquirePreferred] by the order
// of docs/design.md, "Backend selection" (never a reference oracle implicitly),
// and [Host.Dispatch] compiles and runs an ir.Program on it in one call. For
// repeated work, [Backend.Compile] once and [Backend.Dispatch] many times.
//
// Typed data: a launch takes its inputs by binding as little-endian bytes
// (Work.Inputs) or by the program's buffer names as typed slices (Work.Named,
// made with [Input]: host.Input("x", xs) for xs []float32), and [OutputAs]
// and [Result.Output] return an output by name. A named input is checked
// against its buffer before anything is sent: an unknown name, a buffer given
// twice or both by name and by binding, a write-only buffer, or elements of
// the wrong size or type is a [LaunchError] with a Fix. [Bytes] and [Values]
// convert between typed slices of an [Element] type (float32, int32, uint32,
// and uint16 for the raw bits of f16 or bf16) and buffer bytes, little-endian
// whatever the host's byte order and bit for bit; [Upload], [Download] and
// [ReadInto] move typed slices to and from a [Buffer].
//
// Buffers and batches: [Backend.Alloc] returns a [Buffer] that lives in the plugin
// (device memory on a GPU) when the plugin keeps buffers (protocol 2 with
// pluginapi.Buffers and pluginapi.Submitter), and in the host otherwise. A [Batch]
// records dispatches bound to buffer ranges ([BoundWork], [Bind]), copies and
// fills; [Backend.Submit] sends it as one message with one completion, and
// [Backend.SubmitAsync] returns a [Pending] to wait on later. Re-dispatching over
// resident buffers moves no bytes across the process boundary ([Backend.Traffic]
// counts the ones that do). [Buffer.Map] gives a host-visible buffer's memory for
// filling in place; that slice is plain memory: after the plugin dies it shows
// the last contents until the host notices, then zeros, and writes through it
// are lost, so bytes read through it count only once a later call on the buffer
// (Read, Submit, Pending.Wait) succeeded. Read and Write of a mapped buffer
// check that the plugin lives first. See docs/design.md, "Protocol v2: buffers,
// submits, shared memory, fast path".
//
// The host supervises its plugins (see docs/design.md, "Supervision and
// reliability"): a plugin that crashes, hangs (stops answering health checks
// for Options.HangTimeout) or returns malformed or oversize results yields a
// typed error naming the backend ([CrashedError], [TimeoutError],
// [BadResultError]; [RejectedError], [DeviceError], [UnavailableError] and
// [PluginError] come from the plugin), the host stays up, and the plugin is
// relaunched on its next use with an exponential backoff. A caller's deadline
// cancels only its own call and is a [TimeoutError], never a loss of buffers;
// every call returns by its deadline whatever the plugin does (one that stops
// reading its requests for Options.HangTimeout is hung). A plugin that died while idle is relaunched
// transparently. A plugin that crashes too often is failing and not chosen
// implicitly until it succeeds again. Pipelines are recompiled on the new
// process; buffers cannot be, and their next use is a [LostBufferError].
// Problems found before anything is sent are a [LaunchError] or [BufferError].
// [StartError] says why a plugin did not start; when the pin file pins the
// plugins directory (see [PinPlugins]) only its pinned plugins run. [Host.Stats] reports what the host
// measured per backend (package host/hostprom exports it to Prometheus).
// [Host.Close] stops every plugin. Logs go to Options.Logger (an hclog.Logger)
// or Options.Slog (an *slog.Logger).
//
// The host alone keeps the persistent stores (Options.Cache, Autotune, PGO;
// by default at their XDG paths). Every compile goes through the pipeline
// cache: the host computes the cache.Key, sends the cached blob with the
// request and stores the blob the plugin returns (bounded; plugins never write
// files), and Close flushes the cache. A compile without a workgroup-size
// override takes the size of an autotune record for (program, backend), for
// launches by Invocations only: a launch by Grid keeps the program's size.
// Dispatch without a named backend follows the program's fresh PGO route when
// its backend is healthy, else the preferred backend; Result.Selection, Cache,
// WorkgroupSize and Tuned say what happened.
//
// The package's examples are complete programs: open, acquire, compile,
// dispatch, typed inputs and outputs by name, buffers and batches, and
// errors.As on each typed error.
package host

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
// Buffers and batches: [Backend.Alloc] returns a [Buffer] that lives in the plugin
// (device memory on a GPU) when the plugin keeps buffers (protocol 2 with
// pluginapi.Buffers and pluginapi.Submitter), and in the host otherwise. A [Batch]
// records dispatches bound to buffer ranges ([BoundWork], [Bind]), copies and
// fills; [Backend.Submit] sends it as one message with one completion, and
// [Backend.SubmitAsync] returns a [Pending] to wait on later. Re-dispatching over
// resident buffers moves no bytes across the process boundary ([Backend.Traffic]
// counts the ones that do). [Buffer.Map] gives a host-visible buffer's memory for
// filling in place. See docs/design.md, "Protocol v2: buffers, submits, shared
// memory, fast path".
//
// The host supervises its plugins (see docs/design.md, "Supervision and
// reliability"): a plugin that crashes, hangs (stops answering health checks
// for Options.HangTimeout) or returns malformed or oversize results yields a
// typed error naming the backend ([CrashedError], [TimeoutError],
// [BadResultError]; [RejectedError], [DeviceError], [UnavailableError] and
// [PluginError] come from the plugin), the host stays up, and the plugin is
// relaunched on its next use with an exponential backoff. A caller's deadline
// cancels only its own call. A plugin that died while idle is relaunched
// transparently. A plugin that crashes too often is failing and not chosen
// implicitly until it succeeds again. Pipelines are recompiled on the new
// process; buffers cannot be, and their next use is a [LostBufferError].
// Problems found before anything is sent are a [LaunchError] or [BufferError].
// [StartError] says why a plugin did not start; with a pin file (see
// [PinPlugins]) only pinned plugins run. [Host.Stats] reports what the host
// measured per backend (package host/hostprom exports it to Prometheus).
// [Host.Close] stops every plugin.
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
// dispatch, buffers and batches, and errors.As on each typed error.
package host

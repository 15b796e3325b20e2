// Package host is kiln's embedding API, in the spirit of database/sql: an
// application calls Open, which discovers backend plugins (executables named
// kiln-backend-* in a plugins directory that only the user and root can
// change); each starts lazily, on first need, in its own process over
// hashicorp/go-plugin. Acquire picks a backend by id ("cpu-ref", "vulkan:1"),
// waiting only for that plugin, AcquirePreferred by the design's scoring order
// (never a reference oracle implicitly), and Dispatch compiles and runs an
// ir.Program on it.
//
// The host supervises its plugins (see docs/design.md, "Supervision and
// reliability"): a plugin that crashes, hangs (stops answering health checks
// for Options.HangTimeout) or returns malformed or oversize results yields a
// typed error naming the backend (CrashedError, TimeoutError, BadResultError;
// RejectedError, DeviceError, UnavailableError and PluginError come from the
// plugin), the host stays up, and the plugin is relaunched on its next use
// with an exponential backoff. A caller's deadline cancels only its own call. A
// plugin that died while idle is relaunched transparently. A plugin that
// crashes too often is failing and not chosen implicitly until it succeeds
// again. StartError says why a plugin did not start; with a pin file (see
// PinPlugins) only pinned plugins run. Stats reports what the host measured
// per backend (package host/hostprom exports it to Prometheus). Close stops
// every plugin.
//
// The host alone keeps the persistent stores (Options.Cache, Autotune, PGO;
// by default at their XDG paths). Every compile goes through the pipeline
// cache: the host computes the cache.Key, sends the cached blob with the
// request and stores the blob the plugin returns (bounded; plugins never write
// files), and Close flushes the cache. A compile without a workgroup-size
// override takes the size of an autotune record for (program, backend).
// Dispatch without a named backend follows the program's fresh PGO route when
// its backend is healthy, else the preferred backend; Result.Selection, Cache,
// WorkgroupSize and Tuned say what happened.
//
//	h, err := host.Open(ctx, host.Options{})
//	if err != nil { ... }
//	defer h.Close()
//	res, err := h.Dispatch(ctx, prog, host.Launch{Backend: "cpu-ref", Work: host.Work{...}})
package host

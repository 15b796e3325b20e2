// Package gpukit holds what the GPU backends (CUDA, Vulkan) do the same way
// whatever their API, written once: the adapter table and its lifecycle
// ([Adapters]: listed once, looked up by index, closed once, with [FirstLost]
// for Health and [DestroyAll] for Close), finding an available adapter by index
// ([AdapterAt]), the start of a compile ([CompileContext]), checking a program
// and its workgroup against a device's limits ([CheckLimits]), sizing a
// protocol-1 dispatch's bindings within the device's largest binding
// ([SizeBindings]), the u32 global_id bound on a batch's grids
// ([CheckGridInvocations]), the outputs of a dispatch that runs nothing
// ([UnchangedOutputs]) and looking up pipeline and buffer handles in their
// [handles.Table] ([DispatchPipeline], [ReleasePipeline], [Buffer],
// [FreeBuffer]). Errors name the backend and read as they did when each
// backend had its own copy.
//
// What does not depend on the device is checked once, by the SDK, before a
// backend sees a request (pluginapi.CheckCompile, pluginapi.CheckLaunch,
// pluginapi.Checked; docs/design.md, "Checks in one place"): the helpers here
// trust it.
//
// Only the backends import it; it imports pluginapi, ir and handles, never a
// plugin.
package gpukit

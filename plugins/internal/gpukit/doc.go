// Package gpukit holds what the GPU backends (CUDA, Vulkan) do the same way
// whatever their API, written once: finding an available adapter by index
// ([AdapterAt]), the start of a compile ([CheckCompile]), checking a program
// and its workgroup against a device's limits ([CheckProgram]), sizing a
// protocol-1 dispatch's bindings ([SizeBindings]), the u32 global_id bound on
// grids ([CheckGridInvocations]), the outputs of a dispatch that runs nothing
// ([UnchangedOutputs]) and looking up pipeline and buffer handles in their
// [handles.Table] ([DispatchPipeline], [ReleasePipeline], [Buffer],
// [FreeBuffer]). Errors name the backend and read as they did when each
// backend had its own copy.
//
// Only the backends import it; it imports pluginapi, ir and handles, never a
// plugin.
package gpukit

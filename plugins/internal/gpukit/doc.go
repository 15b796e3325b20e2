// Package gpukit holds what the GPU backends (CUDA, Vulkan) do the same way
// whatever their API, written once: finding an available adapter by index
// ([AdapterAt]), checking a program and its workgroup against a device's
// limits ([CheckProgram]), sizing a protocol-1 dispatch's bindings
// ([SizeBindings]), the u32 global_id bound on grids ([CheckGridInvocations])
// and the outputs of a dispatch that runs nothing ([UnchangedOutputs]). Errors
// name the backend and read as they did when each backend had its own copy.
//
// Only the backends import it; it imports pluginapi and ir, never a plugin.
package gpukit

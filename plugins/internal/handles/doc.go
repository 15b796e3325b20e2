// Package handles is the handle table the backends (CUDA, Vulkan, cpu-ref)
// keep their pipelines and resident buffers in: a handle is a uint64 the backend
// gives the host, never 0 and never given out twice by one table.
package handles

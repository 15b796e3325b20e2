// Package membuf keeps a test plugin's buffers in memory: the fixture plugin
// of host/testdata and host/client's in-process backends embed its Buffers to
// implement pluginapi.Buffers.
package membuf

// Package plugintest holds what the tests of the plugin executables
// (plugins/cuda, plugins/vulkan) share, so that each is written once: building
// the plugin once per test binary, or using a prebuilt one ([Build],
// [Binary]), starting it as the host does with its log kept ([Binary.Start]), the
// describe-or-skip step ([Usable]) and a vector_add round trip through the
// wire ([VectorAdd]).
//
// Only the plugins' tests import it; it imports pluginapi, never a plugin.
package plugintest

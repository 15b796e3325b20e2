// Command kiln-backend-vulkan is kiln's Vulkan backend plugin (id "vulkan"): it
// serves plugins/vulkan/backend over the kiln plugin protocol. The host starts it;
// run by hand it prints a notice and exits.
//
// Environment: KILN_VK_VALIDATION=1 enables the Khronos validation layer;
// KILN_VULKAN_LOADER names another Vulkan loader library than libvulkan.so.1;
// KILN_LOG_LEVEL sets the log level.
//
// When a device is lost the plugin answers the failing call, then exits with
// status 3; the host relaunches it on its next use.
package main

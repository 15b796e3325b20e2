package vk

/*
#cgo LDFLAGS: -ldl -lpthread
#include <stdlib.h>
#include "kiln_vk.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// DefaultLibrary is the Vulkan loader Load opens when given an empty name.
const DefaultLibrary = "libvulkan.so.1"

// ValidationLayer is the Khronos validation layer's name.
const ValidationLayer = "VK_LAYER_KHRONOS_validation"

// LoaderMissingError reports that the Vulkan loader library could not be opened.
type LoaderMissingError struct {
	// Library is the name or path given to dlopen.
	Library string
	// Detail is dlerror's text.
	Detail string
}

// Error says which loader is missing and how to install one.
func (e *LoaderMissingError) Error() string {
	return fmt.Sprintf("Vulkan loader %s not found (%s). Fix: install libvulkan1 and a Vulkan driver (mesa-vulkan-drivers provides a CPU one)", e.Library, e.Detail)
}

// MissingFunctionError reports a Vulkan function the loader or driver did not
// provide.
type MissingFunctionError struct {
	// Name is the function, e.g. "vkCreateDevice".
	Name string
}

// Error names the function.
func (e *MissingFunctionError) Error() string {
	return fmt.Sprintf("the Vulkan loader returned no address for %s. Fix: update the Vulkan loader (libvulkan1) and the driver to Vulkan 1.1 or later", e.Name)
}

// LayerMissingError reports that an instance layer kiln was asked to enable is not
// installed.
type LayerMissingError struct {
	Layer     string
	Installed []string
}

// Error names the layer and how to install it.
func (e *LayerMissingError) Error() string {
	return fmt.Sprintf("the Vulkan layer %s is not installed (installed layers: %q). Fix: install vulkan-validationlayers, or run without validation", e.Layer, e.Installed)
}

// Version is a packed Vulkan version number (VK_MAKE_API_VERSION).
type Version uint32

// MakeVersion packs a major.minor.patch version.
func MakeVersion(major, minor, patch uint32) Version {
	return Version(major<<22 | minor<<12 | patch)
}

// Major is the version's major number.
func (v Version) Major() uint32 { return uint32(v) >> 22 & 0x7f }

// Minor is the version's minor number.
func (v Version) Minor() uint32 { return uint32(v) >> 12 & 0x3ff }

// Patch is the version's patch number.
func (v Version) Patch() uint32 { return uint32(v) & 0xfff }

// String formats the version as major.minor.patch.
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch()) }

// The API versions kiln asks for.
var (
	Version11 = MakeVersion(1, 1, 0)
	Version12 = MakeVersion(1, 2, 0)
	Version13 = MakeVersion(1, 3, 0)
)

// Loader is an opened Vulkan loader library.
type Loader struct {
	l *C.kiln_loader
}

// Load opens the Vulkan loader library (DefaultLibrary when library is empty) and
// resolves the global functions. A library that cannot be opened gives a
// *LoaderMissingError.
func Load(library string) (*Loader, error) {
	if library == "" {
		library = DefaultLibrary
	}
	name := C.CString(library)
	defer C.free(unsafe.Pointer(name))
	var errbuf [512]C.char
	var l *C.kiln_loader
	switch C.kiln_load(name, &l, &errbuf[0], C.size_t(len(errbuf))) {
	case C.KILN_LOAD_OK:
		return &Loader{l: l}, nil
	case C.KILN_LOAD_NO_LIBRARY:
		return nil, &LoaderMissingError{Library: library, Detail: C.GoString(&errbuf[0])}
	default:
		return nil, &MissingFunctionError{Name: C.GoString(&errbuf[0])}
	}
}

// Close unloads the library. Every instance created from it must be destroyed
// first.
func (l *Loader) Close() {
	if l == nil || l.l == nil {
		return
	}
	C.kiln_unload(l.l)
	l.l = nil
}

// InstanceVersion is the highest Vulkan version the loader supports (1.0.0 for a
// loader without vkEnumerateInstanceVersion).
func (l *Loader) InstanceVersion() Version {
	return Version(C.kiln_instance_version(l.l))
}

// Layers lists the names of the installed instance layers.
func (l *Loader) Layers() ([]string, error) {
	for {
		var n C.uint32_t
		if err := check("vkEnumerateInstanceLayerProperties", C.kiln_enumerate_layers(l.l, &n, nil)); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, nil
		}
		props := make([]C.VkLayerProperties, n)
		r := C.kiln_enumerate_layers(l.l, &n, &props[0])
		if r == C.VK_INCOMPLETE {
			continue
		}
		if err := check("vkEnumerateInstanceLayerProperties", r); err != nil {
			return nil, err
		}
		names := make([]string, 0, n)
		for _, p := range props[:n] {
			names = append(names, C.GoString(&p.layerName[0]))
		}
		return names, nil
	}
}

// InstanceOptions configure CreateInstance.
type InstanceOptions struct {
	// APIVersion is VkApplicationInfo.apiVersion, the highest version kiln uses.
	APIVersion Version
	// Validation enables VK_LAYER_KHRONOS_validation with a debug messenger that
	// records warnings and errors (see Instance.Messages).
	Validation bool
	// SyncValidation, with Validation, also enables the layer's synchronization
	// validation (VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT): missing
	// or wrong barriers between commands become messages.
	SyncValidation bool
}

// Instance is a VkInstance with its function table.
type Instance struct {
	in         *C.kiln_instance
	apiVersion Version
}

// CreateInstance creates a Vulkan instance. With Validation, a missing validation
// layer is an error that says how to install it.
func (l *Loader) CreateInstance(opts InstanceOptions) (*Instance, error) {
	if opts.Validation {
		layers, err := l.Layers()
		if err != nil {
			return nil, err
		}
		found := false
		for _, name := range layers {
			found = found || name == ValidationLayer
		}
		if !found {
			return nil, &LayerMissingError{Layer: ValidationLayer, Installed: layers}
		}
	}
	validation, syncValidation := cbool(opts.Validation), cbool(opts.Validation && opts.SyncValidation)
	var in *C.kiln_instance
	var missing *C.char
	r := C.kiln_create_instance(l.l, C.uint32_t(opts.APIVersion), validation, syncValidation, &in, &missing)
	if missing != nil {
		return nil, &MissingFunctionError{Name: C.GoString(missing)}
	}
	if err := check("vkCreateInstance", r); err != nil {
		return nil, err
	}
	return &Instance{in: in, apiVersion: opts.APIVersion}, nil
}

// Destroy destroys the instance and its debug messenger. Every device created from
// it must be destroyed first.
func (i *Instance) Destroy() {
	if i == nil || i.in == nil {
		return
	}
	C.kiln_destroy_instance(i.in)
	i.in = nil
}

// Messages returns the number of validation messages recorded since the last call
// and their text, one per line ("error VUID-…: …"), and clears them. The text keeps
// the first MiB of messages; the count covers all of them.
func (i *Instance) Messages() (count uint64, text string) {
	if C.kiln_message_count(i.in) == 0 {
		// The common case, without allocating.
		return 0, ""
	}
	var n C.uint64_t
	s := C.kiln_take_messages(i.in, &n)
	if s != nil {
		text = C.GoString(s)
		C.free(unsafe.Pointer(s))
	}
	return uint64(n), text
}

// PhysicalDevices lists the instance's physical devices.
func (i *Instance) PhysicalDevices() ([]PhysicalDevice, error) {
	for {
		var n C.uint32_t
		if err := check("vkEnumeratePhysicalDevices", C.kiln_enumerate_physical_devices(i.in, &n, nil)); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, nil
		}
		handles := make([]C.VkPhysicalDevice, n)
		r := C.kiln_enumerate_physical_devices(i.in, &n, &handles[0])
		if r == C.VK_INCOMPLETE {
			continue
		}
		if err := check("vkEnumeratePhysicalDevices", r); err != nil {
			return nil, err
		}
		out := make([]PhysicalDevice, 0, n)
		for _, h := range handles[:n] {
			out = append(out, PhysicalDevice{inst: i, pd: h, exts: &extensionList{}})
		}
		return out, nil
	}
}

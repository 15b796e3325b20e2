package vk

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef int (*kiln_nvml_fn0)(void);
typedef int (*kiln_nvml_count)(unsigned int *);
typedef int (*kiln_nvml_by_index)(unsigned int, void **);
typedef int (*kiln_nvml_uuid)(void *, char *, unsigned int);
typedef int (*kiln_nvml_clock)(void *, int, unsigned int *);
typedef int (*kiln_nvml_bus)(void *, unsigned int *);

enum { KILN_NVML_UUID = 96, KILN_NVML_MAX = 64, KILN_NVML_CLOCK_MEM = 2 };

// kiln_nvml_estimates fills uuids (KILN_NVML_UUID bytes each) and GB/s
// estimates (2 x max memory clock x bus width) of up to KILN_NVML_MAX devices
// and returns how many, or -1 without libnvidia-ml.so.1, -2 when a function is
// missing, -3 when NVML does not start.
static int kiln_nvml_estimates(char *uuids, double *gbps) {
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		return -1;
	}
	kiln_nvml_fn0 init = (kiln_nvml_fn0)dlsym(lib, "nvmlInit_v2");
	kiln_nvml_fn0 shutdown = (kiln_nvml_fn0)dlsym(lib, "nvmlShutdown");
	kiln_nvml_count count = (kiln_nvml_count)dlsym(lib, "nvmlDeviceGetCount_v2");
	kiln_nvml_by_index by_index = (kiln_nvml_by_index)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
	kiln_nvml_uuid uuid = (kiln_nvml_uuid)dlsym(lib, "nvmlDeviceGetUUID");
	kiln_nvml_clock clock = (kiln_nvml_clock)dlsym(lib, "nvmlDeviceGetMaxClockInfo");
	kiln_nvml_bus bus = (kiln_nvml_bus)dlsym(lib, "nvmlDeviceGetMemoryBusWidth");
	if (!init || !shutdown || !count || !by_index || !uuid || !clock || !bus) {
		dlclose(lib);
		return -2;
	}
	if (init() != 0) {
		dlclose(lib);
		return -3;
	}
	unsigned int n = 0;
	if (count(&n) != 0) {
		n = 0;
	}
	if (n > KILN_NVML_MAX) {
		n = KILN_NVML_MAX;
	}
	int found = 0;
	for (unsigned int i = 0; i < n; i++) {
		void *dev = NULL;
		unsigned int mhz = 0, bits = 0;
		char *u = uuids + (size_t)found * KILN_NVML_UUID;
		if (by_index(i, &dev) != 0 || uuid(dev, u, KILN_NVML_UUID) != 0 ||
			clock(dev, KILN_NVML_CLOCK_MEM, &mhz) != 0 || bus(dev, &bits) != 0) {
			continue;
		}
		u[KILN_NVML_UUID - 1] = 0;
		gbps[found++] = 2.0 * (double)mhz * 1e6 * ((double)bits / 8.0) / 1e9;
	}
	shutdown();
	dlclose(lib);
	return found;
}
*/
import "C"

import (
	"bytes"
	"errors"
	"unsafe"
)

// ErrNoNVML says NVIDIA's management library (libnvidia-ml.so.1) is missing or
// did not start: there is no NVIDIA driver, or it is broken.
var ErrNoNVML = errors.New("NVIDIA management library (libnvidia-ml.so.1) unavailable")

// NVMLBandwidth estimates every NVIDIA GPU's memory bandwidth from what its
// driver reports, as twice the maximum memory clock times the bus width, in GB/s
// (10^9 bytes), by GPU UUID ("GPU-a6b56e12-..."), the form deviceUUID takes in
// an identity. It is the peak, above what kernels reach; nothing is run.
func NVMLBandwidth() (map[string]float64, error) {
	uuids := make([]byte, C.KILN_NVML_UUID*C.KILN_NVML_MAX)
	gbps := make([]float64, C.KILN_NVML_MAX)
	cu := C.CBytes(uuids)
	defer C.free(cu)
	cg := C.malloc(C.size_t(8 * C.KILN_NVML_MAX))
	defer C.free(cg)
	n := int(C.kiln_nvml_estimates((*C.char)(cu), (*C.double)(cg)))
	if n < 0 {
		return nil, ErrNoNVML
	}
	copy(uuids, C.GoBytes(cu, C.int(len(uuids))))
	copy(gbps, unsafe.Slice((*float64)(cg), C.KILN_NVML_MAX))
	out := make(map[string]float64, n)
	for i := range n {
		u := uuids[i*C.KILN_NVML_UUID : (i+1)*C.KILN_NVML_UUID]
		if end := bytes.IndexByte(u, 0); end >= 0 {
			u = u[:end]
		}
		out[string(u)] = gbps[i]
	}
	return out, nil
}

"""The driver-level references of a kiln Acquire (issue 24), one per process,
as scripts/gpu-start-run.sh runs them: prints one JSON line.

  python3 gpu-start-ref.py cuda    cuInit + primary context retain (made current)
                                   + stream creation (dlopen of libcuda.so.1 apart)
  python3 gpu-start-ref.py vulkan  vkCreateInstance (API 1.3) + the physical devices
                                   + vkCreateDevice with one compute queue
                                   (dlopen of libvulkan.so.1 apart)
"""
import ctypes
import json
import sys
import time


def ms(a, b):
    return round((b - a) * 1e3, 3)


def cuda():
    t0 = time.perf_counter()
    cu = ctypes.CDLL("libcuda.so.1")
    t1 = time.perf_counter()
    check = lambda r, what: r == 0 or sys.exit(f"{what} returned CUresult {r}")
    check(cu.cuInit(0), "cuInit")
    t2 = time.perf_counter()
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    t3 = time.perf_counter()
    stream = ctypes.c_void_p()
    check(cu.cuStreamCreate(ctypes.byref(stream), 0), "cuStreamCreate")
    t4 = time.perf_counter()
    return {"api": "cuda", "dlopen_ms": ms(t0, t1), "init_ms": ms(t1, t2), "retain_ms": ms(t2, t3),
            "stream_ms": ms(t3, t4), "reference_ms": ms(t1, t4)}


class AppInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int32), ("pNext", ctypes.c_void_p), ("pApplicationName", ctypes.c_char_p),
                ("applicationVersion", ctypes.c_uint32), ("pEngineName", ctypes.c_char_p),
                ("engineVersion", ctypes.c_uint32), ("apiVersion", ctypes.c_uint32)]


class InstanceInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int32), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("pApplicationInfo", ctypes.POINTER(AppInfo)), ("enabledLayerCount", ctypes.c_uint32),
                ("ppEnabledLayerNames", ctypes.c_void_p), ("enabledExtensionCount", ctypes.c_uint32),
                ("ppEnabledExtensionNames", ctypes.c_void_p)]


class QueueFamily(ctypes.Structure):
    _fields_ = [("queueFlags", ctypes.c_uint32), ("queueCount", ctypes.c_uint32),
                ("timestampValidBits", ctypes.c_uint32), ("granularity", ctypes.c_uint32 * 3)]


class QueueInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int32), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("queueFamilyIndex", ctypes.c_uint32), ("queueCount", ctypes.c_uint32),
                ("pQueuePriorities", ctypes.POINTER(ctypes.c_float))]


class DeviceInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int32), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("queueCreateInfoCount", ctypes.c_uint32), ("pQueueCreateInfos", ctypes.POINTER(QueueInfo)),
                ("enabledLayerCount", ctypes.c_uint32), ("ppEnabledLayerNames", ctypes.c_void_p),
                ("enabledExtensionCount", ctypes.c_uint32), ("ppEnabledExtensionNames", ctypes.c_void_p),
                ("pEnabledFeatures", ctypes.c_void_p)]


def vulkan():
    t0 = time.perf_counter()
    vk = ctypes.CDLL("libvulkan.so.1")
    t1 = time.perf_counter()
    check = lambda r, what: r == 0 or sys.exit(f"{what} returned VkResult {r}")
    app = AppInfo(0, None, b"kiln-start-ref", 1, b"kiln", 1, (1 << 22) | (3 << 12))
    info = InstanceInfo(1, None, 0, ctypes.pointer(app), 0, None, 0, None)
    inst = ctypes.c_void_p()
    vk.vkCreateInstance.argtypes = [ctypes.POINTER(InstanceInfo), ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    check(vk.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(inst)), "vkCreateInstance")
    t2 = time.perf_counter()
    n = ctypes.c_uint32()
    vk.vkEnumeratePhysicalDevices.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p]
    check(vk.vkEnumeratePhysicalDevices(inst, ctypes.byref(n), None), "vkEnumeratePhysicalDevices")
    pds = (ctypes.c_void_p * n.value)()
    check(vk.vkEnumeratePhysicalDevices(inst, ctypes.byref(n), pds), "vkEnumeratePhysicalDevices")
    pd = ctypes.c_void_p(pds[0])
    vk.vkGetPhysicalDeviceQueueFamilyProperties.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p]
    q = ctypes.c_uint32()
    vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, ctypes.byref(q), None)
    fams = (QueueFamily * q.value)()
    vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, ctypes.byref(q), fams)
    family = next(i for i, f in enumerate(fams) if f.queueFlags & 2)  # VK_QUEUE_COMPUTE_BIT
    t3 = time.perf_counter()
    prio = ctypes.c_float(1.0)
    qi = QueueInfo(2, None, 0, family, 1, ctypes.pointer(prio))
    di = DeviceInfo(3, None, 0, 1, ctypes.pointer(qi), 0, None, 0, None, None)
    dev = ctypes.c_void_p()
    vk.vkCreateDevice.argtypes = [ctypes.c_void_p, ctypes.POINTER(DeviceInfo), ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    check(vk.vkCreateDevice(pd, ctypes.byref(di), None, ctypes.byref(dev)), "vkCreateDevice")
    t4 = time.perf_counter()
    return {"api": "vulkan", "devices": n.value, "dlopen_ms": ms(t0, t1), "instance_ms": ms(t1, t2),
            "enumerate_ms": ms(t2, t3), "device_ms": ms(t3, t4), "reference_ms": ms(t1, t4)}


if __name__ == "__main__":
    print(json.dumps({"cuda": cuda, "vulkan": vulkan}[sys.argv[1]]()))

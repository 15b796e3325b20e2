package pluginapi

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"

	"github.com/kiln-dev/kiln/ir"
)

// Backend is what a plugin author implements and hands to Serve. The host's
// client (package host/client) implements it too, so the host talks to every
// plugin through the same interface.
//
// Methods may be called concurrently, and every one takes the host's context:
// honour its deadline and return its error. Errors should be one of the typed
// errors (RejectedError, UnavailableError, DeviceError) where one applies, with
// a message that says what failed with which value and ends with "Fix: …"
// where the user can act; they reach the host as the same kind with the same
// message. Do not recover panics: a panic crashes the plugin process, which
// the host reports as a crashed plugin and relaunches.
type Backend interface {
	// Describe reports the id (the registry key users pass to Acquire),
	// version, whether the backend is a reference oracle (never picked
	// implicitly), whether it dispatches, its precedence (lower wins, nil sorts
	// last), the IR features it supports ("ir.v1", "shared", "atomics",
	// "barrier") and its adapters. Each adapter has a [DeviceProfile], whose
	// [DeviceProfile.CapabilityScore], TimingQuality and MemBWGBps order the
	// host's preferred backend, and a [DeviceIdentity], whose
	// [DeviceIdentity.Fingerprint] keys the host's records. An unavailable
	// adapter says why in Reason, ending with "Fix: …".
	Describe(ctx context.Context) (*Description, error)
	// Open prepares an adapter (device) for use; opening it again is harmless.
	Open(ctx context.Context, adapter int) error
	// Compile gets a validated *ir.Program, the specialization map, an
	// optional workgroup-size override and, on a pipeline-cache hit, the blob
	// an earlier Compile returned. It returns a pipeline handle of the
	// backend's choosing and, optionally, a blob for the host to cache
	// (compiled device code). A blob from the cache is untrusted input: if it
	// cannot be used, compile from the program.
	Compile(ctx context.Context, req *CompileRequest) (*CompileResult, error)
	// Dispatch runs a pipeline over a grid of workgroups. Inputs are by
	// binding (the bytes of read and read_write buffers, nil for write
	// buffers), OutputCounts size the write buffers without a fixed count,
	// Uniforms is the program's uniform block, and the result holds every
	// write and read_write buffer in binding order, with the semantics of
	// docs/design.md, "IR v1" (out-of-bounds loads give 0, write buffers start
	// zeroed, …). The host checks the outputs' number and sizes against the
	// program.
	Dispatch(ctx context.Context, req *DispatchRequest) (*DispatchResult, error)
	// Release frees a pipeline handle.
	Release(ctx context.Context, pipeline uint64) error
	// Close releases everything; the process may exit after it returns.
	Close(ctx context.Context) error
}

// Description is what a backend reports about itself. See docs/design.md,
// "Backend selection".
type Description struct {
	// ID names the backend ("cpu-ref", "vulkan"); the host's registry key.
	ID string
	// Version is the plugin's version.
	Version string
	// ReferenceOracle marks a backend that defines correct results; the host never
	// picks one implicitly.
	ReferenceOracle bool
	// Dispatches reports whether the backend can run programs at all.
	Dispatches bool
	// Precedence ranks backends that tie on everything else: lower wins, nil sorts
	// after every rank.
	Precedence *uint32
	// Features lists the supported IR features, e.g. "ir.v1", "shared", "atomics",
	// "barrier".
	Features []string
	// Adapters are the devices the backend can run on, indexed from 0.
	Adapters []Adapter
}

// Adapter is one device of a backend.
type Adapter struct {
	Index     int
	Name      string
	Available bool
	// Reason says why the adapter is unavailable and ends with "Fix: …".
	Reason   string
	Profile  DeviceProfile
	Identity DeviceIdentity
	// Note is what a user should know about the adapter that is neither its
	// name nor a reason it is unavailable, e.g. the float controls a Vulkan
	// device lacks; `kiln devices` shows it. Empty when there is nothing to say.
	Note string
}

// DeviceIdentity names a device. Its Fingerprint (one device) keys autotune
// records and PGO routes; its ModelFingerprint (every device of one model and
// driver) keys the host's pipeline cache, so identical GPUs share compiled code.
type DeviceIdentity struct {
	Vendor, Device, DriverVersion, DeviceType string
	// Instance tells this device from identical ones: a GPU's UUID
	// ("GPU-a6b56e12-..."), stable when the driver enumerates devices in another
	// order (CUDA_VISIBLE_DEVICES). Empty when the backend cannot tell.
	Instance string
}

// Fingerprint is a stable hex digest of the identity, Instance included when
// set: two identical GPUs have distinct fingerprints, and a GPU keeps its own
// when the enumeration order changes. Without an Instance it equals
// ModelFingerprint.
func (d DeviceIdentity) Fingerprint() string {
	if d.Instance == "" {
		return d.ModelFingerprint()
	}
	return digestFields("kiln-device-instance-v1", d.Vendor, d.Device, d.DriverVersion, d.DeviceType, d.Instance)
}

// ModelFingerprint is a stable hex digest of the four model fields (not
// Instance): the first 16 bytes of a SHA-256 over each field, length-prefixed,
// so ("ab", "c") and ("a", "bc") differ.
func (d DeviceIdentity) ModelFingerprint() string {
	return digestFields("kiln-device-identity-v1", d.Vendor, d.Device, d.DriverVersion, d.DeviceType)
}

// digestFields is the first 16 bytes of a SHA-256 over domain and the
// length-prefixed fields, in hex.
func digestFields(domain string, fields ...string) string {
	h := sha256.New()
	h.Write([]byte(domain))
	var n [8]byte
	for _, f := range fields {
		binary.LittleEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// TimingQuality orders how precisely a backend can time a dispatch; higher is
// better.
type TimingQuality int

// The timing qualities, lowest first.
const (
	HostOnly TimingQuality = iota
	HostEnqueueWait
	DeviceTimestamps
	HardwareCounters
)

var timingQualityNames = [...]string{
	HostOnly:         "HostOnly",
	HostEnqueueWait:  "HostEnqueueWait",
	DeviceTimestamps: "DeviceTimestamps",
	HardwareCounters: "HardwareCounters",
}

// String returns the quality's name ("HostOnly"), or "TimingQuality(N)" for a value
// outside the defined ones.
func (q TimingQuality) String() string {
	if q >= 0 && int(q) < len(timingQualityNames) {
		return timingQualityNames[q]
	}
	return "TimingQuality(" + strconv.Itoa(int(q)) + ")"
}

// DeviceProfile describes an adapter's capabilities for selection and tuning.
type DeviceProfile struct {
	MaxStorageBufferBindingSize uint64
	MaxInvocationsPerWorkgroup  uint32
	SubgroupSize                uint32
	SupportsSubgroupOps, HasSubgroupShuffle, HasSharedMemory, SupportsF16, SupportsBF16,
	SupportsTensorCores, SupportsIndirectDispatch, SupportsDeviceTimestamps,
	SupportsHardwareCounters bool
	MemBWGBps     float64
	TimingQuality TimingQuality
	// MemBWStatus says what MemBWGBps is: measured, an estimate, a measurement
	// under way, or unstated (plugins built before kiln said it).
	MemBWStatus BandwidthStatus
	// MemoryBytes is the device memory kiln can allocate from, and
	// MemoryFreeBytes how much of it was free when the backend described the
	// adapter (a reading, not a capability: it changes between Describes).
	// Zero means unknown (plugins built before kiln asked).
	MemoryBytes, MemoryFreeBytes uint64
}

// CapabilityScore is the capability score of docs/design.md, "Backend selection": storage binding size > 0: 16;
// max invocations ≥ 64: 8, ≥ 256: 4 more; subgroup size > 0: 8; subgroup ops: 8;
// shuffle: 4; shared memory: 4; f16: 2; bf16: 2; tensor cores: 4; indirect
// dispatch: 2; device timestamps: 2; hardware counters: 2.
func (p DeviceProfile) CapabilityScore() int {
	score := 0
	add := func(cond bool, points int) {
		if cond {
			score += points
		}
	}
	add(p.MaxStorageBufferBindingSize > 0, 16)
	add(p.MaxInvocationsPerWorkgroup >= 64, 8)
	add(p.MaxInvocationsPerWorkgroup >= 256, 4)
	add(p.SubgroupSize > 0, 8)
	add(p.SupportsSubgroupOps, 8)
	add(p.HasSubgroupShuffle, 4)
	add(p.HasSharedMemory, 4)
	add(p.SupportsF16, 2)
	add(p.SupportsBF16, 2)
	add(p.SupportsTensorCores, 4)
	add(p.SupportsIndirectDispatch, 2)
	add(p.SupportsDeviceTimestamps, 2)
	add(p.SupportsHardwareCounters, 2)
	return score
}

// CompileRequest asks a backend to compile a program on an adapter.
type CompileRequest struct {
	Adapter int
	// Program was decoded from its canonical bytes and accepted by ir.Validate
	// before the backend sees it.
	Program *ir.Program
	// Spec sets parameters; the SDK has checked that each names a declared
	// parameter of the same type.
	Spec ir.SpecMap
	// WorkgroupSize overrides the program's when non-zero (the SDK accepts only an
	// all-zero or an all-non-zero override).
	WorkgroupSize [3]uint32
	// CachedBlob is what an earlier CompileResult.Blob for the same key held, from
	// the host's pipeline cache; nil on a miss. A backend must treat it as
	// untrusted: a blob it cannot use is ignored, never fatal.
	CachedBlob []byte
}

// CompileResult is a compiled pipeline.
type CompileResult struct {
	// Pipeline is the handle Dispatch and Release take.
	Pipeline uint64
	// Blob, when non-nil, is stored by the host and handed back as CachedBlob.
	Blob []byte
	// CompileNanos is the compile time; zero lets the SDK fill in the time the
	// Compile call took.
	CompileNanos int64
}

// DispatchRequest runs a pipeline.
type DispatchRequest struct {
	Pipeline uint64
	// Grid is the number of workgroups on each axis; 0 on an axis runs nothing.
	Grid [3]uint32
	// Inputs are by binding: the bytes of read and read_write buffers, nil for
	// write buffers.
	Inputs [][]byte
	// OutputCounts are by binding: element counts of write buffers without a
	// fixed count.
	OutputCounts []uint32
	// Uniforms is the program's uniform block (IR v1.1): each uniform's 4 bytes,
	// little-endian, in declaration order (ir.EncodeUniforms); empty when the
	// program has none. The host checks its length before sending it.
	Uniforms []byte
}

// DispatchResult holds every write and read_write buffer, in binding order.
type DispatchResult struct {
	Outputs [][]byte
	// HostNanos is the wall time of the dispatch as the plugin saw it; zero lets
	// the SDK fill in the time the Dispatch call took.
	HostNanos int64
	// DeviceNanos is the device-measured time, zero when the backend cannot tell.
	DeviceNanos int64
}

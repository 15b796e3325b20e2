#!/bin/bash
# The GPU experiment behind the Vulkan figures in the issue notes: kiln on NVIDIA's
# Vulkan driver (kiln backends, kiln run --all, the backend's conformance/corpus/edge
# tests, vector-add and matmul benchmarks) next to PyTorch's copy/add/matmul.
# Prepare on the build machine, from the repository root:
#   mkdir -p .devbin/plugins; L='-ldflags=-s -w'
#   go build "$L" -o .devbin/kiln ./cmd/kiln
#   go build "$L" -o .devbin/plugins/kiln-backend-cpuref ./plugins/cpuref
#   go build "$L" -o .devbin/plugins/kiln-backend-vulkan ./plugins/vulkan
#   go test -c "$L" -o .devbin/backend.test ./plugins/vulkan/backend
# plus the Vulkan loader .debs in .gl/ (see the device tool's README); then run this
# script on the GPU machine with OUT set to a folder for the logs.
# One device experiment: kiln on NVIDIA's Vulkan driver (conformance, backends, corpus, benchmarks).
for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
echo '{"file_format_version":"1.0.1","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"1.3.0"}}' > /tmp/icd.json
export VK_ICD_FILENAMES=/tmp/icd.json VK_DRIVER_FILES=/tmp/icd.json KILN_VK_VALIDATION=0 KILN_REQUIRE_VULKAN=1
export XDG_CACHE_HOME=/tmp/xc XDG_CONFIG_HOME=/tmp/xcfg XDG_DATA_HOME=/tmp/xd
B=.devbin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu.txt
echo "== kiln backends"; $B/kiln --plugins $B/plugins backends 2>&1 | tee $OUT/backends.txt
$B/kiln --plugins $B/plugins backends --json > $OUT/backends.json 2>&1
echo "== kiln run --all"; $B/kiln --plugins $B/plugins run --all 2>&1 | tee $OUT/run-all.txt
echo "== conformance + corpus + edge table"
$B/backend.test -test.count=1 -test.v > $OUT/backend-tests.txt 2>&1; echo "backend tests rc=$?"
grep -E '^(--- FAIL|FAIL|ok|PASS)' $OUT/backend-tests.txt | head -20; grep -c -- '--- PASS' $OUT/backend-tests.txt; grep -E -- '--- SKIP' $OUT/backend-tests.txt | head
echo "== benchmarks"
nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv,noheader -lms 500 > $OUT/clocks.txt 2>&1 &
SMI=$!
$B/backend.test -test.run '^$' -test.bench 'VectorAdd|Matmul' -test.benchtime 5x 2>&1 | tee $OUT/bench.txt
# Protocol 2: a 1-element submit over resident buffers, 100 dependent dispatches in one
# submit against the sum of their device times, plugin start + describe.
$B/backend.test -test.run '^$' -test.bench 'SubmitOneElement|SubmitLatency|DependentDispatches|StartAndDescribe|StartPhases' -test.benchtime 200x 2>&1 | tee -a $OUT/bench.txt
kill $SMI
echo "== torch reference"
PYTHONUNBUFFERED=1 python3 - <<'PY' 2>&1 | tee $OUT/torch.txt
import torch, time
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
n = 256 * 1024 * 1024
a = torch.empty(n, dtype=torch.float32, device='cuda').uniform_()
b = torch.empty_like(a)
def timeit(f, reps=20):
    f(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    best = 1e9
    for _ in range(reps):
        s.record(); f(); e.record(); torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e))
    return best / 1e3
t = timeit(lambda: b.copy_(a))
print(f"torch d2d copy 256M f32: {t*1e3:.3f} ms, {2*4*n/t/1e9:.0f} GB/s (read+write)")
c = torch.empty_like(a)
t = timeit(lambda: torch.add(a, b, out=c))
print(f"torch vector add 256M f32: {t*1e3:.3f} ms, {12*n/t/1e9:.0f} GB/s (12 B/elem)")
m = 4096
x = torch.randn(m, m, device='cuda'); y = torch.randn(m, m, device='cuda')
t = timeit(lambda: torch.matmul(x, y))
print(f"torch.matmul 4096^3 fp32 (TF32 off): {t*1e3:.3f} ms, {2*m**3/t/1e9:.0f} GFLOP/s")
PY
echo "== clocks during the kiln benchmarks (SM MHz, mem MHz)"; sort $OUT/clocks.txt | uniq -c | sort -rn | head -8

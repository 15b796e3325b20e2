#!/bin/bash
# The GPU experiment behind the Vulkan figures: kiln on NVIDIA's Vulkan driver.
#   tests: kiln backends, kiln run --all (cpu-ref, vulkan, cuda), and the Vulkan
#          backend's tests (conformance kit, corpus, edge rows, submit path)
#   bench: plugin start phases; a 1-element submit over a resident buffer in
#          process (median, p90, p99, Vulkan calls per submit); vector add over
#          resident 256M f32 buffers per elements per invocation; 100 dependent
#          dispatches in one submit against the sum of their device times;
#          kiln bench --backend vulkan (the same through the plugin); then
#          PyTorch's vector add, 1-element add + synchronize and matmul in the
#          same run, and the SM clock sampled throughout.
#
# Prepare on the build machine, from the repository root (the carried tree must
# stay under 64 MiB, hence the tarball):
#   D=.devbin/vulkan; rm -rf $D; mkdir -p $D/bin/plugins; L='-ldflags=-s -w'
#   go build "$L" -o $D/bin/kiln ./cmd/kiln
#   for p in cuda cpuref vulkan; do go build "$L" -o $D/bin/plugins/kiln-backend-$p ./plugins/$p; done
#   go test -c "$L" -o $D/bin/backend.test ./plugins/vulkan/backend
#   tar czf $D/bin.tgz -C $D bin && rm -r $D/bin
# plus the Vulkan loader .debs in .gl/ (see the device tool's README). On the GPU
# machine, with OUT set to a folder for the logs:
#   bash scripts/gpu-vulkan-run.sh [all|tests|bench]     (default all)
# with carry [".devbin/vulkan", ".gl"].
set -u
MODE=${1:-all}
W=/tmp/kiln-vulkan
rm -rf $W && mkdir -p $W && tar xzf .devbin/vulkan/bin.tgz -C $W
B=$W/bin
for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
echo '{"file_format_version":"1.0.1","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"1.3.0"}}' > $W/icd.json
export VK_ICD_FILENAMES=$W/icd.json VK_DRIVER_FILES=$W/icd.json KILN_VK_VALIDATION=0 KILN_REQUIRE_VULKAN=1
export XDG_CACHE_HOME=$W/xc XDG_CONFIG_HOME=$W/xcfg XDG_DATA_HOME=$W/xd
K="$B/kiln --plugins $B/plugins"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu.txt

if [ "$MODE" = all ] || [ "$MODE" = tests ]; then
  echo "== kiln backends"; $K backends 2>&1 | tee $OUT/backends.txt
  echo "== kiln run --all"; $K run --all > $OUT/run-all.txt 2>&1; echo "rc=$?"; tail -45 $OUT/run-all.txt
  echo "== vulkan backend tests"
  (cd $W && $B/backend.test -test.count=1 -test.v > $OUT/backend-tests.txt 2>&1); echo "rc=$?"
  grep -E '^(--- FAIL|FAIL|ok|PASS)' $OUT/backend-tests.txt | head
  echo "pass: $(grep -c -- '--- PASS' $OUT/backend-tests.txt) fail: $(grep -c -- '--- FAIL' $OUT/backend-tests.txt) skip: $(grep -c -- '--- SKIP' $OUT/backend-tests.txt)"
fi

if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
  nvidia-smi --query-gpu=clocks.sm --format=csv,noheader -lms 500 > $OUT/clocks.txt 2>&1 &
  SMI=$!
  bench() { $B/backend.test -test.run '^$' -test.bench "$1" -test.benchtime "$2" 2>&1 | grep -E '^Benchmark|FAIL' | tee -a $OUT/bench.txt; }
  echo "== start phases (in process)"; bench 'StartPhases|StartAndDescribe' 30x
  echo "== 1-element submit (in process)"; bench 'SubmitLatency|SubmitOneElement' 20000x
  echo "== vector add 256M f32, resident"; bench 'VectorAddResident/n=268435456' 100x
  echo "== 100 dependent dispatches"; bench 'DependentDispatches' 200x
  echo "== kiln bench --backend vulkan (through the plugin)"
  $K bench --backend vulkan --mib 1 --round-trips 3000 --starts 15 --repeats 1 --chain 10 2>&1 | tee $OUT/kiln-bench.txt | tail -14
  kill $SMI
  echo "== SM clock during the kiln benchmarks (MHz: samples)"; sort $OUT/clocks.txt | uniq -c | sort -rn | head -4
  echo "== torch reference"
  PYTHONUNBUFFERED=1 python3 - <<'PY' 2>&1 | tee $OUT/torch.txt
import torch, time
torch.backends.cuda.matmul.allow_tf32 = False
n = 256 * 1024 * 1024
a = torch.empty(n, dtype=torch.float32, device='cuda').uniform_(); b = torch.empty_like(a); c = torch.empty_like(a)
def timeit(f, reps=30):
    for _ in range(20): f()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True); best = 1e9
    for _ in range(reps):
        s.record(); f(); e.record(); torch.cuda.synchronize(); best = min(best, s.elapsed_time(e))
    return best / 1e3
t = timeit(lambda: torch.add(a, b, out=c))
print(f"torch vector add 256M f32: {t*1e3:.3f} ms, {12*n/t/1e9:.0f} GB/s (12 B/elem)")
x = torch.ones(1, device='cuda'); y = torch.ones(1, device='cuda')
ts = []
for _ in range(2000):
    t0 = time.perf_counter(); torch.add(x, y); torch.cuda.synchronize(); ts.append(time.perf_counter() - t0)
ts.sort(); print(f"torch 1-element add + synchronize, median of 2000: {ts[1000]*1e6:.1f} us")
PY
fi

#!/bin/bash
# The GPU experiment behind the CUDA figures: kiln's CUDA backend on NVIDIA GPUs
# (ptxas over every emitted module, sm_90a/sm_90/sm_80 by each module's .target,
# the IR v1.2 ones for sm_80 and sm_90 apart, the tensor-core modules with their
# SASS, the driver/emitter/backend/plugin tests with
# KILN_REQUIRE_CUDA=1, kiln backends, kiln run --all on cpu-ref, vulkan and cuda),
# then benchmarks next to PyTorch, each printed with the SM clock at that moment:
#   - vector add 256M f32 over resident buffers per elements-per-invocation value
#     vs torch.add, and the emitter's candidate forms in hand PTX (GridStride:
#     1/2/4/8 elements per thread, branch vs predicated, nc loads, contiguous,
#     unchecked; StreamingLoads: load/store forms, vec4);
#   - a 1-element dispatch: the plugin's own CPU work (PrepareSmall), in process
#     (SubmitSmall, median and allocations), through the plugin
#     (WireSubmitSmall, median), and the driver's ways of waiting (LaunchSync)
#     vs torch's add + synchronize;
#   - plugin start + describe (and + open) vs cuInit and device enumeration alone;
#   - 64 MiB writes and reads through the plugin (WireTransfer: DMA from and to
#     the data plane's registered segments);
#   - cold vs warm compile of the corpus matmul, the matmul at 4096^3 vs
#     torch.matmul with TF32 off;
#   - tensor cores (issue 27): matmul_tc through the backend (BenchmarkMatmulTC:
#     bf16, f16, tf32 at 4096^3 and bf16 at 8192^3, the default 64x128x32 tile
#     and the fastest measured ones) next to torch.matmul on the same shapes in
#     the same run, each with the SM clock; HGMMA counted in the SASS of the
#     winning bf16 module; kiln tune --kernel matmul_tc --spec type=bf16;
#   - on a machine with several GPUs, a vector add on all of them at once
#     (VectorAddAllGPUs; TestEveryGPUAtOnce runs with the backend tests);
#   - the load test: 1, 4, 16 and 64 goroutines sharing one host, dispatching
#     1-element work (kiln bench --load, on cuda and on cpu-ref).
#
# Prepare on the build machine, from the repository root (the carried tree must
# stay under 64 MiB, hence the tarball):
#   D=.devbin/cuda; rm -rf $D; mkdir -p $D/bin/plugins; L='-ldflags=-s -w'
#   go build "$L" -o $D/bin/kiln ./cmd/kiln
#   for p in cuda cpuref vulkan; do go build "$L" -o $D/bin/plugins/kiln-backend-$p ./plugins/$p; done
#   go test -c "$L" -o $D/bin/driver.test ./plugins/cuda/driver
#   go test -c "$L" -o $D/bin/ptx.test ./plugins/cuda/ptx
#   go test -c "$L" -o $D/bin/backend.test ./plugins/cuda/backend
#   go test -c "$L" -o $D/bin/plugin.test ./plugins/cuda
#   tar czf $D/bin.tgz -C $D bin && rm -r $D/bin && cp scripts/gpu-cuda-run.sh $D/
# plus the Vulkan loader .debs in .gl/ for the vulkan row of kiln run --all (see
# the device tool's README). On the GPU machine, with OUT set to a folder for the
# logs:  bash .devbin/cuda/gpu-cuda-run.sh [all|tests|bench|tc]  (default all;
# tc: only the tensor-core parts — the ptx tests of the tensor-core modules and
# ptxas over every module, the corpus/v1.2 backend tests, the tensor-core
# benchmarks next to torch — about 10 minutes on an H200).
# Benchmarks a build lacks (the protocol 2 ones before v2) are simply not run.
set -u
MODE=${1:-all}
D=.devbin/cuda
W=/tmp/kiln-cuda
rm -rf $W && mkdir -p $W && tar xzf $D/bin.tgz -C $W
B=$W/bin
export PATH=$PATH:/usr/local/cuda/bin
export XDG_CACHE_HOME=$W/xc XDG_CONFIG_HOME=$W/xcfg XDG_DATA_HOME=$W/xd
export KILN_CUDA_PLUGIN=$B/plugins/kiln-backend-cuda
S=$OUT/summary.txt
say() { echo "$@" | tee -a $S; }
if ls .gl/*.deb >/dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
  echo '{"file_format_version":"1.0.1","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"1.3.0"}}' > $W/icd.json
  export VK_ICD_FILENAMES=$W/icd.json VK_DRIVER_FILES=$W/icd.json KILN_VK_VALIDATION=0
fi
# tc_bench: the tensor-core benchmarks (issue 27), after the ptx tests kept the
# modules in $W/ptx.
tc_bench() {
  say "-- tensor cores: matmul_tc through the backend (resident buffers, warm-up, best of 20), bf16/f16/tf32 4096^3 and bf16 8192^3; torch.matmul on the same shapes follows"
  clock
  timeout 400 $B/backend.test -test.run '^$' -test.bench 'MatmulTC' -test.benchtime 20x -test.v > $OUT/tc-bench.txt 2>&1; say "rc=$?"
  grep -E '^Benchmark|path:|FAIL|panic|c\[' $OUT/tc-bench.txt | tee -a $S
  clock
  say "-- tensor cores: torch.matmul on the same shapes (bf16, f16 with f32 accumulate; TF32 on for tf32), best of 20 after a warm-up, SM clock at each"
  PYTHONUNBUFFERED=1 timeout 200 python3 - <<'PY' 2>&1 | tee $OUT/tc-torch.txt | tee -a $S
import subprocess, torch
def clock():
    return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
def best(f, reps=20):
    for _ in range(10): f()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    t = 1e9
    for _ in range(reps):
        s.record(); f(); e.record(); torch.cuda.synchronize(); t = min(t, s.elapsed_time(e) / 1e3)
    return t
for name, dt, tf32, n in [("bf16", torch.bfloat16, False, 4096), ("f16", torch.float16, False, 4096),
                          ("tf32", torch.float32, True, 4096), ("bf16", torch.bfloat16, False, 8192)]:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randint(-3, 4, (n, n), device="cuda").to(dt); b = torch.randint(-3, 4, (n, n), device="cuda").to(dt)
    t = best(lambda: torch.matmul(a, b))
    print(f"torch.matmul {name} {n}^3: {t*1e3:.3f} ms, {2*n**3/t/1e12:.0f} TFLOP/s (SM clock {clock()})")
PY
  say "-- tensor cores: each kiln result as a share of torch's (same run)"
  for spec in "bf16 4096" "f16 4096" "tf32 4096" "bf16 8192"; do
    set -- $spec
    k=$(grep -E "^BenchmarkMatmulTC/$1/s=$2/" $OUT/tc-bench.txt | awk '{for(i=1;i<=NF;i++) if($(i+1)=="best-TFLOP/s") print $i, $1}' | sort -rn | head -1)
    tt=$(grep -E "^torch.matmul $1 $2\^3" $OUT/tc-torch.txt | grep -oE '[0-9]+ TFLOP/s' | cut -d' ' -f1)
    [ -n "$k" ] && [ -n "$tt" ] && say "$1 $2^3: kiln best $(echo $k | cut -d' ' -f1) TFLOP/s ($(echo $k | cut -d' ' -f2)) = $(awk -v a=$(echo $k | cut -d' ' -f1) -v b=$tt 'BEGIN{printf "%.0f", 100*a/b}')% of torch $tt"
  done
  say "-- tensor cores: HGMMA in the SASS of the winning bf16 4096^3 matmul_tc module (ptx.test TestTensorCoreModulesAssemble kept it)"
  w=$(grep -E '^BenchmarkMatmulTC/bf16/s=4096/' $OUT/tc-bench.txt | awk '{for(i=1;i<=NF;i++) if($(i+1)=="best-TFLOP/s") print $i, $1}' | sort -rn | head -1 | cut -d' ' -f2)
  tile=$(echo "$w" | grep -oE 'tile=[0-9x]+' | cut -d= -f2); wg=$(echo "$w" | grep -oE 'wg=[0-9]+' | cut -d= -f2 | cut -d- -f1)
  f=$(ls $W/ptx/matmul_tc.bf16.$tile.wg$wg.sm_90.sm_90a.ptx 2>/dev/null)
  if [ -n "$f" ]; then
    ptxas -arch=sm_90a -v "$f" -o $W/win.cubin > $OUT/tc-win-ptxas.txt 2>&1
    say "winner $w: $(head -1 $f); HGMMA $(cuobjdump --dump-sass $W/win.cubin | grep -c HGMMA); $(grep -oE 'Used [0-9]+ registers' $OUT/tc-win-ptxas.txt | head -1)"
  else
    say "no kept module for the winner '$w' (tile $tile, wg $wg): see $W/ptx"
  fi
  if $B/kiln tune --help 2>&1 | grep -q -- '--spec' && $B/kiln run --list 2>&1 | grep -q matmul_tc; then
    say "-- kiln tune --kernel matmul_tc --spec type=bf16 at 1024^3 on cuda (workgroup sizes of the default tile), then the fastest tile fixed"
    clock
    timeout 300 $B/kiln --plugins $B/plugins tune --backend cuda --kernel matmul_tc --spec type=bf16 --size 1024 --dry-run --wg 128,1,1 --wg 256,1,1 --wg 512,1,1 2>&1 | tail -15 | tee -a $S
    timeout 300 $B/kiln --plugins $B/plugins tune --backend cuda --kernel matmul_tc --spec type=bf16 --spec tm=256 --spec tn=128 --spec tk=64 --size 1024 --dry-run --wg 512,1,1 2>&1 | tail -8 | tee -a $S
  fi
}
clock() { say "-- SM clock now: $(nvidia-smi --query-gpu=index,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tr '\n' ';')"; }
say "== machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv 2>&1 | tee -a $S
ptxas --version 2>&1 | tail -1 | tee -a $S

PTXRUN=.
[ "$MODE" = tc ] && PTXRUN='TensorCore|EveryModuleAssembles'
if [ "$MODE" != bench ]; then
  say "== ptx tests (KILN_REQUIRE_CUDA=1: every module through ptxas for sm_90a, sm_90, sm_80, sm_75; SASS has no FFMA without fma; the tensor-core modules' SASS has HGMMA)"
  KILN_REQUIRE_CUDA=1 KILN_PTX_OUT=$W/ptx timeout 400 $B/ptx.test -test.run "$PTXRUN" -test.count=1 -test.v > $OUT/ptx-tests.txt 2>&1; say "ptx.test rc=$?"
  grep -E '^(--- FAIL|FAIL|ok|PASS)' $OUT/ptx-tests.txt | head -20 | tee -a $S
  # each module for the architectures its .target allows: sm_90a modules (wgmma)
  # for sm_90a only, the others for sm_90 and for their own target
  n=0; bad=0
  for f in $W/ptx/*.ptx; do
    n=$((n+1)); tgt=$(grep -m1 -oE '^\.target sm_[0-9]+a?' "$f" | cut -d' ' -f2)
    case $tgt in sm_90a) archs=sm_90a ;; sm_70) archs="sm_90 sm_75" ;; *) archs="sm_90 $tgt" ;; esac
    for arch in $archs; do ptxas -arch=$arch "$f" -o $W/x.cubin 2>>$S || { bad=$((bad+1)); say "ptxas -arch=$arch rejects $f"; }; done
  done
  say "ptxas over $n emitted modules (sm_90a, sm_90, sm_80, sm_75 by their .target): $bad rejected"
  say "tensor-core modules: $(ls $W/ptx | grep -c 'sm_90a.ptx$') for sm_90a (wgmma), $(grep -l 'path: mma.sync' $W/ptx/*.ptx | wc -l) mma.sync, $(grep -l 'kiln matrix path: scalar' $W/ptx/*.ptx | wc -l) scalar with the reason"
  grep -h '^// kiln' $W/ptx/*matmul_tc*.ptx 2>/dev/null | sort | uniq -c | tee -a $S
  say "== ptxas over the IR v1.2 modules (f16/bf16 arithmetic, casts and memory, the scalar matrix path) for sm_80 and sm_90"
  n=0; bad80=0; bad90=0
  for f in $(grep -l -E '\.f16|\.bf16|\.u16|kiln_matrix' $W/ptx/*.ptx | xargs -r grep -l -E '^\.target sm_(70|80)$'); do
    n=$((n+1))
    ptxas -arch=sm_80 "$f" -o $W/x.cubin 2>>$S || { bad80=$((bad80+1)); say "ptxas -arch=sm_80 rejects $f"; }
    ptxas -arch=sm_90 "$f" -o $W/x.cubin 2>>$S || { bad90=$((bad90+1)); say "ptxas -arch=sm_90 rejects $f"; }
  done
  say "ptxas over $n IR v1.2 modules: $bad80 rejected for sm_80, $bad90 for sm_90"
fi
if [ "$MODE" = tc ]; then
  say "== backend tests of the tensor-core path (the corpus with matmul_tc, IR v1.2, dynamic shared memory) on cuda:0"
  KILN_REQUIRE_CUDA=1 timeout 300 $B/backend.test -test.run 'Corpus|V12|DynamicShared|Conformance' -test.count=1 -test.v > $OUT/backend-tests.txt 2>&1; say "backend.test rc=$?"
  grep -E -- '^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|matmul_tc' $OUT/backend-tests.txt | head -40 | tee -a $S
  say "== benchmarks"
  tc_bench
  exit 0
fi
if [ "$MODE" != bench ]; then
  say "== driver tests"
  KILN_REQUIRE_CUDA=1 timeout 60 $B/driver.test -test.count=1 -test.v > $OUT/driver-tests.txt 2>&1; say "driver.test rc=$?"
  grep -E '^(--- FAIL|FAIL|ok|PASS)|driver API' $OUT/driver-tests.txt | head -20 | tee -a $S
  say "== backend tests (conformance, corpus, edge table on cuda:0)"
  KILN_REQUIRE_CUDA=1 timeout 300 $B/backend.test -test.count=1 -test.v > $OUT/backend-tests.txt 2>&1; say "backend.test rc=$?"
  grep -E -- '^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|cuda:0|abandoned' $OUT/backend-tests.txt | head -40 | tee -a $S
  say "passed: $(grep -c -- '--- PASS' $OUT/backend-tests.txt), failed: $(grep -c -- '--- FAIL' $OUT/backend-tests.txt), skipped: $(grep -c -- '--- SKIP' $OUT/backend-tests.txt)"
  say "== plugin process tests"
  KILN_REQUIRE_CUDA=1 timeout 120 $B/plugin.test -test.count=1 -test.v > $OUT/plugin-tests.txt 2>&1; say "plugin.test rc=$?"
  grep -E '^(--- |FAIL|ok|PASS)' $OUT/plugin-tests.txt | head | tee -a $S
  say "== kiln backends"
  timeout 120 $B/kiln --plugins $B/plugins backends 2>&1 | tee -a $S
  say "== kiln run --all"
  timeout 300 $B/kiln --plugins $B/plugins run --all 2>&1 | tee -a $S
fi

if [ "$MODE" != tests ]; then
  say "== benchmarks (clocks sampled every 0.5 s into clocks.txt)"
  nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv,noheader -lms 500 > $OUT/clocks.txt 2>&1 &
  SMI=$!
  bench() { # bench TIMEOUT BINARY ARGS...: the SM clock, then the benchmarks (log in bench.txt, results in the summary)
    local t=$1; shift; local bin=$1; shift
    clock
    timeout $t $bin -test.run '^$' "$@" 2>&1 | tee -a $OUT/bench.txt | grep -E '^Benchmark|capabilities|FAIL|panic' | tee -a $S
  }
  : > $OUT/bench.txt
  say "-- vector add 256M f32 (resident; per epi when vector_add has the parameter), matmul, v1 dispatch"
  bench 300 $B/backend.test -test.bench 'VectorAdd$|VectorAddResident|^BenchmarkMatmul|SmallDispatch' -test.benchtime 5x
  say "-- the emitter's candidate forms for the vector add (hand PTX), and load/store forms"
  bench 300 $B/driver.test -test.bench 'GridStride|StreamingLoads' -test.benchtime 10x
  say "-- 1-element dispatch: plugin CPU work, in process, ways of waiting"
  bench 60 $B/backend.test -test.bench 'PrepareSmall' -test.benchtime 100000x
  bench 100 $B/backend.test -test.bench 'SubmitSmall' -test.benchtime 5000x
  bench 100 $B/driver.test -test.bench 'LaunchSync' -test.benchtime 5000x
  say "-- 1-element dispatch through the plugin (protocol 2, and v1)"
  bench 100 $B/plugin.test -test.bench 'WireSmallDispatch|WireSubmitSmall' -test.benchtime 2000x
  say "-- 64 MiB write and read through the plugin (segments registered with the driver: DMA)"
  bench 100 $B/plugin.test -test.bench 'WireTransfer' -test.benchtime 20x
  say "-- plugin start + describe (+ open) vs cuInit and enumeration alone"
  bench 200 $B/plugin.test -test.bench 'StartDescribe|StartOpen|InitAlone' -test.benchtime 10x
  say "-- cold (driver JIT, its compute cache off) vs warm (cubin from kiln's blob) compile"
  CUDA_CACHE_DISABLE=1 bench 100 $B/backend.test -test.bench 'CompileMatmul' -test.benchtime 10x
  tc_bench
  say "-- every GPU at once (vector add 256M f32 each)"
  bench 300 $B/backend.test -test.bench 'VectorAddAllGPUs' -test.benchtime 5x
  if $B/kiln bench --help 2>&1 | grep -q -- '--load'; then
    for be in cuda cpu-ref; do
      say "-- load test on $be: 1-element dispatches (v1 API) by 1, 4, 16, 64 goroutines sharing one host (kiln bench --load)"
      clock
      timeout 200 $B/kiln --plugins $B/plugins bench --backend $be --load --load-duration 3s > $OUT/load-$be.txt 2>&1; say "rc=$?"
      tail -7 $OUT/load-$be.txt | tee -a $S
    done
  fi
  clock
  kill $SMI
  say "== torch reference"
  PYTHONUNBUFFERED=1 timeout 200 python3 - <<'PY' 2>&1 | tee $OUT/torch.txt | tee -a $S
import ctypes, time, subprocess, sys, torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
def timeit(f, reps=20):
    f(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    best = 1e9
    for _ in range(reps):
        s.record(); f(); e.record(); torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e))
    return best / 1e3
n = 256 * 1024 * 1024
a = torch.empty(n, dtype=torch.float32, device='cuda').uniform_()
b = torch.empty_like(a); c = torch.empty_like(a)
t = timeit(lambda: b.copy_(a))
print(f"torch d2d copy 256M f32: {t*1e3:.3f} ms, {2*4*n/t/1e9:.0f} GB/s (read+write)")
t = timeit(lambda: torch.add(a, b, out=c))
print(f"torch vector add 256M f32: {t*1e3:.3f} ms, {12*n/t/1e9:.0f} GB/s (12 B/elem)")
one = torch.ones(1, device='cuda'); out = torch.empty_like(one)
for _ in range(100): torch.add(one, one, out=out); torch.cuda.synchronize()
ts = []
for _ in range(2000):
    s = time.perf_counter(); torch.add(one, one, out=out); torch.cuda.synchronize(); ts.append(time.perf_counter() - s)
ts.sort(); print(f"torch 1-element add + synchronize: median {ts[len(ts)//2]*1e6:.1f} us")
m = 4096
x = torch.randn(m, m, device='cuda'); y = torch.randn(m, m, device='cuda')
t = timeit(lambda: torch.matmul(x, y))
print(f"torch.matmul 4096^3 fp32 (TF32 off): {t*1e3:.3f} ms, {2*m**3/t/1e9:.0f} GFLOP/s")
code = "import ctypes,time;s=time.perf_counter();l=ctypes.CDLL('libcuda.so.1');l.cuInit(0);n=ctypes.c_int();l.cuDeviceGetCount(ctypes.byref(n));print((time.perf_counter()-s)*1e3)"
ms = sorted(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout) for _ in range(5))
print(f"python ctypes cuInit + cuDeviceGetCount in a fresh process: median {ms[2]:.1f} ms")
PY
  say "== clocks during the kiln benchmarks (SM MHz, mem MHz)"; sort $OUT/clocks.txt | uniq -c | sort -rn | head -6 | tee -a $S
fi

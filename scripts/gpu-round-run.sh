#!/bin/bash
# One H200 call for the IR v1.2 round (issues 26-29), each kiln figure next to
# PyTorch's in the same run with the SM clock: the v1.2 and tensor-core PTX
# through ptxas (and HGMMA in the SASS), the corpus, IR v1.2 and conformance
# tests on cuda:0, matmul_tc on tensor cores vs torch.matmul, vector_add_f16
# (cuda and vulkan) vs torch.add on f16, kiln run --repeat (vector_add,
# matmul_reg) with a trace, and the load test. Budget: under 10 minutes.
#
# Prepare on the build machine, from the repository root:
#   D=.devbin/cuda; rm -rf $D; mkdir -p $D/bin/plugins; L='-ldflags=-s -w'
#   go build "$L" -o $D/bin/kiln ./cmd/kiln
#   for p in cuda cpuref vulkan; do go build "$L" -o $D/bin/plugins/kiln-backend-$p ./plugins/$p; done
#   go test -c "$L" -o $D/bin/ptx.test ./plugins/cuda/ptx
#   go test -c "$L" -o $D/bin/backend.test ./plugins/cuda/backend
#   tar czf $D/bin.tgz -C $D bin && rm -r $D/bin
# plus the Vulkan loader .debs in .gl/. On the GPU machine, with OUT set:
#   bash scripts/gpu-round-run.sh
set -u
D=.devbin/cuda
W=/tmp/kiln-round
rm -rf $W && mkdir -p $W && tar xzf $D/bin.tgz -C $W
B=$W/bin
export PATH=$PATH:/usr/local/cuda/bin
export XDG_CACHE_HOME=$W/xc XDG_CONFIG_HOME=$W/xcfg XDG_DATA_HOME=$W/xd
S=$OUT/summary.txt
say() { echo "$@" | tee -a $S; }
clock() { say "-- SM clock now: $(nvidia-smi --query-gpu=clocks.sm --format=csv,noheader 2>&1)"; }
if ls .gl/*.deb >/dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
  echo '{"file_format_version":"1.0.1","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"1.3.0"}}' > $W/icd.json
  export VK_ICD_FILENAMES=$W/icd.json VK_DRIVER_FILES=$W/icd.json KILN_VK_VALIDATION=0
fi
K="$B/kiln --plugins $B/plugins"
say "== machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $S
say "== ptx: every tensor-core and IR v1.2 module through ptxas (KILN_REQUIRE_CUDA=1)"
KILN_REQUIRE_CUDA=1 KILN_PTX_OUT=$W/ptx timeout 150 $B/ptx.test -test.run 'TensorCore|EveryModuleAssembles' -test.count=1 -test.v > $OUT/ptx-tests.txt 2>&1; say "ptx.test rc=$?"
grep -E '^(--- FAIL|FAIL|ok|PASS)' $OUT/ptx-tests.txt | head | tee -a $S
n=0; bad=0
for f in $W/ptx/*.ptx; do
  n=$((n+1)); tgt=$(grep -m1 -oE '^\.target sm_[0-9]+a?' "$f" | cut -d' ' -f2)
  case $tgt in sm_90a) archs=sm_90a ;; sm_70) archs="sm_90 sm_75" ;; *) archs="sm_90 $tgt" ;; esac
  for arch in $archs; do ptxas -arch=$arch "$f" -o $W/x.cubin 2>>$OUT/ptxas.txt || { bad=$((bad+1)); say "ptxas -arch=$arch rejects $f"; }; done
done
say "ptxas over $n emitted modules by their .target: $bad rejected; v1.2 ones: $(grep -l -E '\.f16|\.bf16|\.u16|kiln_matrix' $W/ptx/*.ptx | wc -l); wgmma (sm_90a): $(ls $W/ptx | grep -c 'sm_90a.ptx$')"
say "== backend tests on cuda:0: corpus (matmul_tc, vector_add_f16), IR v1.2, dynamic shared memory, conformance kit"
KILN_REQUIRE_CUDA=1 timeout 200 $B/backend.test -test.run 'Corpus|V12|DynamicShared|Conformance' -test.count=1 -test.v > $OUT/backend-tests.txt 2>&1; say "backend.test rc=$?"
grep -E -- '^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL' $OUT/backend-tests.txt | head -20 | tee -a $S
say "passed $(grep -c -- '--- PASS' $OUT/backend-tests.txt), failed $(grep -c -- '--- FAIL' $OUT/backend-tests.txt), skipped $(grep -c -- '--- SKIP' $OUT/backend-tests.txt)"
say "== warm-up and torch references (f16 add 256M, f32 add 256M, matmul bf16/f16/tf32 4096^3, bf16 8192^3)"
PYTHONUNBUFFERED=1 timeout 150 python3 - <<'PY' 2>&1 | tee $OUT/torch.txt | tee -a $S
import subprocess, time, torch
def clock(): return subprocess.run(["nvidia-smi","--query-gpu=clocks.sm","--format=csv,noheader"],capture_output=True,text=True).stdout.strip()
def best(f, reps=20):
    for _ in range(5): f()
    torch.cuda.synchronize(); s, e = torch.cuda.Event(True), torch.cuda.Event(True); t = 1e9
    for _ in range(reps):
        s.record(); f(); e.record(); torch.cuda.synchronize(); t = min(t, s.elapsed_time(e) / 1e3)
    return t
x = torch.randn(8192, 8192, device="cuda"); end = time.time() + 2
while time.time() < end: torch.matmul(x, x)
torch.cuda.synchronize(); print("after 2 s of warm-up: SM clock", clock()); del x
n = 256 << 20
for dt, name, size in [(torch.float16, "f16", 2), (torch.float32, "f32", 4)]:
    a = torch.rand(n, device="cuda").to(dt); b = torch.rand(n, device="cuda").to(dt); c = torch.empty_like(a)
    t = best(lambda: torch.add(a, b, out=c))
    print(f"torch.add {name} 256M: {t*1e3:.3f} ms, {3*size*n/t/1e9:.0f} GB/s (SM clock {clock()})"); del a, b, c
for name, dt, tf32, m in [("bf16", torch.bfloat16, False, 4096), ("f16", torch.float16, False, 4096), ("tf32", torch.float32, True, 4096), ("bf16", torch.bfloat16, False, 8192)]:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randint(-3, 4, (m, m), device="cuda").to(dt); b = torch.randint(-3, 4, (m, m), device="cuda").to(dt)
    t = best(lambda: torch.matmul(a, b))
    print(f"torch.matmul {name} {m}^3: {t*1e3:.3f} ms, {2*m**3/t/1e12:.0f} TFLOP/s (SM clock {clock()})")
PY
say "== matmul_tc through the backend (resident buffers, best of 10, checked at sampled elements)"
clock
timeout 200 $B/backend.test -test.run '^$' -test.bench 'MatmulTC' -test.benchtime 10x -test.v > $OUT/tc-bench.txt 2>&1; say "rc=$?"
grep -E '^Benchmark|FAIL|panic' $OUT/tc-bench.txt | tee -a $S
clock
for spec in "bf16 4096" "f16 4096" "tf32 4096" "bf16 8192"; do
  set -- $spec
  k=$(grep -E "^BenchmarkMatmulTC/$1/s=$2/" $OUT/tc-bench.txt | awk '{for(i=1;i<=NF;i++) if($(i+1)=="best-TFLOP/s") print $i, $1}' | sort -rn | head -1)
  tt=$(grep -E "^torch.matmul $1 $2\^3" $OUT/torch.txt | grep -oE '[0-9]+ TFLOP/s' | cut -d' ' -f1)
  [ -n "$k" ] && [ -n "$tt" ] && say "$1 $2^3: kiln best $(echo $k | cut -d' ' -f1) TFLOP/s ($(echo $k | cut -d' ' -f2)) = $(awk -v a=$(echo $k | cut -d' ' -f1) -v b=$tt 'BEGIN{printf "%.0f", 100*a/b}')% of torch $tt"
done
f=$(ls $W/ptx/matmul_tc.bf16.256x128x64*.sm_90a.ptx 2>/dev/null | head -1)
[ -n "$f" ] && ptxas -arch=sm_90a "$f" -o $W/win.cubin && say "HGMMA in the SASS of $(basename $f): $(cuobjdump --dump-sass $W/win.cubin | grep -c HGMMA)"
say "== kiln run --repeat (device time, GPU timestamps)"
for be in cuda vulkan; do
  clock
  timeout 60 $K run --kernel vector_add_f16 --size 268435456 --backend $be --repeat 20 2>&1 | tail -4 | sed "s/^/vector_add_f16 $be: /" | tee -a $S
  timeout 60 $K run --kernel vector_add --size 268435456 --backend $be --repeat 20 2>&1 | tail -4 | sed "s/^/vector_add f32 $be: /" | tee -a $S
done
timeout 60 $K run --kernel matmul_reg --size 4096 --backend cuda --repeat 20 --trace $OUT/matmul_reg.trace.json 2>&1 | tail -4 | sed "s/^/matmul_reg cuda: /" | tee -a $S
$K trace check $OUT/matmul_reg.trace.json 2>&1 | tee -a $S
$K trace summary --top 4 $OUT/matmul_reg.trace.json 2>&1 | head -24 | tee -a $S
timeout 60 $K run --kernel matmul_tc --spec type=bf16 --size 4096 --backend cuda --repeat 20 2>&1 | tail -4 | sed "s/^/matmul_tc bf16 default tile cuda: /" | tee -a $S
say "== load test on cuda (1-element dispatches, goroutines sharing one host)"
clock
timeout 60 $K bench --backend cuda --load --load-duration 2s 2>&1 | tail -7 | tee -a $S

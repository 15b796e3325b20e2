#!/bin/bash
# One H200 call for the round's GPU figures (issues 25, 27, 28), each kiln
# figure next to its reference measured in the same call, with the SM clock
# sampled every half second into $OUT/clock.txt and around each timed section:
#   1. the CUDA backend's tests on cuda:0 (corpus incl. matmul_tc and
#      vector_add_f16, IR v1.2 tables, tensor cores and their TMA staging,
#      pipelined submits and started dispatches, dynamic shared memory, the
#      conformance kit), then the Vulkan backend's (pipelined submits, the
#      cooperative-matrix paths KHR and NV, IR v1.2, the kit, the corpus)
#   2. every emitted module through ptxas (the ptx package's tests with
#      KILN_REQUIRE_CUDA=1), and every tensor-core module (plugins/cuda/ptx's dump, TMA and cp.async
#      twins) through ptxas for sm_90a (wgmma) and sm_80 (mma.sync), HGMMA and
#      UTMALDG in the SASS
#   3. matmul_tc through `kiln run --repeat` on cuda (tensor cores) and vulkan
#      (cooperative matrices: the KHR path, then KILN_VK_MATRIX_PATH=nv), each
#      between two torch.matmul timings on the same inputs; vector_add_f16 and
#      vector_add (f32) on both backends between torch.add timings
#   4. `kiln tune --kernel matmul_tc --spec type=bf16` on cuda, then the run that
#      applies the recorded tile
#   5. the load test and the plugin boundary's costs on cuda (kiln bench), this
#      tree's kiln and cuda plugin next to the session's base (old/: built from
#      the commit named in old/REV), alternated
# Budget: under 9 minutes.
#
# Prepare on the build machine, from the repository root:
#   D=.devbin/round; rm -rf $D; mkdir -p $D/bin/plugins $D/bin/old/plugins; L='-ldflags=-s -w'
#   go build "$L" -o $D/bin/kiln ./cmd/kiln
#   for p in cuda cpuref vulkan; do go build "$L" -o $D/bin/plugins/kiln-backend-$p ./plugins/$p; done
#   go test -c "$L" -o $D/bin/backend.test ./plugins/cuda/backend
#   go test -c "$L" -o $D/bin/vk-backend.test ./plugins/vulkan/backend
#   go test -c "$L" -o $D/bin/ptx.test ./plugins/cuda/ptx
#   mkdir -p $D/bin/tc; KILN_TC_PTX_DIR=$PWD/$D/bin/tc go test ./plugins/cuda/ptx -run '^TestTensorCorePTXDump$' -count=1
#   (in a worktree of the base commit) go build "$L" -o $D/bin/old/kiln ./cmd/kiln;
#     go build "$L" -o $D/bin/old/plugins/kiln-backend-cuda ./plugins/cuda; echo <commit> > $D/bin/old/REV
#   tar cJf $D/bin.txz -C $D bin && rm -r $D/bin
# plus the Vulkan loader .debs in .gl/. On the GPU machine, with OUT set:
#   bash scripts/gpu-round-run.sh
set -u
D=.devbin/round
W=/tmp/kiln-round
rm -rf $W && mkdir -p $W && tar xJf $D/bin.txz -C $W
B=$W/bin
export PATH=$PATH:/usr/local/cuda/bin
export XDG_CACHE_HOME=$W/xc XDG_CONFIG_HOME=$W/xcfg XDG_DATA_HOME=$W/xd
S=$OUT/summary.txt
say() { echo "$@" | tee -a $S; }
clock() { say "-- SM clock now: $(nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader 2>&1)"; }
if ls .gl/*.deb >/dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
  echo '{"file_format_version":"1.0.1","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"1.3.0"}}' > $W/icd.json
  export VK_ICD_FILENAMES=$W/icd.json VK_DRIVER_FILES=$W/icd.json KILN_VK_VALIDATION=0
fi
K="$B/kiln --plugins $B/plugins"
say "== machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $S
say "cores $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"
(while sleep 0.5; do nvidia-smi --query-gpu=clocks.sm --format=csv,noheader; done > $OUT/clock.txt 2>&1) &
CLK=$!

say "== 1. backend tests on cuda:0"
KILN_REQUIRE_CUDA=1 timeout 170 $B/backend.test -test.run 'Corpus|V12|TensorCore|TMA|TensorMap|Pipelined|DynamicShared|Conformance|Started' -test.count=1 -test.v > $OUT/backend-tests.txt 2>&1; say "backend.test rc=$?"
grep -E -- '^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL' $OUT/backend-tests.txt | head -20 | tee -a $S
say "passed $(grep -c -- '--- PASS' $OUT/backend-tests.txt), failed $(grep -c -- '--- FAIL' $OUT/backend-tests.txt), skipped $(grep -c -- '--- SKIP' $OUT/backend-tests.txt)"
grep -E -- '--- (PASS|FAIL|SKIP): (TestStarted|TestTMA|TestTensorMap)' $OUT/backend-tests.txt | tee -a $S
say "== 1b. Vulkan backend tests on the H200 (KHR path, then the NV path's matrices)"
KILN_REQUIRE_VULKAN=1 timeout 150 $B/vk-backend.test -test.run 'Pipelined|Coop|V12|Conformance|Corpus|PluginProcess' -test.count=1 -test.v > $OUT/vk-tests.txt 2>&1; say "vk-backend.test rc=$?"
grep -E -- '^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL' $OUT/vk-tests.txt | head -12 | tee -a $S
say "passed $(grep -c -- '--- PASS' $OUT/vk-tests.txt), failed $(grep -c -- '--- FAIL' $OUT/vk-tests.txt), skipped $(grep -c -- '--- SKIP' $OUT/vk-tests.txt)"
KILN_VK_MATRIX_PATH=nv KILN_REQUIRE_VULKAN=1 timeout 90 $B/vk-backend.test -test.run 'TestCoopMatmul|TestV12' -test.count=1 -test.v > $OUT/vk-tests-nv.txt 2>&1; say "NV path: rc=$? passed $(grep -c -- '--- PASS' $OUT/vk-tests-nv.txt), failed $(grep -c -- '--- FAIL' $OUT/vk-tests-nv.txt)"

say "== 2. tensor-core modules through ptxas"
n=0; bad=0; : > $OUT/ptxas.txt
for f in $B/tc/tc_*.ptx; do
  b=$(basename $f .ptx); archs="sm_90a sm_80"; case $b in tc_wg*) archs=sm_90a ;; esac
  for arch in $archs; do
    n=$((n+1))
    if ptxas -arch=$arch -v $f -o $W/$b.$arch.cubin > $W/$b.$arch.log 2>&1; then
      echo "$b $arch ok: $(grep -o 'Used [0-9]* registers' $W/$b.$arch.log | head -1), HGMMA $(cuobjdump --dump-sass $W/$b.$arch.cubin | grep -c HGMMA), UTMALDG $(cuobjdump --dump-sass $W/$b.$arch.cubin | grep -c UTMALDG), HMMA $(cuobjdump --dump-sass $W/$b.$arch.cubin | grep -c 'HMMA'), LDL/STL $(cuobjdump --dump-sass $W/$b.$arch.cubin | grep -cE 'LDL|STL')" >> $OUT/ptxas.txt
    else bad=$((bad+1)); echo "$b $arch REJECTED: $(head -3 $W/$b.$arch.log | tr '\n' ' ')" >> $OUT/ptxas.txt; fi
  done
done
say "ptxas: $n module/arch pairs, $bad rejected"; grep -E 'wg|REJECTED' $OUT/ptxas.txt | head -8 | tee -a $S

say "== 2b. every emitted module through ptxas (plugins/cuda/ptx's tests with KILN_REQUIRE_CUDA=1: corpus, edge table, IR v1.2, tensor cores; sm_90a/sm_90/sm_80/sm_75 by .target)"
mkdir -p $W/ptx
(cd plugins/cuda/ptx && KILN_REQUIRE_CUDA=1 KILN_PTX_OUT=$W/ptx timeout 240 $B/ptx.test -test.run 'EveryModuleAssembles|TensorCore|TMA' -test.count=1 -test.parallel 16 > $OUT/ptx-tests.txt 2>&1); say "ptx.test rc=$?"
grep -E -- '^(--- FAIL|FAIL|ok|PASS)' $OUT/ptx-tests.txt | head -8 | tee -a $S
say "modules assembled: $(ls $W/ptx/*.cubin 2>/dev/null | wc -l) cubins from $(ls $W/ptx/*.ptx 2>/dev/null | wc -l) modules ($(grep -l 'cp.async.bulk.tensor' $W/ptx/*.ptx 2>/dev/null | wc -l) with TMA, $(ls $W/ptx | grep -c 'sm_90a.ptx$') sm_90a)"

say "== 3. kiln run --repeat next to torch (same inputs, same call)"
PYTHONUNBUFFERED=1 KB=$B timeout 260 python3 - <<'PY' 2>&1 | tee $OUT/kiln-vs-torch.txt | tee -a $S
import os, statistics, subprocess, time, torch
kb = os.environ["KB"]
def clock():
    return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
def ttime(f, warm=0.3, n=20):
    end = time.time() + warm
    while time.time() < end: f()
    torch.cuda.synchronize(); ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        s.record(); f(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    return statistics.median(ts) / 1e3
def kiln(args, env=None):
    r = subprocess.run([f"{kb}/kiln", "--plugins", f"{kb}/plugins", "run", "--repeat", "20"] + args, capture_output=True, text=True, timeout=90, env=dict(os.environ, **(env or {})))
    t = None
    for l in r.stdout.splitlines():
        if l.strip().startswith("device") and "median" in l:
            v = l.split("median")[1].split(",")[0].strip()
            t = float(v[:-2]) / 1e6 if v.endswith("µs") else float(v[:-2]) / 1e3 if v.endswith("ms") else None
    if t is None:
        print("   kiln failed:", r.returncode, (r.stdout + r.stderr)[-600:])
    return t, r.stdout
x = torch.randn(8192, 8192, device="cuda"); end = time.time() + 2
while time.time() < end: torch.matmul(x, x)
torch.cuda.synchronize(); print("after 2 s of warm-up: SM clock", clock()); del x
DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
rows = []
mm = [("cuda", "bf16", 128, 256, 64, 4096), ("cuda", "f16", 128, 256, 64, 4096), ("cuda", "tf32", 256, 128, 32, 4096),
      ("cuda", "bf16", 128, 256, 64, 8192), ("cuda", "bf16", 0, 0, 0, 4096),
      ("vulkan", "bf16", 128, 256, 32, 4096), ("vulkan", "f16", 128, 128, 64, 4096), ("vulkan", "bf16", 0, 0, 0, 4096),
      ("vulkan-nv", "bf16", 128, 256, 32, 4096), ("vulkan-nv", "f16", 128, 128, 64, 4096)]
for be, ty, tm, tn, tk, n in mm:
    env = {"KILN_VK_MATRIX_PATH": "nv"} if be == "vulkan-nv" else None
    dt = DT["f32" if ty == "tf32" else ty]; torch.backends.cuda.matmul.allow_tf32 = ty == "tf32"
    a = torch.randint(-3, 4, (n, n), device="cuda").to(dt); b = torch.randint(-3, 4, (n, n), device="cuda").to(dt)
    args = ["--kernel", "matmul_tc", "--spec", "type=" + ("f32" if ty == "tf32" else ty), "--size", str(n), "--backend", be.split("-")[0]]
    if ty == "tf32": args += ["--spec", "tf32=true"]
    if tm: args += ["--spec", f"tm={tm}", "--spec", f"tn={tn}", "--spec", f"tk={tk}"]
    t0 = ttime(lambda: a @ b); c0 = clock()
    kt, out = kiln(args, env); ck = clock()
    t1 = ttime(lambda: a @ b); c1 = clock()
    tile = f"{tm}x{tn}x{tk}" if tm else "default tile"
    fl = 2 * n ** 3; tt = statistics.median([t0, t1])
    if kt:
        rows.append(f"matmul_tc {be} {ty} {n}^3 {tile}: kiln {fl/kt/1e12:.1f} TFLOP/s (SM {ck}), torch {fl/tt/1e12:.1f} (SM {c0} / {c1}) -> {100*tt/kt:.0f}%")
        print(rows[-1])
    del a, b
N = 256 << 20
for dt, ty, k in [(torch.float16, "f16", "vector_add_f16"), (torch.float32, "f32", "vector_add")]:
    a = torch.rand(N, device="cuda").to(dt); b = torch.rand(N, device="cuda").to(dt); c = torch.empty_like(a)
    by = 3 * N * a.element_size()
    for be in ("cuda", "vulkan"):
        t0 = ttime(lambda: torch.add(a, b, out=c)); c0 = clock()
        kt, out = kiln(["--kernel", k, "--size", str(N), "--backend", be]); ck = clock()
        t1 = ttime(lambda: torch.add(a, b, out=c))
        tt = statistics.median([t0, t1])
        if kt:
            rows.append(f"{k} {be} 256M: kiln {by/kt/1e9:.0f} GB/s (SM {ck}), torch.add {ty} {by/tt/1e9:.0f} GB/s (SM {c0}) -> {100*tt/kt:.0f}%")
            print(rows[-1])
    del a, b, c
print("== summary of section 3"); [print(r) for r in rows]
PY

say "== 4. kiln tune matmul_tc bf16 on cuda, then the run that applies the record"
clock
timeout 120 $K tune --kernel matmul_tc --spec type=bf16 --backend cuda --size 4096 --runs 3 > $OUT/tune.txt 2>&1; say "tune rc=$?"
tail -12 $OUT/tune.txt | tee -a $S
timeout 60 $K run --kernel matmul_tc --spec type=bf16 --size 4096 --backend cuda --repeat 20 2>&1 | tail -9 | sed 's/^/after tune: /' | tee -a $S

say "== 5. load test and boundary costs on cuda: this tree (new) and the base $(cat $B/old/REV) (old), alternated"
OK="$B/old/kiln --plugins $B/old/plugins"
for round in 1 2; do
  for which in new old; do
    if [ $which = new ]; then KK=$K; else KK=$OK; fi
    clock
    say "-- $which, round $round: kiln bench --backend cuda --load --load-duration 2s"
    timeout 60 $KK bench --backend cuda --load --load-duration 2s 2>&1 | tail -6 | tee -a $S
    timeout 90 $KK bench --backend cuda --mib 64 > $OUT/bench-$which-$round.txt 2>&1; say "-- $which, round $round: kiln bench --backend cuda --mib 64 rc=$?"
    grep -i -E 'round trip|submit|1-element' $OUT/bench-$which-$round.txt | head -6 | tee -a $S
  done
done
kill $CLK
python3 - "$OUT" <<'PY' 2>&1 | tee -a $S
import statistics, sys
out = sys.argv[1]
clocks = [int(c.split()[0]) for c in open(f"{out}/clock.txt") if c.split() and c.split()[0].isdigit()]
if clocks:
    print(f"SM clock over the call: {min(clocks)}-{max(clocks)} MHz, median {statistics.median(clocks)} ({len(clocks)} samples)")
PY

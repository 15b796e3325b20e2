#!/bin/bash
# One H200 call for issue 25's load-test target (`kiln bench --backend cuda
# --load`) with the figures kept next to it: the CUDA backend's pipelined
# dispatch tests, BenchmarkStartDispatch (the backend's side alone, with a CPU
# profile), the 1-element resident
# submit (kiln bench --mib 64), and vector_add on cuda between two torch.add
# timings, the SM clock sampled every half second into $OUT/clock.txt.
#
# Prepare on the build machine, from the repository root:
#   D=.devbin/load; rm -rf $D; mkdir -p $D/bin/plugins; L='-ldflags=-s -w'
#   go build "$L" -o $D/bin/kiln ./cmd/kiln
#   go build "$L" -o $D/bin/plugins/kiln-backend-cuda ./plugins/cuda
#   go test -c "$L" -o $D/bin/backend.test ./plugins/cuda/backend
#   cp scripts/gpu-load-run.sh $D/ && tar cJf $D/bin.txz -C $D bin && rm -r $D/bin
# On the GPU machine, with OUT set: bash .devbin/load/gpu-load-run.sh
set -u
D=.devbin/load
W=/tmp/kiln-load
rm -rf $W && mkdir -p $W
tar xJf $D/bin.txz -C $W || { echo "unpacking failed (xz: $(command -v xz))"; exit 1; }
B=$W/bin
export XDG_CACHE_HOME=$W/xc XDG_CONFIG_HOME=$W/xcfg XDG_DATA_HOME=$W/xd
S=$OUT/summary.txt
say() { echo "$@" | tee -a $S; }
clock() { say "-- SM clock now: $(nvidia-smi --query-gpu=clocks.sm --format=csv,noheader 2>&1)"; }
K="$B/kiln --plugins $B/plugins"
say "== machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $S
say "cores $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"
(while sleep 0.5; do nvidia-smi --query-gpu=clocks.sm --format=csv,noheader; done > $OUT/clock.txt 2>&1) &
CLK=$!
python3 -c "
import time, torch
x = torch.randn(8192, 8192, device='cuda'); end = time.time() + 2
while time.time() < end: torch.matmul(x, x)
torch.cuda.synchronize()"
clock

say "== 1. pipelined dispatch tests on cuda:0"
KILN_REQUIRE_CUDA=1 timeout 30 $B/backend.test -test.run 'Pipelined|Started' -test.count=1 -test.v > $OUT/tests.txt 2>&1; say "backend.test rc=$?"
grep -E -- '^(--- |FAIL|ok|PASS)' $OUT/tests.txt | head -12 | tee -a $S

say "== 2. the load test"
clock
timeout 60 $K bench --backend cuda --load --load-duration 2s 2>&1 | tail -7 | tee -a $S
clock

say "== 3. backend alone: started 1-element dispatches"
timeout 30 $B/backend.test -test.run XXX -test.bench 'BenchmarkStartDispatch$' -test.benchtime 1s -test.cpuprofile $OUT/start.prof 2>&1 | grep -E '^Benchmark|FAIL' | tee -a $S

say "== 4. boundary costs (1-element resident submit)"
timeout 90 $K bench --backend cuda --mib 64 > $OUT/bench.txt 2>&1; say "bench rc=$?"
grep -i -E 'round trip|submit|1-element' $OUT/bench.txt | head -12 | tee -a $S

say "== 5. vector_add on cuda between torch.add timings"
PYTHONUNBUFFERED=1 KB=$B timeout 120 python3 - <<'PY' 2>&1 | tee -a $S
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
def kiln(args):
    r = subprocess.run([f"{kb}/kiln", "--plugins", f"{kb}/plugins", "run", "--repeat", "20"] + args, capture_output=True, text=True, timeout=90)
    t = None
    for l in r.stdout.splitlines():
        if l.strip().startswith("device") and "median" in l:
            v = l.split("median")[1].split(",")[0].strip()
            t = float(v[:-2]) / 1e6 if v.endswith("µs") else float(v[:-2]) / 1e3 if v.endswith("ms") else None
    if t is None:
        print("   kiln failed:", r.returncode, (r.stdout + r.stderr)[-600:])
    return t
N = 256 << 20
a = torch.rand(N, device="cuda"); b = torch.rand(N, device="cuda"); c = torch.empty_like(a)
by = 3 * N * 4
t0 = ttime(lambda: torch.add(a, b, out=c)); c0 = clock()
kt = kiln(["--kernel", "vector_add", "--size", str(N), "--backend", "cuda"]); ck = clock()
t1 = ttime(lambda: torch.add(a, b, out=c))
tt = statistics.median([t0, t1])
if kt:
    print(f"vector_add cuda 256M f32: kiln {by/kt/1e9:.0f} GB/s (SM {ck}), torch.add {by/tt/1e9:.0f} GB/s (SM {c0}; {by/t0/1e9:.0f} before, {by/t1/1e9:.0f} after) -> {100*tt/kt:.0f}%")
PY
kill $CLK
python3 - "$OUT" <<'PY' 2>&1 | tee -a $S
import statistics, sys
clocks = [int(c.split()[0]) for c in open(f"{sys.argv[1]}/clock.txt") if c.split() and c.split()[0].isdigit()]
if clocks:
    print(f"SM clock over the call: {min(clocks)}-{max(clocks)} MHz, median {statistics.median(clocks)} ({len(clocks)} samples)")
PY

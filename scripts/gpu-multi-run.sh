#!/bin/bash
# The multi-GPU experiment (issue: multi-GPU run) on a machine with 2+ NVIDIA
# GPUs: every GPU an adapter of cuda and vulkan with distinct fingerprints, the
# corpus and the conformance kit on every adapter (N of them, all at once), `kiln run --backend cuda:1`
# checked by the UUID of the GPU its memory lands on, concurrent vector adds on
# all GPUs (and on the first 2 when there are more) from one application
# (examples/multigpu) against each GPU alone, PyTorch's figure for the same work, a
# 1 GiB cuda:0 -> cuda:1 copy (host.CopyBuffer) against PyTorch's y.copy_(x), a
# SIGKILLed plugin losing only its own adapters' work, and a tuning record
# following its GPU when CUDA_VISIBLE_DEVICES reorders them.
#
# Prepare on the build machine, from the repository root:
#   D=.devbin/multi; rm -rf $D; mkdir -p $D/bin/plugins; L='-ldflags=-s -w'
#   go build "$L" -o $D/bin/kiln ./cmd/kiln
#   go build "$L" -o $D/bin/multigpu ./examples/multigpu
#   for p in cuda cpuref vulkan; do go build "$L" -o $D/bin/plugins/kiln-backend-$p ./plugins/$p; done
#   go test -c "$L" -o $D/bin/cuda-backend.test ./plugins/cuda/backend
#   go test -c "$L" -o $D/bin/vk-backend.test ./plugins/vulkan/backend
#   tar cJf $D/bin.txz -C $D bin && rm -r $D/bin && cp scripts/gpu-multi-run.sh $D/
# plus the Vulkan loader .debs in .gl/. On the GPU machine, with OUT set:
#   bash .devbin/multi/gpu-multi-run.sh
set -u
D=.devbin/multi
W=/tmp/kiln-multi
rm -rf $W && mkdir -p $W && tar xJf $D/bin.txz -C $W
B=$W/bin
export XDG_CACHE_HOME=$W/xc XDG_CONFIG_HOME=$W/xcfg XDG_DATA_HOME=$W/xd
S=$OUT/multi-summary.txt
say() { echo "$@" | tee -a $S; }
if ls .gl/*.deb >/dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
  echo '{"file_format_version":"1.0.1","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"1.3.0"}}' > $W/icd.json
  export VK_ICD_FILENAMES=$W/icd.json VK_DRIVER_FILES=$W/icd.json KILN_VK_VALIDATION=0
fi
K="$B/kiln --plugins $B/plugins"
say "== machine"; nvidia-smi -L | tee -a $S
nvidia-smi --query-gpu=index,name,uuid,clocks.sm,clocks.max.sm --format=csv | tee -a $S
say "== kiln backends"; timeout 120 $K backends 2>&1 | tee -a $S
timeout 120 $K backends --json > $OUT/backends.json 2>&1
python3 - $OUT/backends.json <<'PY' | tee -a $S
import json,sys
rows=[r for r in json.load(open(sys.argv[1])) if r.get("fingerprint")]
for r in rows: print(f'{r["name"]:10} instance={r.get("instance","")} fingerprint={r["fingerprint"]} preferred={r["preferred"]}')
for b in ("cuda","vulkan"):
    fp=[r["fingerprint"] for r in rows if r["id"]==b]
    print(f'{b}: {len(fp)} adapters, distinct fingerprints: {len(set(fp))==len(fp)}')
PY
N=$(nvidia-smi -L | wc -l)
say "== kiln run --all on every adapter (N=$N GPUs; each backend's adapters at once, one process each)"
for be in cuda vulkan; do
  for i in $(seq 0 $((N-1))); do
    ( timeout 300 $K run --all --backend $be:$i > $OUT/run-all-$be-$i.txt 2>&1; echo "rc=$?" >> $OUT/run-all-$be-$i.txt ) &
  done
  wait
  for i in $(seq 0 $((N-1))); do
    say "-- $be:$i: $(grep -cE " yes +[0-9]" $OUT/run-all-$be-$i.txt) kernels verified, $(tail -1 $OUT/run-all-$be-$i.txt)"
    grep -iE 'fail|mismatch|error' $OUT/run-all-$be-$i.txt | head -3 | tee -a $S
  done
done
say "== kiln run --backend cuda:1: the GPU its memory lands on"
UUID1=$(python3 -c "import json;print([r['instance'] for r in json.load(open('$OUT/backends.json')) if r.get('name')=='cuda:1'][0])")
say "cuda:1 reports instance $UUID1"
( for i in 1 2 3 4 5 6; do timeout 60 $K run --kernel vector_add --size 400000000 --backend cuda:1 >/dev/null 2>&1; done ) &
RUNNER=$!
for i in $(seq 1 40); do nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader >> $OUT/apps.txt 2>&1; sleep 0.5; done
wait $RUNNER
say "GPUs holding > 1 GiB for kiln during the runs:"; awk -F', ' '{split($3,m," "); if (m[1]+0 > 1024) print $2}' $OUT/apps.txt | sort | uniq -c | tee -a $S
say "== conformance kit on every adapter (cuda and vulkan test binaries at once)"
KILN_REQUIRE_CUDA=1 timeout 500 $B/cuda-backend.test -test.run '^(TestConformance|TestConformanceOnEveryAdapter)$' -test.count=1 -test.v > $OUT/cuda-kit.txt 2>&1 &
CK=$!
KILN_REQUIRE_VULKAN=1 timeout 500 $B/vk-backend.test -test.run '^(TestConformance|TestConformanceOnEveryAdapter)$' -test.count=1 -test.v > $OUT/vk-kit.txt 2>&1 &
VK=$!
wait $CK; CR=$?; wait $VK; VR=$?
say "cuda kit: rc=$CR passed $(grep -c -- '--- PASS' $OUT/cuda-kit.txt) failed $(grep -c -- '--- FAIL' $OUT/cuda-kit.txt)"
grep -E '^(--- |ok|FAIL)|^    --- (FAIL|PASS): TestConformanceOnEveryAdapter' $OUT/cuda-kit.txt | head -12 | tee -a $S
say "vulkan kit: rc=$VR passed $(grep -c -- '--- PASS' $OUT/vk-kit.txt) failed $(grep -c -- '--- FAIL' $OUT/vk-kit.txt)"
grep -E '^(--- |ok|FAIL)|^    --- (FAIL|PASS): TestConformanceOnEveryAdapter' $OUT/vk-kit.txt | head -12 | tee -a $S
say "== all GPUs at once (clocks sampled into multi-clocks.txt)"
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem --format=csv,noheader -lms 500 > $OUT/multi-clocks.txt 2>&1 &
SMI=$!
for be in cuda vulkan; do
  say "-- $be, all $N GPUs"; timeout 200 $B/multigpu -plugins $B/plugins -backend $be -mib 1024 -reps 40 2>&1 | tee -a $S
  if [ "$N" -gt 2 ]; then
    say "-- $be, the first 2 GPUs"; timeout 200 $B/multigpu -plugins $B/plugins -backend $be -adapters 2 -mib 1024 -reps 40 2>&1 | tee -a $S
  fi
done
say "-- PyTorch, the same work (3 x 1 GiB f32 per GPU, 40 torch.add(x, y, out=o)), each GPU alone then all at once (a thread per GPU)"
PYTHONUNBUFFERED=1 timeout 200 python3 - <<'PY' 2>&1 | tee -a $S
import threading, time
try:
    import torch
except Exception as e:
    print("torch reference skipped:", e); raise SystemExit(0)
n = (1 << 30) // 4
g = torch.cuda.device_count()
bufs = []
for d in range(g):
    x = torch.arange(n, device=f'cuda:{d}', dtype=torch.float32).remainder_(1024)
    bufs.append((x, torch.ones_like(x), torch.empty_like(x)))
def work(d, reps=40):
    x, y, o = bufs[d]
    with torch.cuda.device(d):
        for _ in range(reps): torch.add(x, y, out=o)
        torch.cuda.synchronize(d)
for d in range(g): work(d, 5)
def timed(devs):
    ts = [threading.Thread(target=work, args=(d,)) for d in devs]
    s = time.perf_counter()
    for t in ts: t.start()
    for t in ts: t.join()
    return time.perf_counter() - s
per = 40 * 12 * n
for sub in ([list(range(2))] if g > 2 else []) + [list(range(g))]:
    alone = [per / timed([d]) / 1e9 for d in sub]
    together = len(sub) * per / timed(sub) / 1e9
    print(f"torch {len(sub)} GPUs: alone " + ", ".join(f"{a:.0f}" for a in alone) + f" GB/s; at once {together:.0f} GB/s = {100*together/sum(alone):.1f}% of the sum alone ({together/alone[0]:.2f}x one GPU)")
PY
kill $SMI
say "SM clocks during the runs (MHz: samples):"; awk -F', ' '{print "gpu" $1 " " $2}' $OUT/multi-clocks.txt | sort | uniq -c | sort -rn | head -6 | tee -a $S
say "== GPU-to-GPU copy: 1 GiB cuda:0 -> cuda:1 with host.CopyBuffer, next to PyTorch's y.copy_(x)"
nvidia-smi topo -m 2>&1 | head -12 | tee -a $S
KILN_REQUIRE_CUDA=1 timeout 300 $B/cuda-backend.test -test.run '^TestPeerCopy$' -test.count=1 -test.v > $OUT/peer-test.txt 2>&1
say "TestPeerCopy (direct and staged, both ways): rc=$? $(grep -E '^(--- |ok|FAIL)' $OUT/peer-test.txt | tr '\n' ' ')"
timeout 300 $B/multigpu -plugins $B/plugins -copy cuda:0,cuda:1 -mib 1024 -reps 20 > $OUT/copy-kiln.txt 2>&1; say "multigpu -copy rc=$?"
tee -a $S < $OUT/copy-kiln.txt
PYTHONUNBUFFERED=1 timeout 300 python3 - $OUT/copy-kiln.txt <<'PY' 2>&1 | tee -a $S
import re, sys, time
try:
    import torch
except Exception as e:
    print("torch reference skipped: cannot import torch:", e); sys.exit(0)
if torch.cuda.device_count() < 2:
    print("torch reference skipped: fewer than 2 GPUs"); sys.exit(0)
print("torch peer access 0->1:", torch.cuda.can_device_access_peer(0, 1), "1->0:", torch.cuda.can_device_access_peer(1, 0))
n = 1 << 30
res = {}
for a, b in ((0, 1), (1, 0)):
    x = torch.randint(0, 256, (n,), dtype=torch.uint8, device=f'cuda:{a}')
    y = torch.empty(n, dtype=torch.uint8, device=f'cuda:{b}')
    def once():
        s = time.perf_counter(); y.copy_(x); torch.cuda.synchronize(a); torch.cuda.synchronize(b); return time.perf_counter() - s
    for _ in range(3): once()
    assert torch.equal(y.cpu(), x.cpu())
    ts = sorted(once() for _ in range(20))
    res[(a, b)] = n / ts[len(ts) // 2] / 1e9
    print(f"torch y.copy_(x) cuda:{a} -> cuda:{b}: 1024 MiB, median of 20: {ts[len(ts)//2]*1e3:.3f} ms, {res[(a, b)]:.1f} GB/s (best {n / ts[0] / 1e9:.1f} GB/s)")
    del x, y; torch.cuda.empty_cache()
for line in open(sys.argv[1]):
    m = re.match(r"copy cuda:(\d) -> cuda:(\d): .* ([0-9.]+) GB/s \(best", line)
    if m and (int(m[1]), int(m[2])) in res:
        k = (int(m[1]), int(m[2]))
        print(f"kiln/torch cuda:{k[0]} -> cuda:{k[1]}: {float(m[3]) / res[k] * 100:.1f}% (target >= 90%)")
PY
say "== SIGKILL of the cuda plugin while cuda and vulkan run"
timeout 120 $B/multigpu -plugins $B/plugins -backend cuda,vulkan -kill cuda -mib 64 -window 4s 2>&1 | tee -a $S
say "== a tuning record follows its GPU under CUDA_VISIBLE_DEVICES=1,0"
if timeout 200 $K tune --kernel vector_add --backend cuda:1 --budget 20s --noise-guard=false > $OUT/tune.txt 2>&1; then
  tail -5 $OUT/tune.txt | tee -a $S
  for a in cuda:0 cuda:1; do
    say "CUDA_VISIBLE_DEVICES=1,0 $a: $(CUDA_VISIBLE_DEVICES=1,0 timeout 60 $K --json run --kernel vector_add --size 1000000 --backend $a 2>&1 | python3 -c 'import json,sys; j=json.load(sys.stdin); print("tuned", j["tuned"], "workgroup", j["workgroup_size"])')"
  done
  say "CUDA_VISIBLE_DEVICES=1,0 backends: $(CUDA_VISIBLE_DEVICES=1,0 timeout 60 $K backends --json | python3 -c 'import json,sys; print([(r["name"], r.get("instance")) for r in json.load(sys.stdin) if r["id"]=="cuda"])')"
else
  say "kiln tune failed or is missing:"; tail -3 $OUT/tune.txt | tee -a $S
fi

#!/bin/bash
# One H200 call for issue 24's start figures: a kiln Acquire of cuda and of
# vulkan (fresh host, plugin start + handshake + Describe + the adapter's Open;
# internal/startbench) next to the driver-level references measured in the
# same run, one process each (scripts/gpu-start-ref.py: cuInit + primary
# context retain + stream creation; vkCreateInstance + vkCreateDevice),
# interleaved round by round, medians, with the SM clock sampled throughout.
# Budget: well under a minute.
#
# Prepare on the build machine, from the repository root:
#   D=.devbin/start24; rm -rf $D; mkdir -p $D/bin; L='-ldflags=-s -w'
#   go build "$L" -o $D/bin/startbench ./internal/startbench
#   for p in cuda vulkan; do go build "$L" -o $D/bin/kiln-backend-$p ./plugins/$p; done
#   cp scripts/gpu-start-ref.py $D/bin/ && cp scripts/gpu-start-run.sh $D/
#   tar czf $D/bin.tgz -C $D bin && rm -r $D/bin
# plus the Vulkan loader .debs in .gl/. On the GPU machine, with OUT set:
#   bash .devbin/start24/gpu-start-run.sh [rounds, default 7]
set -u
D=.devbin/start24
N=${1:-7}
W=/tmp/kiln-start
rm -rf $W && mkdir -p $W && tar xzf $D/bin.tgz -C $W
B=$W/bin
export XDG_CACHE_HOME=$W/xc XDG_CONFIG_HOME=$W/xcfg XDG_DATA_HOME=$W/xd
S=$OUT/summary.txt
say() { echo "$@" | tee -a $S; }
if ls .gl/*.deb >/dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
  echo '{"file_format_version":"1.0.1","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"1.3.0"}}' > $W/icd.json
  export VK_ICD_FILENAMES=$W/icd.json VK_DRIVER_FILES=$W/icd.json KILN_VK_VALIDATION=0
fi
say "== machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $S
say "cores $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"
(while sleep 0.5; do nvidia-smi --query-gpu=clocks.sm --format=csv,noheader; done > $OUT/clock.txt 2>&1) &
CLK=$!
bench() { timeout 60 $B/startbench -plugin $B/kiln-backend-$1 -backend $1 -n 1 -log; }
say "== warm-up (one of each, not counted: the first load of the driver libraries)"
for api in cuda vulkan; do
  timeout 60 python3 $B/gpu-start-ref.py $api 2>&1 | tee -a $S
  bench $api 2>$OUT/warmup-$api.log | tee -a $S
done
say "== $N rounds, interleaved"
for i in $(seq $N); do
  for api in cuda vulkan; do
    timeout 60 python3 $B/gpu-start-ref.py $api >> $OUT/ref-$api.jsonl 2>>$OUT/ref-$api.err
    bench $api >> $OUT/kiln-$api.txt 2>>$OUT/kiln-$api.log
  done
done
kill $CLK
python3 - "$OUT" <<'PY' 2>&1 | tee -a $S
import json, re, statistics, sys
out = sys.argv[1]
med = lambda xs: statistics.median(xs) if xs else float("nan")
for api, parts in [("cuda", ["dlopen_ms", "init_ms", "retain_ms", "stream_ms"]), ("vulkan", ["dlopen_ms", "instance_ms", "enumerate_ms", "device_ms"])]:
    refs = [json.loads(l) for l in open(f"{out}/ref-{api}.jsonl") if l.startswith("{")]
    runs = [re.search(r"acquire ([\d.]+) ms \(plugin start\+handshake\+describe ([\d.]+) ms, the rest ([\d.]+) ms", l) for l in open(f"{out}/kiln-{api}.txt")]
    runs = [[float(x) for x in m.groups()] for m in runs if m]
    ref = med([r["reference_ms"] for r in refs])
    acq = med([r[0] for r in runs])
    print(f"{api}: reference median {ref:.1f} ms of {len(refs)} (" + ", ".join(f"{p} {med([r[p] for r in refs]):.1f}" for p in parts) + ")")
    print(f"{api}: kiln Acquire median {acq:.1f} ms of {len(runs)} (start+handshake+describe {med([r[1] for r in runs]):.1f}, open and the rest {med([r[2] for r in runs]):.1f}); kiln/reference {acq/ref:.2f}")
    print(f"{api}: all acquires {[r[0] for r in runs]}; all references {[r['reference_ms'] for r in refs]}")
clocks = [int(c.split()[0]) for c in open(f"{out}/clock.txt") if c.split() and c.split()[0].isdigit()]
if clocks:
    print(f"SM clock during the rounds: {min(clocks)}-{max(clocks)} MHz ({len(clocks)} samples)")
PY
grep -h -E "CUDA started|Vulkan started|bandwidth" $OUT/kiln-*.log | head -6 | cut -c1-400 | tee -a $S

#!/bin/bash
# One H200 call for issue 25's load-test target (`kiln bench --backend cuda
# --load`) with the figures kept next to it, for the plugin built from this
# tree and, when the bundle has them, a base plugin to compare (A/B in one
# call) and an alternative build (alt, its plugin only): the CUDA backend's started-dispatch tests, the driver's launch cost
# (BenchmarkLaunchCost), the load test with each plugin, BenchmarkStartDispatch
# (the backend's side alone, with a CPU profile) and the 1-element resident
# submit (kiln bench --mib 64) with each; the SM clock sampled every half
# second into $OUT/clock.txt.
#
# Prepare on the build machine, from the repository root (D is the bundle's
# folder; BASE, optional, a checkout of the commit to compare with):
#   D=.devbin/load; rm -rf $D; mkdir -p $D/bin/plugins; L='-ldflags=-s -w'
#   go build "$L" -o $D/bin/kiln ./cmd/kiln
#   go build "$L" -o $D/bin/plugins/kiln-backend-cuda ./plugins/cuda
#   go test -c "$L" -o $D/bin/backend.test ./plugins/cuda/backend
#   go test -c "$L" -o $D/bin/driver.test ./plugins/cuda/driver
#   (cd $BASE && go build "$L" -o $OLDPWD/$D/bin/base/plugins/kiln-backend-cuda ./plugins/cuda &&
#     go test -c "$L" -o $OLDPWD/$D/bin/base/backend.test ./plugins/cuda/backend)
#   (an alt build as the base one, its plugin into $D/bin/alt/plugins)
#   cp scripts/gpu-load-run.sh $D/ && tar cf - -C $D bin | xz -9 -T2 > $D/bin.txz && rm -r $D/bin
# On the GPU machine, with OUT set: bash $D/gpu-load-run.sh
set -u
D=$(dirname "$0")
W=/tmp/kiln-load
rm -rf $W && mkdir -p $W
tar xJf $D/bin.txz -C $W || { echo "unpacking failed (xz: $(command -v xz))"; exit 1; }
B=$W/bin
export XDG_CACHE_HOME=$W/xc XDG_CONFIG_HOME=$W/xcfg XDG_DATA_HOME=$W/xd
S=$OUT/summary.txt
say() { echo "$@" | tee -a $S; }
clock() { say "-- SM clock now: $(nvidia-smi --query-gpu=clocks.sm --format=csv,noheader 2>&1)"; }
# The builds to run: the base's when the bundle has one, this tree's, and the
# alternative's when it has one.
builds="new"
[ -d $B/base/plugins ] && builds="base new"
[ -d $B/alt/plugins ] && builds="$builds alt"
plugins() { if [ $1 = new ]; then echo $B/plugins; else echo $B/$1/plugins; fi; }
tests() { if [ $1 = new ]; then echo $B/backend.test; else echo $B/$1/backend.test; fi; }
say "== machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $S
say "cores $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"
(while sleep 0.5; do nvidia-smi --query-gpu=clocks.sm --format=csv,noheader; done > $OUT/clock.txt 2>&1) &
CLK=$!
python3 -c "
import time, torch
x = torch.randn(8192, 8192, device='cuda'); end = time.time() + 0.5
while time.time() < end: torch.matmul(x, x)
torch.cuda.synchronize()"
clock

say "== 1. started dispatch tests on cuda:0 (this tree)"
KILN_REQUIRE_CUDA=1 timeout 40 $B/backend.test -test.run 'Pipelined|Started' -test.count=1 -test.v > $OUT/tests.txt 2>&1; say "backend.test rc=$?"
grep -E -- '^(--- |FAIL|ok|PASS)' $OUT/tests.txt | head -16 | tee -a $S

say "== 2. launch cost (driver alone, no waiting)"
[ -x $B/driver.test ] && timeout 30 $B/driver.test -test.run XXX -test.bench 'LaunchCost' -test.benchtime 20000x 2>&1 | grep -E '^Benchmark|FAIL' | tee -a $S

say "== 3. the load test"
for v in $builds; do
	clock
	say "-- $v"
	timeout 60 $B/kiln --plugins $(plugins $v) bench --backend cuda --load --load-duration 2s 2>&1 | tail -7 | tee -a $S
done
clock

say "== 4. backend alone: started 1-element dispatches"
for v in $builds; do
	[ -x $(tests $v) ] || continue
	say "-- $v"
	prof=""
	[ $v = new ] && prof="-test.cpuprofile $OUT/start.prof"
	timeout 40 $(tests $v) -test.run XXX -test.bench 'BenchmarkStartDispatch' -test.benchtime 1s $prof 2>&1 | grep -E '^Benchmark|FAIL' | tee -a $S
done

say "== 5. boundary costs (1-element resident submit)"
for v in base new; do
	[ -d $(plugins $v) ] || continue
	say "-- $v"
	timeout 60 $B/kiln --plugins $(plugins $v) bench --backend cuda --mib 64 --starts 2 --repeats 2 > $OUT/bench-$v.txt 2>&1; say "bench rc=$?"
	grep -i -E 'round trip|submit|1-element' $OUT/bench-$v.txt | head -8 | tee -a $S
done
kill $CLK
python3 - "$OUT" <<'PY' 2>&1 | tee -a $S
import statistics, sys
clocks = [int(c.split()[0]) for c in open(f"{sys.argv[1]}/clock.txt") if c.split() and c.split()[0].isdigit()]
if clocks:
    print(f"SM clock over the call: {min(clocks)}-{max(clocks)} MHz, median {statistics.median(clocks)} ({len(clocks)} samples)")
PY

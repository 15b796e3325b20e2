#!/bin/bash
# The tuning experiment on the GPU machine: kiln tune over the register-tiled
# matmul (matmul_reg) at 4096 through CUDA and Vulkan, the winner next to the
# untuned default and next to torch.matmul with TF32 off in the same run, and
# vector_add's elements per invocation; the SM clock is sampled throughout.
#
# Prepare on the build machine, from the repository root:
#   D=.devbin/tune; rm -rf $D; mkdir -p $D/bin/plugins; L='-ldflags=-s -w'
#   go build "$L" -o $D/bin/kiln ./cmd/kiln
#   for p in cuda cpuref vulkan; do go build "$L" -o $D/bin/plugins/kiln-backend-$p ./plugins/$p; done
#   tar czf $D/bin.tgz -C $D bin && rm -r $D/bin && cp scripts/gpu-tune-run.sh $D/
# plus the Vulkan loader .debs in .gl/. On the GPU machine, with OUT set:
#   [BACKENDS="cuda vulkan"] [WGS="--wg 16,16 ..."] [VADD=0] bash .devbin/tune/gpu-tune-run.sh [BUDGET]
# (BUDGET per backend in minutes, default 4m; VADD=0 skips the vector_add tune)
set -u
BUDGET=${1:-4m}
D=.devbin/tune
W=/tmp/kiln-tune
rm -rf $W && mkdir -p $W && tar xzf $D/bin.tgz -C $W
B=$W/bin
export XDG_CACHE_HOME=$W/xc XDG_CONFIG_HOME=$W/xcfg XDG_DATA_HOME=$W/xd
if ls .gl/*.deb >/dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
  echo '{"file_format_version":"1.0.1","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"1.3.0"}}' > $W/icd.json
  export VK_ICD_FILENAMES=$W/icd.json VK_DRIVER_FILES=$W/icd.json KILN_VK_VALIDATION=0
fi
S=$OUT/tune-summary.txt
say() { echo "$@" | tee -a $S; }
K="$B/kiln --plugins $B/plugins"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee -a $S
nvidia-smi --query-gpu=clocks.sm --format=csv,noheader -lms 500 > $OUT/tune-clocks.txt 2>&1 &
SMI=$!
WG=${WGS:-"--wg 16,16 --wg 16,8 --wg 8,16 --wg 32,8 --wg 8,32"}
LIMIT=$(( ${BUDGET%m} * 60 + 60 ))
for be in ${BACKENDS:-cuda vulkan}; do
  say "== kiln tune matmul_reg 4096 on $be (budget $BUDGET)"
  timeout $LIMIT $K tune --kernel matmul_reg --backend $be --size 4096 --runs 3 $WG --budget $BUDGET > $OUT/tune-matmul-$be.txt 2>&1; say "rc=$?"
  grep -v '^\s*$' $OUT/tune-matmul-$be.txt | head -4 | tee -a $S
  grep -iE 'winner|baseline|best|saved|record' $OUT/tune-matmul-$be.txt | head -6 | tee -a $S
  say "-- after tuning: kiln run matmul_reg 4096 on $be (record applied)"
  timeout 120 $K --json run --kernel matmul_reg --size 4096 --backend $be > $OUT/run-matmul-$be.json 2>&1; head -c 600 $OUT/run-matmul-$be.json | tee -a $S; echo | tee -a $S
done
if [ "${VADD:-1}" != 0 ]; then
  say "== kiln tune vector_add 16M on cuda"
  timeout 150 $K tune --kernel vector_add --backend cuda --size 16777216 --budget 1m > $OUT/tune-vadd.txt 2>&1; say "rc=$?"
  grep -iE 'winner|baseline|best|saved' $OUT/tune-vadd.txt | head -4 | tee -a $S
fi
kill $SMI
say "SM clock during tuning (MHz: samples):"; sort $OUT/tune-clocks.txt | uniq -c | sort -rn | head -4 | tee -a $S
python3 - <<'PY' 2>&1 | tee -a $S
import torch
torch.backends.cuda.matmul.allow_tf32 = False
m = 4096
x = torch.randn(m, m, device='cuda'); y = torch.randn(m, m, device='cuda')
s, e = torch.cuda.Event(True), torch.cuda.Event(True)
torch.matmul(x, y); torch.cuda.synchronize(); best = 1e9
for _ in range(20):
    s.record(); torch.matmul(x, y); e.record(); torch.cuda.synchronize(); best = min(best, s.elapsed_time(e))
print(f"torch.matmul 4096^3 fp32 (TF32 off): {best:.3f} ms, {2*m**3/best/1e6:.0f} GFLOP/s")
PY

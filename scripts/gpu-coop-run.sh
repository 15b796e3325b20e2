#!/bin/bash
# The GPU experiment behind the cooperative-matrix figures (issue 28): kiln's
# Vulkan backend on NVIDIA's driver with VK_KHR_cooperative_matrix and
# VK_NV_cooperative_matrix2 (the KHR and NV paths, each measured: the
# benchmark runs once per KILN_VK_MATRIX_PATH in PATHS, default "khr nv
# nv-direct nv-tensor"; the correctness tests on the default path, KHR, and
# on each of TEST_PATHS, default "nv nv-direct nv-tensor").
#   the device's cooperative-matrix list and VK_NV_cooperative_matrix2's
#   features, limits and flexible-dimension list (vk tests), the path each
#   matmul_tc module took (kiln compile; the OpSourceExtension "kiln matrix
#   path: ..."), matmul_tc bf16/f16 bit-exact at ragged sizes (TestCoopMatmul)
#   and the IR v1.2 checks on the cooperative path (TestV12: exact inputs bit
#   for bit, random ones within the matrix_mma bound), matmul_tc 4096³ over
#   resident buffers for several tiles (BenchmarkCoopMatmul; BENCH narrows it,
#   e.g. BENCH='CoopMatmul/./(128x256x32|128x128x64)/wg256$'), then
#   torch.matmul bf16/f16 4096³ in the same run, the SM clock sampled.
#
# Prepare on the build machine, from the repository root (the carried tree must
# stay under 64 MiB, hence the tarball; the JSON programs are matmul_tc's from
# ir/kernels/json, kiln.matrix.matmul_tc.bf16.json and .f16.json):
#   D=.devbin/coop; rm -rf $D; mkdir -p $D/bin/plugins; L='-ldflags=-s -w'
#   go build "$L" -o $D/bin/kiln ./cmd/kiln
#   go build "$L" -o $D/bin/plugins/kiln-backend-vulkan ./plugins/vulkan
#   go test -c "$L" -o $D/bin/backend.test ./plugins/vulkan/backend
#   go test -c "$L" -o $D/bin/vk.test ./plugins/vulkan/vk
#   cp ir/kernels/json/kiln.matrix.matmul_tc.*.json $D/bin/
#   tar cJf $D/bin.txz -C $D bin && rm -r $D/bin      (xz: gzip's is over 20 MiB)
# plus the Vulkan loader .debs in .gl/ (see the device tool's README). On the GPU
# machine, with OUT set to a folder for the logs:
#   bash scripts/gpu-coop-run.sh          with carry [".devbin/coop", ".gl"].
# KILN_COOP_DIR names another folder than .devbin/coop; a bin/backend-base.test
# there (the same test binary built from the commit before a change) runs the
# benchmark too, on the same machine in the same call, as the baseline.
set -u
D=${KILN_COOP_DIR:-.devbin/coop}
W=/tmp/kiln-coop
rm -rf $W && mkdir -p $W && tar xaf $D/bin.t* -C $W
B=$W/bin
for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
echo '{"file_format_version":"1.0.1","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"1.3.0"}}' > $W/icd.json
export VK_ICD_FILENAMES=$W/icd.json VK_DRIVER_FILES=$W/icd.json KILN_VK_VALIDATION=0 KILN_REQUIRE_VULKAN=1
export XDG_CACHE_HOME=$W/xc XDG_CONFIG_HOME=$W/xcfg XDG_DATA_HOME=$W/xd
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu.txt
cd $W
echo "== cooperative matrices the device lists"
$B/vk.test -test.run 'Coop' -test.v 2>&1 | grep -v '^=== RUN' | tail -7
echo "== the path of each module"
for P in khr nv; do
  for f in $B/kiln.matrix.matmul_tc.*.json; do
    n=$(basename $f .json)
    KILN_VK_MATRIX_PATH=$P $B/kiln --plugins $B/plugins compile $f --backend vulkan --emit spirv -o $OUT/$n.$P.spv 2>&1 | tail -1
    strings -n 8 $OUT/$n.$P.spv | grep -m1 'kiln matrix path'
  done
done
nvidia-smi --query-gpu=clocks.sm --format=csv,noheader -lms 200 > $OUT/clocks.txt 2>&1 &
SMI=$!
for P in ${PATHS:-khr nv nv-direct nv-tensor}; do
  echo "== matmul_tc 4096^3 (resident buffers, 8 dispatches a submit), KILN_VK_MATRIX_PATH=$P"
  KILN_VK_MATRIX_PATH=$P $B/backend.test -test.run '^$' -test.bench "${BENCH:-CoopMatmul}" -test.benchtime 5x 2>&1 | tee $OUT/bench-$P.full.txt | grep -E -A1 '^Benchmark|FAIL|panic|SKIP' | grep -v '^--$'
done
if [ -x $B/backend-base.test ]; then
  echo "== baseline: the same benchmark built from the commit before"
  $B/backend-base.test -test.run '^$' -test.bench 'CoopMatmul' -test.benchtime 5x 2>&1 | grep -E '^Benchmark|FAIL|panic' | tee $OUT/bench-base.txt
fi
echo "== torch reference (t=${SECONDS}s)"
PYTHONUNBUFFERED=1 python3 - <<'PY' 2>&1 | tee $OUT/torch.txt
import torch
n = 4096
for dt in (torch.bfloat16, torch.float16):
    a = torch.randint(-3, 4, (n, n), device='cuda').to(dt); b = torch.randint(-3, 4, (n, n), device='cuda').to(dt)
    for _ in range(30): torch.matmul(a, b)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True); best = 1e9
    for _ in range(30):
        s.record(); torch.matmul(a, b); e.record(); torch.cuda.synchronize(); best = min(best, s.elapsed_time(e))
    print(f"torch.matmul {dt} {n}^3: {best:.3f} ms, {2*n**3/best/1e9:.0f} TFLOP/s")
PY
kill $SMI
echo "== SM clock (MHz: samples)"; sort $OUT/clocks.txt | uniq -c | sort -rn | head -4
echo "== matmul_tc bit-exact at ragged sizes, the IR v1.2 checks (default path: KHR, t=${SECONDS}s)"
$B/backend.test -test.run 'TestCoopMatmul|TestV12$' -test.v > $OUT/coop-tests.txt 2>&1; echo "rc=$?"
grep -E '^(--- |PASS|FAIL|ok)' $OUT/coop-tests.txt | head -14
for P in ${TEST_PATHS:-nv nv-direct nv-tensor}; do
  echo "== matmul_tc bit-exact at ragged sizes, KILN_VK_MATRIX_PATH=$P (t=${SECONDS}s)"
  KILN_VK_MATRIX_PATH=$P $B/backend.test -test.run 'TestCoopMatmul' -test.v > $OUT/coop-tests-$P.txt 2>&1; echo "rc=$?"
  grep -E '^(--- FAIL|FAIL|ok|PASS)' $OUT/coop-tests-$P.txt | head -6
done
echo "(t=${SECONDS}s)"

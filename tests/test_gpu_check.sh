#!/usr/bin/env bash
# scripts/gpu-check without a GPU (docs/cuda.md, "The GPU check"):
#  - the project stands on its own: nothing in tests/, scripts/ or .ci/
#    names the folder beside the checkout ("shared" next to it: a clone
#    has none), and the bundle is made from a plain copy of the checkout
#    in a temporary folder with nothing beside it; a bundle step that
#    fails says which (a failing tar);
#  - `bundle` builds a bundle of at most 60 MiB holding the Release + CUDA
#    build (debug info stripped), every stage and backend, the GPU tests, the
#    benchmark, the PyTorch peers (tests/bench/torch_*.py), the libraries
#    its binaries load, Debian's four Fashion-MNIST files and the run script;
#  - unpacked elsewhere, every binary's dependencies resolve into the bundle
#    except glibc, the compiler runtime and CUDA (this test's own list);
#  - `run` exits 77 where there is no GPU; `run dry=1` runs the whole plan on
#    the CPU backend and prints the table and every target line, the
#    StyleGAN2 and BigGAN-128 rows (ganflow's figures, step counts, the
#    PyTorch peer's CPU path) among them; its library check fails when a
#    library is missing from the bundle; `check` fails over its size
#    limit; an unknown step in only= is refused;
#  - `report` on GPU-format logs (tests/fixtures/gpu-check, synthetic
#    figures) gives the expected rows, target lines and status, and the
#    run summary of a ganflow run reads mfu and flop_s from metrics.jsonl
#    when there and says n/a when not.
# Exit 0 pass, 1 fail, 77 skip.
set -u
S=${GF_SOURCE_DIR:?} B=${GF_BINARY_DIR:?}
GC=$S/scripts/gpu-check
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks: $2"; }

# ---- nothing a clone lacks: no path into the folder beside the checkout ----
hits=$(cd "$S" && grep -rnE '\.\./shared' tests scripts .ci 2>/dev/null)
[ -z "$hits" ] || { echo "FAIL: tests/, scripts/ or .ci/ name the folder beside the checkout:"; echo "$hits"; exit 1; }

[ -f "$B/backends/backend_cuda.so" ] || { echo "skip: this build has no CUDA backend (bundle needs the CUDA toolkit)"; exit 77; }
T=$(mktemp -d /tmp/gf-test-gpu-check.XXXXXX)
trap 'rm -rf "$T"' EXIT

# ---- report: GPU-format logs in, target lines out (no build needed) ----
"$GC" report "$S/tests/fixtures/gpu-check" >"$T/report.txt" 2>&1 || fail "report failed: $(tail -3 "$T/report.txt")"
for l in "gpu-check: ctest_gpu_failures=2 target=0 (1 skipped)" \
  "gpu-check: pipeline_vs_step_b64_fp32=0.90 target=0.9" \
  "gpu-check: pipeline_vs_step_b64_bf16=0.95 target=0.9" \
  "gpu-check: pipeline_vs_step_b1024_tf32=n/a target=0.9" \
  "gpu-check: pipeline_vs_step_b1024_bf16=0.75 target=0.9" \
  "gpu-check: pipeline_b64_tf32_vs_torch_compile_ro=3.00 target=2.0" \
  "gpu-check: pipeline_b1024_bf16_vs_best_torch=1.60 target=1.5 (best PyTorch mode: compile)" \
  "gpu-check: stylegan2_cifar_vs_best_torch=2.00 target=2.0 (best PyTorch mode: compile)" \
  "gpu-check: biggan128_bf16_mfu=0.35 target=0.40" \
  "gpu-check: eager_steps_after_warmup=n/a target=0 (sngan, sngan_cond, biggan, pix2pix, stylegan2, biggan128)" \
  "gpu-check: status=2 (3 step(s) failed, timed out or not run)" \
  "(test_cuda_ops Failed, test_dist_nccl Timeout)" \
  "precision=tf32 refused by the pipeline" \
  "  1024     10000.0     10000.0     20000.0     21000.0     30000.0     32000.0" \
  "PyTorch peers (tests/bench/torch_dcgan.py gpu), images/s; failed: 64 bf16: RuntimeError: fixture" \
  "    64       500.0           -           -       900.0" \
  "    ganflow             500.0 images/s after warm-up (426.7 with start-up), MFU 25.0%, 100.0 TFLOP/s, busy d 90.0% g 80.0%" \
  "D steps 14 eager / 2 captured / 184 replayed, G steps 2 / 2 / 196: 12 eager after warm-up" \
  "    torch eager         200.0 images/s (warm-up 5.0 s), 5 TFLOP/iter: 15.6 TFLOP/s, MFU 3.9%" \
  "    torch compile       250.0 images/s (warm-up 40.0 s), 5 TFLOP/iter: 19.5 TFLOP/s, MFU 4.9%" \
  "    torch compile  no result (the peer ended with status 124: out of time)" \
  "    ganflow / best PyTorch (eager): 3.00" \
  "  biggan      did not finish (rc=1)"; do
  has "$T/report.txt" "$l"
done
# every step ran and the failed backbone has its step counts: the status
# comes from the targets (ctest failures, a missing ratio, a low ratio, the
# BigGAN-128 MFU, 12 + 2 eager steps: 5 missed)
cp -r "$S/tests/fixtures/gpu-check" "$T/fx"
sed -i 's/^\([a-z0-9]*\) [0-9]* /\1 0 /' "$T/fx/status.txt"
sed -i 's|^ganflow: no metrics .*|ganflow: steps=4 batch=64 images_s=1 images_s_startup=1 mfu=n/a flop_s=n/a busy_d=1 busy_g=1 d_eager=3 d_captured=1 d_replayed=0 g_eager=1 g_captured=1 g_replayed=0|' \
  "$T/fx/backbones.txt"
"$GC" report "$T/fx" >"$T/report2.txt" 2>&1
has "$T/report2.txt" "gpu-check: eager_steps_after_warmup=14 target=0 (sngan, sngan_cond, biggan, pix2pix, stylegan2, biggan128)"
has "$T/report2.txt" "gpu-check: status=1 (5 target(s) missed or not measured)"

# ---- the summary of a ganflow run: metrics.jsonl with and without mfu ----
mkdir -p "$T/sum"
cat >"$T/sum/run.log" <<'LOG'
d: D steps: 5 eager, 2 captured, 93 replayed as graphs; real batches copied ahead on a copy stream
g: G steps: 2 eager, 2 captured, 196 replayed as graphs; fakes in device memory
run ended (step target reached) after 10s (10.00 s): step 100, 6400 items, 640.0 items/s
step stage                   busy    seconds  measured
d                           81.5%       8.15  device time (timed events around each step)
g                           40.0%       4.00  device time (timed events around each step)
LOG
for s in 20 40 60 80 100; do
  printf '{"step":%d,"time":%d.5,"images_per_s":1,"flop_s":%de+12,"mfu":0.%d,"sources":{"g":[%d,1.0]}}\n' $s $((s / 10)) $s $((s / 20)) $s
done >"$T/sum/metrics.jsonl"
"$GC" _summarize "$T/sum/run.log" "$T/sum" 64 >"$T/sum.txt" 2>&1
# the window: steps 40 -> 100 in 6 s; mfu and flop_s: the mean of the lines after step 40
has "$T/sum.txt" "ganflow: steps=100 batch=64 images_s=640.00 images_s_startup=640.00 mfu=0.4000 flop_s=8e+13 busy_d=81.5 busy_g=40.0 d_eager=5 d_captured=2 d_replayed=93 g_eager=2 g_captured=2 g_replayed=196"
sed -i 's/,"flop_s":[^,]*,"mfu":[^,]*//' "$T/sum/metrics.jsonl"
"$GC" _summarize "$T/sum/run.log" "$T/sum" 64 >"$T/sum.txt" 2>&1
has "$T/sum.txt" "images_s=640.00 images_s_startup=640.00 mfu=n/a flop_s=n/a busy_d=81.5"

# ---- bundle: from a plain copy of the checkout, nothing beside it ----
C=$T/copy/ganflow
mkdir -p "$C"
if git -C "$S" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$S" && git ls-files -z -co --exclude-standard | tar cf - --null --ignore-failed-read -T - 2>/dev/null) | tar xf - -C "$C"
else
  tar cf - -C "$S" --exclude=./.git --exclude='./build*' . | tar xf - -C "$C"
fi
[ "$(ls -A "$T/copy")" = ganflow ] || fail "the copy has something beside it: $(ls -A "$T/copy")"
GC=$C/scripts/gpu-check

# a step that fails says which: tar failing while the source is copied
mkdir -p "$T/badtar"
printf '#!/bin/sh\ncase "$1" in cf*) echo "tar: stand-in failure of test_gpu_check" >&2; exit 3 ;; esac\nexec %s "$@"\n' \
  "$(command -v tar)" >"$T/badtar/tar"
chmod +x "$T/badtar/tar"
PATH=$T/badtar:$PATH "$GC" bundle "$T/bfail" >"$T/bfail.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "gpu-check bundle: failed while copying the source tree" "$T/bfail.log" ||
  fail "a failing tar in bundle: rc $rc, no message naming the step: $(tail -5 "$T/bfail.log")"

# ---- bundle ----
t0=$(date +%s)
if ! (cd "$T/copy" && "$GC" bundle "$T/b") >"$T/bundle.log" 2>&1; then
  fail "bundle failed: $(tail -15 "$T/bundle.log")"
  exit 1
fi
echo "bundle: $(($(date +%s) - t0)) s ($(sed -n 's/^build_seconds=//p' "$T/b/MANIFEST") s building)"
size=$(find "$T/b" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
echo "bundle: $size bytes"
[ "$size" -le $((60 * 1048576)) ] || fail "bundle is $size bytes, over 60 MiB"
[ -x "$T/b/gpu-check" ] && cmp -s "$T/b/gpu-check" "$GC" || fail "the bundle's gpu-check is not scripts/gpu-check"
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  cmp -s "$T/b/fashion-mnist/$f" "/usr/share/datasets/fashion-mnist/$f" || fail "fashion-mnist/$f differs from Debian's"
done
prefix=$(sed -n 's/^prefix=//p' "$T/b/MANIFEST")
case $prefix in /tmp/gf-gpu-check.*) ;; *) fail "MANIFEST prefix '$prefix'" ;; esac
[ ! -e "$prefix" ] || fail "bundle left its build tree $prefix behind"
grep -q "^build=Release, GF_CUDA=ON" "$T/b/MANIFEST" || fail "MANIFEST: $(grep ^build= "$T/b/MANIFEST")"

# the contents: every stage and backend of this build, every GPU test
mkdir -p "$T/u"
tar xzf "$T/b/tree.tar.gz" -C "$T/u" && tar xzf "$T/b/libs.tar.gz" -C "$T/u" || fail "cannot unpack the bundle"
want=(build/ganflow build/libganflow.so.0 build/tests/bench/bench_dcgan_step build/CTestTestfile.cmake
  src/tests/bench/pipeline.sh src/pipelines/dcgan_fashion.lua src/luaconf src/tests/test_cuda_e2e.sh
  src/tests/bench/torch_dcgan.py src/tests/bench/torch_backbones.py src/tests/bench/torch_backbones_gpu.py
  src/pipelines/stylegan2_fashion.lua src/pipelines/biggan_imagenet.lua)
for f in "$B"/stages/*.so "$B"/backends/*.so; do want+=("build/${f#"$B"/}"); done
for t in $(cd "$B" && ctest -N -L gpu | sed -n 's/.*Test *#[0-9]*: //p'); do
  [ ! -x "$B/tests/$t" ] || want+=("build/tests/$t")
done
for f in "${want[@]}"; do [ -e "$T/u/$f" ] || fail "the bundle lacks $f"; done
grep -q "^peers=.*torch_backbones_gpu.py" "$T/b/MANIFEST" || fail "MANIFEST: $(grep ^peers= "$T/b/MANIFEST")"
# stripped: no DWARF left in the build's binaries
for f in "$T"/u/build/ganflow "$T"/u/build/libganflow.so.0 "$T"/u/build/backends/*.so "$T"/u/build/stages/d_step.so; do
  ! readelf -S "$f" 2>/dev/null | grep -q '\.debug_info' || fail "$f still has debug info"
done

# the libraries: each dependency of each binary resolves into the bundle,
# unless the GPU machine has it (glibc, compiler runtime, CUDA)
ok_re='^(linux-vdso|ld-linux[-a-z0-9_.]*|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl)\.so'
nbin=0
while IFS= read -r f; do
  [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] || continue
  nbin=$((nbin + 1))
  while read -r name arrow path rest; do
    [ "$arrow" = "=>" ] || continue
    [[ $name =~ $ok_re ]] && continue
    [ "$path" != not ] || { fail "${f#"$T"/u/}: $name not found"; continue; }
    [[ $path == "$T/u/"* ]] || fail "${f#"$T"/u/}: $name comes from $path, not from the bundle"
  done < <(LD_LIBRARY_PATH=$T/u/lib:$T/u/build ldd "$f" 2>&1)
done < <(find "$T/u/build" "$T/u/lib" -type f)
[ "$nbin" -ge 20 ] || fail "only $nbin binaries in the bundle"
echo "bundle: $nbin binaries, libraries: $(cd "$T/u/lib" && ls | tr '\n' ' ')"

# ---- check: the size limit ----
"$GC" check "$T/b" max_mib=1 >"$T/check.log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "over the 1 MiB limit" "$T/check.log" || fail "check max_mib=1 gave rc $rc: $(tail -3 "$T/check.log")"
grep -q "libs.tar.gz" "$T/check.log" || fail "check does not list the sizes"

# ---- run: no GPU here ----
if [ ! -e /dev/nvidiactl ] && ! command -v nvidia-smi >/dev/null; then
  "$T/b/gpu-check" run "$T/b" out="$T/out77" >"$T/run77.log" 2>&1
  rc=$?
  [ $rc -eq 77 ] && grep -q "no GPU" "$T/run77.log" || fail "run without a GPU gave rc $rc: $(tail -3 "$T/run77.log")"
fi

# ---- run: nvidia-smi but no usable GPU (the backend's own probe says so) ----
if [ ! -e /dev/nvidiactl ] && ! command -v nvidia-smi >/dev/null; then
  mkdir -p "$T/fakebin"
  printf '#!/bin/sh\necho "GPU 0: none (a stand-in nvidia-smi of test_gpu_check)"\n' >"$T/fakebin/nvidia-smi"
  chmod +x "$T/fakebin/nvidia-smi"
  PATH=$T/fakebin:$PATH "$T/b/gpu-check" run "$T/b" out="$T/out4" >"$T/run4.log" 2>&1
  rc=$?
  [ $rc -eq 77 ] && grep -q "no CUDA device" "$T/run4.log" || fail "run with no usable GPU gave rc $rc: $(tail -3 "$T/run4.log")"
  [ ! -e "$prefix" ] || fail "run (77) left $prefix behind"
fi

# ---- run dry=1: the whole plan on the CPU ----
t0=$(date +%s)
"$T/b/gpu-check" run "$T/b" dry=1 out="$T/out" >"$T/dry.log" 2>&1
rc=$?
echo "dry run: $(($(date +%s) - t0)) s, rc $rc"
[ $rc -eq 0 ] || fail "dry run rc $rc: $(tail -40 "$T/dry.log")"
has "$T/out/gpu-check.txt" "gpu-check: status=0 (dry run: every step ran; targets not judged)"
has "$T/out/gpu-check.txt" "gpu-check: ctest_gpu_failures=0 target=0"
grep -Eq "^gpu-check: pipeline_vs_step_b16_fp32=[0-9]+\.[0-9]+ target=0.9$" "$T/out/gpu-check.txt" ||
  fail "no pipeline_vs_step_b16_fp32 figure: $(grep pipeline_vs_step "$T/out/gpu-check.txt")"
grep -Eq "^gpu-check: pipeline_vs_step_b32_fp32=[0-9]+\.[0-9]+ target=0.9$" "$T/out/gpu-check.txt" ||
  fail "no pipeline_vs_step_b32_fp32 figure"
has "$T/out/gpu-check.txt" "gpu-check: pipeline_b16_tf32_vs_torch_compile_ro=n/a target=2.0"
has "$T/out/gpu-check.txt" "gpu-check: pipeline_b32_bf16_vs_best_torch="
grep -Eq "^ +16 +[0-9]+\.[0-9] +- *$" "$T/out/gpu-check.txt" || fail "no isolated-step figure at batch 16"
[ "$(grep -c "4 steps in" "$T/out/gpu-check.txt")" = 4 ] || fail "not 4 backbone runs: $(grep -A5 '^backbone' "$T/out/gpu-check.txt")"
# the StyleGAN2 and BigGAN-128 rows: ganflow's images/s and step counts, the
# PyTorch peer eager on the CPU (and its compile mode: skipped on 1.13)
for r in "stylegan2  ch=8 z=16 w=16 mbstd=4 batch=8 precision=tf32 steps=20" "biggan128  data="; do
  grep -qF -- "  $r" "$T/out/gpu-check.txt" || fail "no row '$r'"
done
[ "$(grep -cE "^    ganflow +[0-9]+\.[0-9] images/s after warm-up \([0-9]+\.[0-9] with start-up\), MFU " "$T/out/gpu-check.txt")" = 2 ] ||
  fail "not 2 ganflow rows: $(grep -A3 '^  stylegan2\|^  biggan128' "$T/out/gpu-check.txt")"
[ "$(grep -cE "^    torch eager +[0-9]+\.[0-9] images/s" "$T/out/gpu-check.txt")" = 2 ] || fail "not 2 PyTorch eager rows"
[ "$(grep -c "^    torch compile " "$T/out/gpu-check.txt")" = 2 ] || fail "not 2 PyTorch compile rows"
[ "$(grep -cE "D steps [0-9]+ eager / [0-9]+ captured.*: [0-9]+ eager after warm-up" "$T/out/gpu-check.txt")" = 6 ] ||
  fail "not 6 rows with step counts"
grep -Eq "^gpu-check: stylegan2_cifar_vs_best_torch=[0-9]+\.[0-9]+ target=2.0 \(best PyTorch mode: eager\)$" "$T/out/gpu-check.txt" ||
  fail "$(grep stylegan2_cifar "$T/out/gpu-check.txt")"
grep -Eq "^gpu-check: biggan128_bf16_mfu=(n/a|[0-9]+\.[0-9]+) target=0.40$" "$T/out/gpu-check.txt" || fail "no biggan128 MFU line"
grep -Eq "^gpu-check: eager_steps_after_warmup=[0-9]+ target=0 \(sngan, sngan_cond, biggan, pix2pix, stylegan2, biggan128\)$" \
  "$T/out/gpu-check.txt" || fail "$(grep eager_steps "$T/out/gpu-check.txt")"
tar tzf "$T/out/logs.tar.gz" | grep -q "logs/ctest.txt" || fail "logs.tar.gz lacks ctest.txt"
[ ! -e "$prefix" ] || fail "run left $prefix behind"

ngpu=$(cd "$B" && ctest -N -L gpu | grep -c "Test *#")
row=$(grep "^ctest " "$T/out/gpu-check.txt")
case $row in *"$ngpu gpu tests: "*) ;; *) fail "ctest row: $row ($ngpu gpu tests in this build)" ;; esac

# ---- run: the gpu tests without ctest (gpu-tests.txt), the same results ----
"$T/b/gpu-check" run "$T/b" dry=1 only=ctest ctest=0 out="$T/out3" >"$T/run3.log" 2>&1
rc=$?
row3=$(grep "^ctest " "$T/out3/gpu-check.txt")
[ $rc -eq 0 ] && [ "${row3#*gpu tests: }" = "${row#*gpu tests: }" ] || fail "without ctest: rc $rc, '$row3' (ctest: '$row')"
grep -q "no ctest" <(tar xzOf "$T/out3/logs.tar.gz" logs/ctest.txt) || fail "ctest=0 ran ctest"

# ---- run: an unknown step is refused ----
"$T/b/gpu-check" run "$T/b" dry=1 only=ctest,stylegan3 out="$T/out5" >"$T/run5.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "no step 'stylegan3'" "$T/run5.log" || fail "only=stylegan3: rc $rc: $(tail -3 "$T/run5.log")"

# ---- run: a library missing from the bundle is caught before anything runs ----
mkdir -p "$T/b2" "$T/l2"
cp "$T/b/MANIFEST" "$T/b/tree.tar.gz" "$T/b2/"
tar xzf "$T/b/libs.tar.gz" -C "$T/l2" && rm "$T/l2"/lib/liblua5.4.so.0 && tar czf "$T/b2/libs.tar.gz" -C "$T/l2" lib
"$GC" run "$T/b2" dry=1 out="$T/out2" >"$T/run2.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "liblua5.4.so.0 resolved outside the bundle" "$T/run2.log" ||
  fail "a bundle without liblua: rc $rc: $(tail -5 "$T/run2.log")"

[ $fails -eq 0 ] && echo "ok: gpu-check bundle ($size bytes), run (77 without a GPU; dry run), check and report"
[ $fails -eq 0 ]

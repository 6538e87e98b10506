#!/usr/bin/env bash
# End-to-end tests of the training pipelines on real Fashion-MNIST data
# (Debian's dataset-fashion-mnist), each run by CTest as its own test:
#
#   test_train.sh CASE      CASE = dcgan | tensorboard | cgan | perclass | async | resume |
#                                  shape | resume_other | rundir | nan |
#                                  diverge | nonfinite | enospc | sigint | plot |
#                                  sample_folder
#
# Each case runs real pipelines for a few hundred steps (fewer in sanitizer
# builds, where GF_SANITIZE is set) and checks the files and numbers they
# produce. Exit 0 pass, 1 fail, 77 skip (no Fashion-MNIST on this machine).
set -u
case_name=${1:?usage: test_train.sh CASE}
B=${GF_BINARY_DIR:?} S=${GF_SOURCE_DIR:?}
G=$B/ganflow
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "skip: /usr/share/datasets/fashion-mnist is missing (apt-get install dataset-fashion-mnist)"
  exit 77
fi
T=$(mktemp -d /tmp/gf-train.XXXXXX)
trap 'rm -rf "$T"' EXIT
if [ -n "${GF_SANITIZE:-}" ]; then STEPS=40; else STEPS=200; fi
BATCH=16
fails=0
fail() { echo "FAIL [$case_name]: $*"; fails=$((fails + 1)); }
check() { if ! eval "$1"; then fail "$2"; fi; }

"$G" dataset fashion-mnist out="$T/fm" >/dev/null 2>&1 || { echo "FAIL: cannot convert Fashion-MNIST"; exit 1; }
DATA=$T/fm/train

# run PIPELINE DIR [key=value...]: quiet run into DIR, log in DIR.log
run() {
  local p=$1 dir=$2
  shift 2
  "$G" run "$S/pipelines/$p.lua" data="$DATA" batch=$BATCH dir="$dir" quiet=true "$@" >"$dir.log" 2>&1
}

# png_size FILE: "W H" from the IHDR chunk
png_size() {
  od -An -tu1 -j16 -N8 "$1" | awk '{ printf "%d %d\n", $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8 }'
}

# the metrics of a run: every line has finite losses (JSON null = NaN/Inf)
check_metrics() {
  local f=$1/metrics.jsonl
  check "[ -s '$f' ]" "$f missing or empty"
  check "! grep -q '\"loss_[dg]\":null' '$f'" "non-finite loss in $f"
  check "grep -q '\"loss_d\":[0-9]' '$f' && grep -q '\"loss_g\":[0-9]' '$f'" "no loss_d/loss_g values in $f"
  check "grep -q '\"edges\":\\[{' '$f'" "no edge statistics in $f"
}

latest() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest")"; }

# finite FILE...: prints the f32 tensors holding NaN or Inf (none: prints nothing)
finite() {
  /usr/bin/python3 - "$@" <<'PY'
import array, json, math, struct, sys
for path in sys.argv[1:]:
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    for k, v in json.loads(raw[8:8 + n]).items():
        if k != "__metadata__" and v["dtype"] == "F32":
            a = array.array("f", raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            if not all(math.isfinite(x) for x in a):
                print(path, k)
PY
}

# poison IN OUT TENSOR VALUE [all]: a copy of checkpoint IN with TENSOR's first
# value (all: every value, alternating in sign) set to VALUE (nan, inf, 3e38)
poison() {
  /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
raw = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
a, b = json.loads(raw[8:8 + n])[sys.argv[3]]["data_offsets"]
v = float(sys.argv[4])
for i in range(0, (b - a) if sys.argv[5:] == ["all"] else 4, 4):
    raw[8 + n + a + i:8 + n + a + i + 4] = struct.pack("<f", v if i % 8 == 0 else -v)
open(sys.argv[2], "wb").write(raw)
PY
}

case $case_name in
dcgan)
  every=$((STEPS / 4))
  run dcgan_fashion "$T/r" steps=$STEPS samples=$every log=20 checkpoint_every=100
  check "[ $? -eq 0 ]" "dcgan_fashion failed: $(tail -3 "$T/r.log")"
  check_metrics "$T/r"
  check "[ \"$(png_size "$T/r/samples/latest.png")\" = '274 274' ]" "8x8 grid of 32x32 images should be 274x274, got $(png_size "$T/r/samples/latest.png")"
  check "[ -f '$T/r/samples/$(printf 'step-%08d.png' $every)' ]" "no grid at step $every (samples=$every)"
  ck=$(latest "$T/r")
  check "[ -f '$ck' ]" "no checkpoint"
  "$G" sample "$ck" n=16 out="$T/s.png" >"$T/s.log" 2>&1
  check "[ $? -eq 0 ]" "ganflow sample failed: $(cat "$T/s.log")"
  check "[ \"$(png_size "$T/s.png")\" = '274 70' ]" "16 samples in 8 columns should be 274x70, got $(png_size "$T/s.png")"
  # outside tools read the architecture: layer tables are JSON; d records
  # the reader the runtime found upstream of it
  arch=$(/usr/bin/python3 - "$ck" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
meta = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
g = json.loads(meta["g.table"])
print(g["input_shape"], g["1"][0], meta["g.role"], meta["d.reader"], meta["format"])
PY
)
  check "[ \"$arch\" = '[100] linear generator reader ganflow-checkpoint-1' ]" "checkpoint metadata read with Python's json: got '$arch'"
  ;;
tensorboard)
  # the run's TensorBoard event file, decoded with python3-protobuf and
  # checked against metrics.jsonl and the grids (tests/train/check_tfevents.py)
  /usr/bin/python3 -c 'import google.protobuf' 2>/dev/null || { echo "skip: python3-protobuf is missing"; exit 77; }
  run dcgan_fashion "$T/r" steps=30 samples=10 log=10
  check "[ $? -eq 0 ]" "dcgan_fashion failed: $(tail -3 "$T/r.log")"
  out=$(/usr/bin/python3 "$S/tests/train/check_tfevents.py" "$T/r" 274 274 2>&1)
  check "[ $? -eq 0 ]" "event file: $out"
  echo "$out"
  ;;
cgan)
  run cgan_fashion "$T/r" steps=$STEPS samples=50 log=20 labels=data
  check "[ $? -eq 0 ]" "cgan_fashion failed: $(tail -3 "$T/r.log")"
  check_metrics "$T/r"
  check "[ \"$(png_size "$T/r/samples/latest.png")\" = '342 342' ]" "10x10 grid (a row per class) should be 342x342"
  "$G" sample "$(latest "$T/r")" n=8 class=3 out="$T/s.png" >"$T/s.log" 2>&1
  check "[ $? -eq 0 ]" "ganflow sample class=3 failed: $(cat "$T/s.log")"
  "$G" sample "$(latest "$T/r")" n=8 class=10 out="$T/s.png" >"$T/s.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'class=10' '$T/s.log'" "class=10 of a 10-class model should be refused"
  ;;
perclass)
  run perclass_fashion "$T/r" steps=$((STEPS / 2)) samples=50 log=20 classes=3
  check "[ $? -eq 0 ]" "perclass_fashion failed: $(tail -3 "$T/r.log")"
  check_metrics "$T/r"
  ck=$(latest "$T/r")
  "$G" sample "$ck" n=12 out="$T/s.png" >"$T/s.log" 2>&1
  check "grep -q 'from 3 generators' '$T/s.log'" "the per-class checkpoint should hold 3 generators: $(cat "$T/s.log")"
  for c in 0 1 2; do
    check "grep -aq '\"g$c.role\":\"generator\"' '$ck' && grep -aq '\"d$c.role\":\"discriminator\"' '$ck'" "no pair for class $c in $ck"
  done
  check "[ \"$(png_size "$T/r/samples/latest.png")\" = '274 104' ]" "3 rows of 8 should be 274x104, got $(png_size "$T/r/samples/latest.png")"
  # every line says how far each pair's stages had got when it was written:
  # all six stages, none past the line's step (one of them reached it), the
  # pairs' steps never going back from line to line
  python3 - "$T/r/metrics.jsonl" >"$T/src.log" 2>&1 <<'PY'
import json, sys
prev = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    src = r["sources"]
    assert sorted(src) == ["d0", "d1", "d2", "g0", "g1", "g2"], f"sources {sorted(src)} at step {r['step']}"
    assert max(s for s, t in src.values()) == r["step"], f"no stage at step {r['step']}: {src}"
    for k, (s, t) in src.items():
        assert 1 <= s <= r["step"] and 0 < t <= r["time"], f"{k} = {s, t} in the line of step {r['step']} at {r['time']} s"
        assert s >= prev.get(k, (0, 0))[0] and t >= prev.get(k, (0, 0))[1], f"{k} went back: {prev[k]} -> {s, t}"
    prev = src
PY
  check "[ $? -eq 0 ]" "metrics sources: $(cat "$T/src.log")"
  ;;
async)
  run async_fashion "$T/r" steps=$STEPS samples=50 log=10 staleness=2
  check "[ $? -eq 0 ]" "async_fashion failed: $(tail -3 "$T/r.log")"
  check_metrics "$T/r"
  check "grep -q '\"staleness_max\"' '$T/r/metrics.jsonl'" "no staleness recorded"
  worst=$(grep -o '"staleness_max":[0-9]*' "$T/r/metrics.jsonl" | cut -d: -f2 | sort -n | tail -1)
  check "[ '${worst:-99}' -le 2 ]" "recorded staleness $worst exceeds k = 2"
  ;;
resume)
  n=$((STEPS / 4))
  run dcgan_fashion "$T/a" steps=$((2 * n)) samples=1000 log=10
  run dcgan_fashion "$T/b" steps=$n samples=1000 log=10
  run dcgan_fashion "$T/c" steps=$((2 * n)) samples=1000 log=10 resume="$T/b"
  check "[ $? -eq 0 ]" "resumed run failed: $(tail -3 "$T/c.log")"
  "$B/tests/st_compare" "$(latest "$T/a")" "$(latest "$T/c")" >"$T/cmp.log" 2>&1
  check "[ $? -eq 0 ]" "N + resume + N differs from 2N: $(cat "$T/cmp.log")"
  check "grep -q 'tensors identical' '$T/cmp.log'" "nothing compared"
  # resume=RUN_DIR alone continues in that directory with the arguments
  # its args.txt recorded (data, batch, samples, log...): the same networks
  run dcgan_fashion "$T/d" steps=$n samples=1000 log=10
  "$G" run "$S/pipelines/dcgan_fashion.lua" resume="$T/d" steps=$((2 * n)) >"$T/d2.log" 2>&1
  check "[ $? -eq 0 ]" "resume in place failed: $(tail -3 "$T/d2.log")"
  check "grep -q 'resume: continuing the run in $T/d; restored from its args.txt: .*data=$DATA batch=$BATCH' '$T/d2.log'" \
    "the restored arguments should be printed: $(grep resume "$T/d2.log")"
  check "[ \"\$(latest "$T/d")\" = '$T/d/checkpoints/$(printf 'ckpt-%08d.safetensors' $((2 * n)))' ]" \
    "the resumed run should write into $T/d: $(ls "$T/d/checkpoints")"
  "$B/tests/st_compare" "$(latest "$T/a")" "$(latest "$T/d")" >"$T/cmp2.log" 2>&1
  check "[ $? -eq 0 ]" "N + resume in place + N differs from 2N: $(cat "$T/cmp2.log")"
  ;;
shape)
  # D built for 32x32 fed with 28x28 images (decode without a size)
  cat >"$T/p.lua" <<EOF
local gf = require "ganflow"
local dcgan = require "backbones.dcgan"
local D = dcgan.D { size = 32 }
local r = gf.stage "lmdb_reader" { name = "reader", path = "$DATA" }
local dec = gf.stage "jpeg_decode" { channels = 1 }
local b = gf.stage "batch" { size = 8 }
local d = gf.stage "d_step" { name = "d", net = D }
local g = gf.stage "g_step" { name = "g", net = dcgan.G {}, d_net = D, batch = 8 }
gf.connect(r.samples, dec.records) gf.connect(dec.samples, b.samples) gf.connect(b.batch, d.real)
gf.connect(g.fakes, d.fakes) gf.connect(d.weights, g.d_weights)
gf.run { steps = 5, quiet = true }
EOF
  "$G" run "$T/p.lua" dir="$T/p" >"$T/p.log" 2>&1
  check "[ $? -ne 0 ]" "28x28 data into a 32x32 D should fail"
  check "grep -q '(8, 1, 28, 28)' '$T/p.log' && grep -q '1, 32, 32)' '$T/p.log'" "the error should name both shapes: $(cat "$T/p.log")"
  ;;
resume_other)
  run dcgan_fashion "$T/a" steps=10 log=5
  run cgan_fashion "$T/b" steps=20 resume="$T/a"
  check "[ $? -ne 0 ]" "resuming a DC-CGAN from a DC-GAN checkpoint should fail"
  check "grep -q \"tensor '[gd].net.[0-9]*.weight' is (\" '$T/b.log'" "the error should name the first tensor that differs: $(tail -3 "$T/b.log")"
  ;;
rundir)
  : >"$T/file"
  "$G" run "$S/pipelines/dcgan_fashion.lua" data="$DATA" dir="$T/file/run" steps=5 >"$T/rd.log" 2>&1
  check "[ $? -ne 0 ]" "a run directory under a file should fail"
  check "grep -q 'cannot create run directory' '$T/rd.log' && grep -q \"$T/file\" '$T/rd.log'" "no clear error naming the path: $(cat "$T/rd.log")"
  ;;
nan)
  cat >"$T/p.lua" <<EOF
local gf = require "ganflow"
local dcgan = require "backbones.dcgan"
local G, D = dcgan.G {}, dcgan.D {}
local r = gf.stage "lmdb_reader" { name = "reader", path = "$DATA" }
local dec = gf.stage "jpeg_decode" { size = 32, channels = 1 }
local b = gf.stage "batch" { size = 8 }
local bad = gf.stage "nan_batch" { at = 30 }
local d = gf.stage "d_step" { name = "d", net = D }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = 8 }
local ck = gf.stage "checkpoint" {}
gf.connect(r.samples, dec.records) gf.connect(dec.samples, b.samples) gf.connect(b.batch, bad.batch)
gf.connect(bad.batch, d.real) gf.connect(g.fakes, d.fakes) gf.connect(d.weights, g.d_weights)
gf.connect(g.state, ck.state) gf.connect(d.state, ck.state)
gf.run { steps = 100, checkpoint_every = 20, quiet = true }
EOF
  "$G" run "$T/p.lua" dir="$T/p" >"$T/p.log" 2>&1
  check "[ $? -ne 0 ]" "a NaN batch should stop the run"
  check "grep -q \"stage 'd' failed\" '$T/p.log' && grep -q 'non-finite' '$T/p.log' && grep -q 'network D' '$T/p.log' && grep -q 'iteration 30' '$T/p.log'" "the error should name the step and the network: $(tail -3 "$T/p.log")"
  check "[ \"$(cat "$T/p/checkpoints/latest")\" = ckpt-00000020.safetensors ]" "the last good checkpoint (step 20) should be kept"
  "$G" sample "$T/p/checkpoints/ckpt-00000020.safetensors" n=4 out="$T/s.png" >/dev/null 2>&1
  check "[ $? -eq 0 ]" "the last good checkpoint should still load"
  ;;
diverge)
  # lr=1e9: weights ~1e9 after one step, D's batch-norm running variances
  # overflow to inf at iteration 2; the loss and gradient norm stay finite
  run dcgan_fashion "$T/r" steps=10 lr=1e9 checkpoint_every=1 samples=1000 log=1
  check "[ $? -ne 0 ]" "a run whose networks become non-finite should fail"
  check "grep -q 'is not finite' '$T/r.log' && grep -Eq '[dg]\.net\.[0-9]+\.[a-z_]+\[[0-9]+\] is (nan|inf|-inf)' '$T/r.log'" "the error should name the first non-finite tensor: $(tail -2 "$T/r.log")"
  check "[ \"$(cat "$T/r/checkpoints/latest" 2>/dev/null)\" = ckpt-00000001.safetensors ]" "latest should stay at the last good checkpoint (step 1): $(ls "$T/r/checkpoints")"
  bad=$(finite "$T"/r/checkpoints/*.safetensors)
  check "[ -z '$bad' ]" "a checkpoint holds non-finite tensors: $bad"
  # its weights are finite (~1e9) but G's images on running statistics may
  # not be: sample either draws them or says so, never a black grid
  "$G" sample "$(latest "$T/r")" n=4 out="$T/s.png" >"$T/s.log" 2>&1
  check "[ $? -eq 0 ] || grep -q 'generator output is not finite' '$T/s.log'" "the last good checkpoint should load: $(cat "$T/s.log")"
  ;;
nonfinite)
  # checkpoints of broken networks: sample and resume name the tensor
  run dcgan_fashion "$T/r" steps=3 samples=1000
  ck=$(latest "$T/r")
  poison "$ck" "$T/nan.safetensors" g.net.2.weight nan
  "$G" sample "$T/nan.safetensors" n=4 out="$T/s.png" >"$T/s.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'g.net.2.weight\[0\] is nan' '$T/s.log'" "sampling a NaN weight should fail naming it: $(cat "$T/s.log")"
  check "[ ! -f '$T/s.png' ]" "no grid should be written from a NaN generator"
  poison "$ck" "$T/inf.safetensors" g.net.5.running_var inf
  "$G" sample "$T/inf.safetensors" n=4 out="$T/s.png" >"$T/s.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'g.net.5.running_var\[0\] is inf' '$T/s.log'" "sampling an inf running variance should fail naming it: $(cat "$T/s.log")"
  # finite weights whose images are not (inf - inf in a convolution)
  poison "$ck" "$T/out.safetensors" g.net.4.weight 3e38 all
  "$G" sample "$T/out.safetensors" n=4 out="$T/s.png" >"$T/s.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'generator output is not finite' '$T/s.log'" "non-finite images should fail: $(cat "$T/s.log")"
  check "[ ! -f '$T/s.png' ]" "no grid should be written from non-finite images"
  poison "$ck" "$T/d.safetensors" d.net.6.running_var inf
  run dcgan_fashion "$T/c" steps=6 samples=1000 resume="$T/d.safetensors"
  check "[ $? -ne 0 ] && grep -q 'd.net.6.running_var\[0\] is inf' '$T/c.log'" "resuming a non-finite checkpoint should fail naming the tensor: $(tail -2 "$T/c.log")"
  ;;
enospc)
  [ -f "$B/tests/libgf_enospc.so" ] || { echo "FAIL: libgf_enospc.so not built"; exit 1; }
  GF_FAULT_ENOSPC=ckpt-00000040 LD_PRELOAD="$B/tests/libgf_enospc.so" \
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
    "$G" run "$S/pipelines/dcgan_fashion.lua" data="$DATA" batch=8 dir="$T/r" quiet=true steps=60 \
    checkpoint_every=20 samples=1000 >"$T/r.log" 2>&1
  check "[ $? -ne 0 ]" "a full disk during a checkpoint should fail the run"
  check "grep -q 'checkpoint at step 40 not written' '$T/r.log' && grep -q 'No space left' '$T/r.log'" "the error should say which checkpoint failed and why: $(tail -3 "$T/r.log")"
  check "[ \"$(cat "$T/r/checkpoints/latest")\" = ckpt-00000020.safetensors ]" "latest should still name the step-20 checkpoint"
  check "! ls '$T/r/checkpoints' | grep -q tmp" "a temporary file was left behind: $(ls "$T/r/checkpoints")"
  "$G" sample "$T/r/checkpoints/ckpt-00000020.safetensors" n=4 out="$T/s.png" >/dev/null 2>&1
  check "[ $? -eq 0 ]" "the previous checkpoint should be intact"
  ;;
sigint)
  "$G" run "$S/pipelines/dcgan_fashion.lua" data="$DATA" batch=8 dir="$T/r" quiet=true steps=1000000 \
    samples=1000000 log=5 >"$T/r.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    [ -s "$T/r/metrics.jsonl" ] && break
    sleep 0.1
  done
  kill -INT $pid
  wait $pid
  rc=$?
  check "[ $rc -eq 130 ]" "SIGINT should end the run with status 130, got $rc: $(tail -3 "$T/r.log")"
  check "[ -f '$T/r/checkpoints/latest' ]" "no checkpoint written on SIGINT"
  ck=$(latest "$T/r")
  "$G" sample "$ck" n=4 out="$T/s.png" >/dev/null 2>&1
  check "[ $? -eq 0 ]" "the checkpoint written on SIGINT should load"
  ;;
plot)
  run dcgan_fashion "$T/r" steps=40 log=5 samples=1000
  "$G" plot "$T/r" >"$T/p.log" 2>&1
  check "[ $? -eq 0 ]" "ganflow plot failed: $(cat "$T/p.log")"
  check "[ \"$(png_size "$T/r/plot.png" | cut -d' ' -f1)\" = 1000 ]" "plot should be 1000 pixels wide"
  check "grep -q '8 points, 3 panels' '$T/p.log'" "expected 8 points (steps 5..40) in 3 panels: $(cat "$T/p.log")"
  ;;
sample_folder)
  # `ganflow sample out=DIR/`: one PNG per image, a folder per class; the
  # files decode to the generator's size, equal the grid of the same seed,
  # and convert back with `ganflow dataset folder` (the image-folder layout)
  run dcgan_fashion "$T/r" steps=4 samples=1000 log=2
  check "[ $? -eq 0 ]" "dcgan_fashion failed: $(tail -3 "$T/r.log")"
  ck=$(latest "$T/r")
  "$G" sample "$ck" n=300 out="$T/u/" >"$T/u.log" 2>&1
  check "[ $? -eq 0 ]" "ganflow sample out=DIR/ failed: $(cat "$T/u.log")"
  check "grep -q '300 PNG files 1x32x32' '$T/u.log'" "summary line: $(cat "$T/u.log")"
  check "grep -q 'sample (PNG files) \[#*\] 100% 300/300' '$T/u.log'" "no progress line for 300 images (2 batches): $(cat "$T/u.log")"
  "$G" sample "$ck" n=16 out="$T/g.png" >/dev/null 2>&1
  out=$(/usr/bin/python3 "$S/tests/train/check_pngs.py" "$T/u" 32 32 1 "$T/g.png" 8 16 2>&1)
  rc=$?
  first=$(echo "$out" | head -1)
  check "[ $rc -eq 0 ] && [ '$first' = 'unlabelled 300' ]" "PNG files: $out"
  "$G" sample "$ck" n=4 out="$T/u/" >"$T/u2.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'not empty (force=1' '$T/u2.log'" "a non-empty DIR should be refused: $(cat "$T/u2.log")"
  "$G" sample "$ck" n=4 out="$T/u" force=1 >"$T/u2.log" 2>&1
  check "[ $? -eq 0 ]" "force=1 into an existing DIR (no slash) failed: $(cat "$T/u2.log")"
  # conditional: 25 images, classes in turn: 3 each for 0-4, 2 for 5-9
  run cgan_fashion "$T/c" steps=4 samples=1000 log=2 labels=data
  check "[ $? -eq 0 ]" "cgan_fashion failed: $(tail -3 "$T/c.log")"
  "$G" sample "$(latest "$T/c")" n=25 out="$T/cs/" >"$T/cs.log" 2>&1
  check "[ $? -eq 0 ]" "conditional sample out=DIR/ failed: $(cat "$T/cs.log")"
  out=$(/usr/bin/python3 "$S/tests/train/check_pngs.py" "$T/cs" 32 32 1 2>&1 | tr '\n' ' ')
  check "[ '$out' = '0 3 1 3 2 3 3 3 4 3 5 2 6 2 7 2 8 2 9 2 ' ]" "per-class folders: got $out"
  "$G" dataset folder "$T/cs" "$T/cds" >"$T/cds.log" 2>&1
  check "[ $? -eq 0 ]" "dataset folder of the samples failed: $(cat "$T/cds.log")"
  "$G" dataset info "$T/cds" >"$T/info.txt" 2>&1
  check "grep -q 'classes    10' '$T/info.txt' && grep -q 'records    25 ' '$T/info.txt'" "the samples should convert to 25 records in 10 classes: $(cat "$T/info.txt")"
  "$G" sample "$(latest "$T/c")" n=5 class=7 out="$T/c7/" >/dev/null 2>&1
  got=$(ls "$T/c7" | tr '\n' ' ')$(ls "$T/c7/7" 2>/dev/null | wc -l)
  check "[ '$got' = '7 5' ]" "class=7 should write 5 files in 7/, got '$got'"
  ;;
*)
  echo "unknown case $case_name"
  exit 2
  ;;
esac
[ $fails -eq 0 ] && echo "ok [$case_name]"
exit $((fails > 0))

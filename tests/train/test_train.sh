#!/usr/bin/env bash
# End-to-end tests of the training pipelines on real Fashion-MNIST data
# (Debian's dataset-fashion-mnist), each run by CTest as its own test:
#
#   test_train.sh CASE      CASE = dcgan | tensorboard | cgan | perclass | async | resume | resume_fail | pix2pix |
#                                  shape | resume_other | rundir | nan |
#                                  stall_resume | diverge | nonfinite | enospc | sigint | plot | regularise | penalties | ada | ema | pix2pix | resnets |
#                                  sample_folder | graphs | stylegan2 | sg2_noise | r3gan
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
  # the decoders run workers = "auto" (gan.data's default) where there are two cores or more
  if [ "$(nproc)" -ge 2 ]; then
    check "grep -q '{\"stage\":\"decode[^\"]*\",\"workers\":[0-9]*,\"adaptive\":true' '$f'" "no worker count of decode in $f"
  fi
}

latest() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest")"; }

# loss_sizes DIR LIMIT: prints the metrics lines whose loss_g or loss_d is
# above LIMIT in size (none: prints nothing). A spectral norm computed from
# unconverged vectors once sent SNGAN's first loss_g to 5e15: finite, and
# invisible to check_metrics.
loss_sizes() {
  /usr/bin/python3 - "$1/metrics.jsonl" "$2" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    big = {k: m[k] for k in ("loss_g", "loss_d") if isinstance(m.get(k), (int, float)) and abs(m[k]) > float(sys.argv[2])}
    if big:
        print("step", m.get("step"), big)
PY
}

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
  # not quiet: the log has the progress lines and the end-of-run tables
  "$G" run "$S/pipelines/dcgan_fashion.lua" data="$DATA" batch=$BATCH dir="$T/r" steps=$STEPS samples=$every log=20 \
    checkpoint_every=100 >"$T/r.log" 2>&1
  check "[ $? -eq 0 ]" "dcgan_fashion failed: $(tail -3 "$T/r.log")"
  check_metrics "$T/r"
  # FLOPs and MFU (docs/train.md): every training line has the FLOP/s of
  # its interval and the MFU, a fraction of the CPU's SGEMM peak; per image
  # that is one iteration's FLOPs, 700.9 MFLOP (tests/test_flops.c: D step
  # 10.92, G step 689.98) and the two Adam updates (13 per parameter of G's
  # 1.05M and D's 0.10M, over 16 images): 701.8 MFLOP, within the lag of a
  # step or two between G's updates and D's metrics
  out=$(/usr/bin/python3 - "$T/r/metrics.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
lines = [m for m in lines if "loss_d" in m and m["step"] > 20]
bad = [m["step"] for m in lines
       if not (isinstance(m.get("flop_s"), (int, float)) and m["flop_s"] > 0 and isinstance(m.get("mfu"), (int, float))
               and 0 < m["mfu"] <= 1 and 0.9 < m["flop_s"] / m["images_per_s"] / 701.8e6 < 1.1)]
print(len(lines), "lines; bad:", bad, "; mfu", [round(m.get("mfu", -1), 3) for m in lines])
sys.exit(1 if bad or not lines else 0)
PY
)
  check "[ $? -eq 0 ]" "flop_s / mfu in metrics.jsonl: $out"
  echo "metrics.jsonl: $out"
  check "grep -q 'FLOP/s MFU [0-9.]*%' '$T/r.log'" "no FLOP/s and MFU on the progress line: $(grep 'step ' "$T/r.log" | tail -1)"
  check "grep -Eq '^run +[0-9.]+ [kMGT]?FLOP +[0-9.]+ [kMGT]?FLOP/s +[0-9.]+%' '$T/r.log'" \
    "no run line in the FLOPs table: $(grep -A3 'peak of its device' "$T/r.log")"
  check "grep -Eq '^d .*cpu [0-9.]+ GFLOP/s: SGEMM, [0-9]+ threads, measured' '$T/r.log'" "d's peak not the CPU's SGEMM: $(grep '^d ' "$T/r.log")"
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
regularise)
  # LeCam in D and orthogonal regularisation in G (step-stage options),
  # written into a copy of dcgan_fashion: they change training, are
  # reported, resume exactly (the gradient penalties: case penalties)
  sed -e 's/^  classifier = /  lecam = 0.0, ortho = 0.0,\n  classifier = /' \
      -e 's/loss = opt.loss, max_batch = opt.batch,/loss = opt.loss, max_batch = opt.batch, lecam = opt.lecam,/' \
      -e 's/d_net = D, batch = opt.batch,/d_net = D, batch = opt.batch, ortho = opt.ortho,/' \
      "$S/pipelines/dcgan_fashion.lua" >"$T/reg.lua"
  check "grep -q 'lecam = opt.lecam' '$T/reg.lua' && grep -q 'ortho = opt.ortho' '$T/reg.lua'" "the test pipeline was not patched"
  rr() { local dir=$1; shift; "$G" run "$T/reg.lua" data="$DATA" batch=$BATCH dir="$dir" quiet=true samples=1000 log=1 "$@" >"$dir.log" 2>&1; }
  n=$((STEPS / 20))
  rr "$T/plain" steps=$((2 * n))
  rr "$T/a" steps=$((2 * n)) lecam=0.5 ortho=1e-3
  check "[ $? -eq 0 ]" "regularised run failed: $(tail -3 "$T/a.log")"
  check "grep -q '\"lecam\":[0-9.e-]*[1-9]' '$T/a/metrics.jsonl'" "no non-zero lecam metric: $(tail -1 "$T/a/metrics.jsonl")"
  "$B/tests/st_compare" "$(latest "$T/plain")" "$(latest "$T/a")" >"$T/cmp0.log" 2>&1
  check "[ $? -ne 0 ]" "lecam/ortho did not change the networks"
  check "grep -q 'g.net.0.weight\|d.net' '$T/cmp0.log'" "the comparison should name a differing network tensor: $(head -3 "$T/cmp0.log")"
  rr "$T/p2" steps=2
  rr "$T/o" steps=2 ortho=0.1
  "$B/tests/st_compare" "$(latest "$T/p2")" "$(latest "$T/o")" >"$T/cmpo.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'differs' '$T/cmpo.log'" "ortho alone did not change the networks: $(cat "$T/cmpo.log")"
  rr "$T/b" steps=$n lecam=0.5 ortho=1e-3
  rr "$T/c" steps=$((2 * n)) lecam=0.5 ortho=1e-3 resume="$T/b"
  check "[ $? -eq 0 ]" "resumed regularised run failed: $(tail -3 "$T/c.log")"
  "$B/tests/st_compare" "$(latest "$T/a")" "$(latest "$T/c")" >"$T/cmp.log" 2>&1
  check "[ $? -eq 0 ]" "N + resume + N differs from 2N with lecam/ortho: $(cat "$T/cmp.log")"
  ;;
penalties)
  # R1 (in the D step, and lazy), WGAN-GP and the path length through the
  # nn engine's double backward: they run, report their values, change
  # training, resume exactly (the lazy schedules, gp's generator and pl's
  # mean in the checkpoint); the refusals name what is at fault
  n=$((STEPS / 20))
  pr() { local dir=$1; shift; run dcgan_fashion "$dir" samples=1000 log=1 "$@"; }
  pr "$T/plain" steps=4
  for c in "r1 r1=10 r1_every=1" "r1lazy r1=10 r1_every=3" "gp loss=wgan gp=10" "pl pl=2 pl_every=2"; do
    set -- $c
    k=$1
    shift
    pr "$T/$k" steps=4 "$@"
    check "[ $? -eq 0 ]" "$k: the run failed: $(tail -3 "$T/$k.log")"
    m=${k%lazy}
    check "grep -q '\"$m\":[0-9.e-]*[1-9]' '$T/$k/metrics.jsonl'" "$k: no non-zero $m metric: $(tail -1 "$T/$k/metrics.jsonl")"
    check "! grep -q '\"$m\":null' '$T/$k/metrics.jsonl'" "$k: a non-finite $m metric"
  done
  check "grep -q '\"pl_mean\":[0-9.e-]*[1-9]' '$T/pl/metrics.jsonl'" "no pl_mean metric"
  # which lines carry r1: a line holds the D iterations after the previous
  # line's up to its own ("sources" d), however the messages of g and d
  # interleaved (log=1 groups them by arrival); it must carry r1 exactly
  # when one of them ran R1 (every iteration; lazy every 3: iterations 1, 4)
  r1_lines() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
ran = set(int(v) for v in sys.argv[2].split(","))
prev, seen = 0, set()
for line in open(sys.argv[1]):
    m = json.loads(line)
    d = m.get("sources", {}).get("d")
    if not d:
        continue
    last = int(d[0])
    covered = set(range(prev + 1, last + 1))
    assert ("r1" in m) == bool(covered & ran), (sorted(covered), "r1" in m)
    seen |= covered
    prev = last
assert seen >= ran, (sorted(seen), sorted(ran))
PY
  }
  r1_lines "$T/r1lazy/metrics.jsonl" 1,4 >"$T/r1lazy_lines.log" 2>&1
  check "[ $? -eq 0 ]" "lazy R1 every 3 steps of 4 should report at iterations 1 and 4: $(tail -2 "$T/r1lazy_lines.log")"
  r1_lines "$T/r1/metrics.jsonl" 1,2,3,4 >"$T/r1_lines.log" 2>&1
  check "[ $? -eq 0 ]" "R1 every step should report at every iteration: $(tail -2 "$T/r1_lines.log")"
  "$B/tests/st_compare" "$(latest "$T/plain")" "$(latest "$T/r1")" >"$T/cmp_r1.log" 2>&1
  check "[ $? -ne 0 ]" "r1 did not change the networks"
  # TensorBoard gets them too: every figure of metrics.jsonl is a scalar
  # of the event file (check_tfevents.py), and gp and pl are figures there
  if /usr/bin/python3 -c 'import google.protobuf' 2>/dev/null; then
    for k in gp pl; do
      /usr/bin/python3 "$S/tests/train/check_tfevents.py" "$T/$k" 274 274 >"$T/tb_$k.log" 2>&1
      check "[ $? -eq 0 ]" "$k: the event file: $(tail -3 "$T/tb_$k.log")"
    done
  fi
  # resume: N + resume + N = 2N, with the lazy schedules mid-interval
  for c in "r1lazy r1=10 r1_every=3" "gp loss=wgan gp=10" "pl pl=2 pl_every=3"; do
    set -- $c
    k=$1
    shift
    pr "$T/${k}_a" steps=$((2 * n)) "$@"
    pr "$T/${k}_b" steps=$((n + 1)) "$@"
    pr "$T/${k}_c" steps=$((2 * n)) resume="$T/${k}_b" "$@"
    check "[ $? -eq 0 ]" "$k: the resumed run failed: $(tail -3 "$T/${k}_c.log")"
    "$B/tests/st_compare" "$(latest "$T/${k}_a")" "$(latest "$T/${k}_c")" >"$T/cmp_$k.log" 2>&1
    check "[ $? -eq 0 ]" "$k: N + resume + N differs from 2N: $(head -3 "$T/cmp_$k.log")"
  done
  # refusals
  pr "$T/gpbce" steps=2 gp=10
  check "[ $? -ne 0 ] && grep -q \"parameter 'gp'.*loss = \\\"wgan\\\"\" '$T/gpbce.log'" "gp with loss = bce: $(tail -1 "$T/gpbce.log")"
  run sngan_fashion "$T/attn" ch_g=8 ch_d=8 n_dis=1 steps=2 samples=1000 log=1 attention=16 r1=1
  check "[ $? -ne 0 ] && grep -q \"parameter 'r1'.*(attention): has no double backward\" '$T/attn.log'" \
    "r1 with a self-attention D should name the layer: $(tail -1 "$T/attn.log")"
  run sngan_fashion "$T/cbn" ch_g=8 ch_d=8 n_dis=1 steps=2 samples=1000 log=1 classes=10 pl=2
  check "[ $? -ne 0 ] && grep -q \"parameter 'pl'.*(cbn): has no double backward\" '$T/cbn.log'" \
    "pl with a cBN G should name the layer: $(tail -1 "$T/cbn.log")"
  ;;
graphs)
  # the GPU path of g_step / d_step on the CPU backend's device check
  # (GANFLOW_CPU_DEVICE_CHECK=1, docs/cuda.md "Step stages"): captured
  # steps replayed, fakes and D weights in device memory behind events,
  # real batches staged through a copy stream, losses and D outputs read a
  # step later. It obeys every rule of the CUDA backend (an op that needs
  # the host inside a step, a host buffer in a step, a replay whose ops
  # differ would fail the run) and trains exactly as the eager CPU path:
  # checkpoints and every metrics value identical, step by step
  cat >"$T/gr.lua" <<EOF
local gf = require "ganflow"
local gan = require "gan"
local dcgan = require "backbones.dcgan"
local opt = gf.args { acc = 1, dsteps = 1, warmup = 0, ema = 0.0, ema_start = 0, classes = 0, graphs = true,
                      loss = "bce", nan_at = 0, ckpt = 0, precision = "fp32",
                      r1 = 0.0, r1_every = 16, gp = 0.0, pl = 0.0, pl_every = 4, ada = "" }
local cl = opt.classes > 0 and opt.classes or nil
local G = dcgan.G { z = 100, size = 32, channels = 1, classes = cl }
local D = dcgan.D { size = 32, channels = 1, classes = cl, sigmoid = opt.loss == "bce", bn = opt.gp == 0,
                   ada = opt.ada ~= "" and opt.ada or nil, ada_p = opt.ada ~= "" and 0.5 or nil }
local real = gan.data { path = "$DATA", size = 32, batch = $BATCH }
local d = gf.stage "d_step" { name = "d", net = D, max_batch = $BATCH, accumulate = opt.acc, d_steps = opt.dsteps,
                              lr_warmup = opt.warmup, graphs = opt.graphs, loss = opt.loss, precision = opt.precision,
                              r1 = opt.r1, r1_every = opt.r1_every, gp = opt.gp }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = $BATCH, accumulate = opt.acc, loss = opt.loss,
                              lr_warmup = opt.warmup, ema = opt.ema, ema_start = opt.ema_start, graphs = opt.graphs,
                              publish_every = 1000, precision = opt.precision, pl = opt.pl, pl_every = opt.pl_every }
local ck = gf.stage "checkpoint" {}
local mg = gf.stage "metrics" { name = "mg", every = 1, file = "mg.jsonl", tensorboard = false }
local md = gf.stage "metrics" { name = "md", every = 1, file = "md.jsonl", tensorboard = false }
if opt.nan_at > 0 then
  local bad = gf.stage "nan_batch" { at = opt.nan_at }
  gf.connect(real.batch, bad.batch) gf.connect(bad.batch, d.real)
else
  gf.connect(real.batch, d.real)
end
gf.connect(g.fakes, d.fakes, { depth = 1 }) gf.connect(d.weights, g.d_weights, { depth = 1 })
gf.connect(g.metrics, mg.inp) gf.connect(d.metrics, md.inp)
gf.connect(g.state, ck.state) gf.connect(d.state, ck.state)
gf.run { steps = 100, checkpoint_every = opt.ckpt, seed = 1 }
EOF
  gr() { local dir=$1; shift; "$G" run "$T/gr.lua" dir="$dir" quiet=true "$@" >"$dir.log" 2>&1; }
  # metrics_same A B: every value of every line of md/mg.jsonl but the clock's and the
  # runtime's (edge depths, decode's worker count: measured, not computed)
  metrics_same() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
def load(d):
    out = []
    for f in ("md.jsonl", "mg.jsonl"):
        for line in open(d + "/" + f):
            m = json.loads(line)
            out.append({k: v for k, v in m.items() if k not in ("time", "images_per_s", "flop_s", "mfu", "sources", "edges", "workers")})
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
if a != b or len(a) < 2:
    print("differ:", a, b)
    sys.exit(1)
PY
  }
  n=4
  for cfg in "" "acc=2 dsteps=2 warmup=3 ema=0.9 ema_start=2" "classes=10 loss=hinge"; do
    tag=$(echo "x $cfg" | tr -c 'a-z0-9\n' '_')
    gr "$T/e$tag" steps=$n $cfg
    check "[ $? -eq 0 ]" "eager run ($cfg) failed: $(tail -3 "$T/e$tag.log")"
    GANFLOW_CPU_DEVICE_CHECK=1 gr "$T/c$tag" steps=$n $cfg
    check "[ $? -eq 0 ]" "device-check run ($cfg) failed: $(tail -3 "$T/c$tag.log")"
    check "grep -q 'D steps: [0-9]* eager, [1-9][0-9]* captured, [1-9][0-9]* replayed' '$T/c$tag.log' && grep -q 'G steps: [0-9]* eager, [1-9][0-9]* captured, [1-9][0-9]* replayed' '$T/c$tag.log'" "($cfg) no step was captured and replayed: $(grep -h 'steps:' "$T/c$tag.log")"
    check "grep -q 'fakes in device memory' '$T/c$tag.log' && grep -q 'D weights to g in device memory' '$T/c$tag.log' && grep -q 'real batches copied ahead' '$T/c$tag.log'" "($cfg) the device paths were not taken: $(grep -h 'steps:' "$T/c$tag.log")"
    "$B/tests/st_compare" "$(latest "$T/e$tag")" "$(latest "$T/c$tag")" >"$T/cmp$tag.log" 2>&1
    check "[ $? -eq 0 ] && grep -q 'tensors identical' '$T/cmp$tag.log'" "($cfg) graph steps differ from eager ones: $(cat "$T/cmp$tag.log")"
    metrics_same "$T/e$tag" "$T/c$tag" >"$T/m$tag.log" 2>&1
    check "[ $? -eq 0 ]" "($cfg) the metrics of graph steps differ: $(head -c 600 "$T/m$tag.log")"
  done
  # the gradient penalties, LeCam's and ADA's state stay on the device
  # (docs/cuda.md "Nothing eager"): R1 in the step, WGAN-GP and pl_every = 1
  # are captured with their step, the lazy R1 and path-length steps are
  # captured steps of their own, and the metrics (penalties, p, r_t) are
  # read a step later like the losses; the results are the eager path's
  for cfg in "r1=10 r1_every=2 pl=2 pl_every=2" "loss=wgan gp=10 pl=2 pl_every=1" "r1=10 r1_every=1" "ada=bgc r1=1 r1_every=2"; do
    tag=$(echo "p $cfg" | tr -c 'a-z0-9\n' '_')
    gr "$T/e$tag" steps=$n $cfg
    check "[ $? -eq 0 ]" "eager run ($cfg) failed: $(tail -3 "$T/e$tag.log")"
    GANFLOW_CPU_DEVICE_CHECK=1 gr "$T/c$tag" steps=$n $cfg
    check "[ $? -eq 0 ]" "device-check run ($cfg) failed: $(tail -3 "$T/c$tag.log")"
    "$B/tests/st_compare" "$(latest "$T/e$tag")" "$(latest "$T/c$tag")" >"$T/cmp$tag.log" 2>&1
    check "[ $? -eq 0 ] && grep -q 'tensors identical' '$T/cmp$tag.log'" "($cfg) device-check steps differ from eager ones: $(cat "$T/cmp$tag.log")"
    metrics_same "$T/e$tag" "$T/c$tag" >"$T/m$tag.log" 2>&1
    check "[ $? -eq 0 ]" "($cfg) the metrics differ: $(head -c 600 "$T/m$tag.log")"
  done
  check "grep -q '\"r1\":[0-9.e-]*[1-9]' '$T/cp_r1_10_r1_every_2_pl_2_pl_every_2/md.jsonl' && grep -q '\"pl\":' '$T/cp_r1_10_r1_every_2_pl_2_pl_every_2/mg.jsonl'" "lazy r1/pl: no r1 or pl metric"
  check "grep -q 'D steps: [0-9]* eager, [1-9][0-9]* captured, [1-9][0-9]* replayed' '$T/cp_r1_10_r1_every_2_pl_2_pl_every_2.log' && grep -q 'G steps: [0-9]* eager, [1-9][0-9]* captured, [1-9][0-9]* replayed' '$T/cp_r1_10_r1_every_2_pl_2_pl_every_2.log'" "lazy r1/pl: the steps should stay captured: $(grep -h 'steps:' "$T/cp_r1_10_r1_every_2_pl_2_pl_every_2.log")"
  for tag in p_ada_bgc_r1_1_r1_every_2 p_loss_wgan_gp_10_pl_2_pl_every_1 p_r1_10_r1_every_1; do
    check "[ \"\$(grep -c ' steps: [0-9]* eager, [1-9][0-9]* captured, [0-9]* replayed as graphs (0 eager after warm-up, 0 host waits inside steps' '$T/c$tag.log')\" = 2 ]" "($tag) D and G steps should be captured, none eager after the warm-up: $(grep -h 'steps:' "$T/c$tag.log")"
  done
  check "grep -q '\"ada_p\":' '$T/cp_ada_bgc_r1_1_r1_every_2/md.jsonl' && grep -q '\"ada_rt\":' '$T/cp_ada_bgc_r1_1_r1_every_2/md.jsonl'" "ada: p and r_t reported"
  check "grep -q '\"gp\":[0-9]' '$T/cp_loss_wgan_gp_10_pl_2_pl_every_1/md.jsonl' && grep -q '\"pl\":' '$T/cp_loss_wgan_gp_10_pl_2_pl_every_1/mg.jsonl'" "gp, pl: reported"
  # precision = "tf32" on the CPU: plain fp32, the same bits
  gr "$T/tf32" steps=$n precision=tf32
  "$B/tests/st_compare" "$(latest "$T/ex_")" "$(latest "$T/tf32")" >"$T/cmptf.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'tensors identical' '$T/cmptf.log'" "precision = tf32 on the CPU should be fp32: $(cat "$T/cmptf.log")"
  gr "$T/bf" steps=2 precision=bf16
  check "[ $? -ne 0 ] && grep -q 'precision bf16 is not supported' '$T/bf.log'" "bf16 on the CPU should be refused by name: $(tail -2 "$T/bf.log")"
  # classifier_step runs its step through the same step driver: under the
  # check, one warm-up and one capture, then replays; the classifier and its
  # checkpoint are the eager run's bit for bit
  for mode in e c; do
    env=""
    [ $mode = c ] && env="GANFLOW_CPU_DEVICE_CHECK=1"
    env $env "$G" run "$S/pipelines/classifier_fashion.lua" data="$DATA" test= batch=16 log=1 steps=6 \
      out="$T/clf$mode.safetensors" dir="$T/clf$mode" quiet=true >"$T/clf$mode.log" 2>&1
    check "[ $? -eq 0 ]" "classifier ($mode) failed: $(tail -3 "$T/clf$mode.log")"
  done
  check "grep -q 'classifier steps: 1 eager, 1 captured, 4 replayed as graphs (0 eager after warm-up, 0 host waits inside steps' '$T/clfc.log'" "the classifier's steps should be captured: $(grep -h 'steps:' "$T/clfc.log")"
  "$B/tests/st_compare" "$T/clfe.safetensors" "$T/clfc.safetensors" >"$T/cmpclf.log" 2>&1 &&
    "$B/tests/st_compare" "$(latest "$T/clfe")" "$(latest "$T/clfc")" >>"$T/cmpclf.log" 2>&1
  check "[ $? -eq 0 ]" "the classifier's graph steps differ from eager ones: $(cat "$T/cmpclf.log")"
  # graphs = false: no captures, the same results
  GANFLOW_CPU_DEVICE_CHECK=1 gr "$T/off" steps=$n graphs=false
  check "[ $? -eq 0 ] && [ \"\$(grep -c ' 0 captured, 0 replayed' '$T/off.log')\" = 2 ]" "graphs = false still captured: $(grep -h 'steps:' "$T/off.log")"
  "$B/tests/st_compare" "$(latest "$T/ex_")" "$(latest "$T/off")" >"$T/cmpoff.log" 2>&1
  check "[ $? -eq 0 ]" "graphs = false differs: $(cat "$T/cmpoff.log")"
  # a NaN batch at iteration 6 with a loss that passes NaN through (ls):
  # read a step later, still named by its step; the checkpoint of step 4
  # stays the last (a checkpoint is a read point)
  for mode in eager check; do
    env=""
    [ $mode = check ] && env="GANFLOW_CPU_DEVICE_CHECK=1"
    env $env "$G" run "$T/gr.lua" dir="$T/nan$mode" quiet=true steps=20 loss=ls nan_at=6 ckpt=4 >"$T/nan$mode.log" 2>&1
    check "[ $? -ne 0 ]" "($mode) a NaN batch should stop the run"
    check "grep -q \"stage 'd' failed\" '$T/nan$mode.log' && grep -q 'iteration 6: the D loss is nan (non-finite) in network D' '$T/nan$mode.log'" "($mode) the error should name iteration 6: $(tail -3 "$T/nan$mode.log")"
    check "[ \"$(cat "$T/nan$mode/checkpoints/latest")\" = ckpt-00000004.safetensors ]" "($mode) the last good checkpoint (step 4) should be kept: $(cat "$T/nan$mode/checkpoints/latest")"
  done
  ;;
ada)
  # StyleGAN2-ADA's augmentation (dcgan_fashion ada=bgc): p moves every 4 D
  # steps by exactly batch x 4 / (ada_kimg x 1000) in the direction of
  # sign(r_t - 0.6); ada_p and ada_rt in metrics.jsonl (their latest values); p is
  # checkpointed (D's buffer d.net.ada.p) with the controller's partial
  # interval (d.ada): N + resume + N = 2N mid-interval; refusals named
  ar() { local dir=$1; shift; run dcgan_fashion "$dir" samples=1000 log=1 ada=bgc ada_p=0.5 ada_kimg=1.0 "$@"; }
  ar "$T/a" steps=12
  check "[ $? -eq 0 ]" "the ADA run failed: $(tail -3 "$T/a.log")"
  /usr/bin/python3 - "$T/a/metrics.jsonl" $BATCH >"$T/steps.log" 2>&1 <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if '"loss_d"' in l]
batch, p = int(sys.argv[2]), 0.5
step = batch * 4 / 1000.0
seen = 0
for m in lines:
    if m["step"] % 4 == 0:
        rt = m["ada_rt"]
        p = min(1.0, max(0.0, p + (1 if rt > 0.6 else -1 if rt < 0.6 else 0) * step))
        seen += 1
    assert "ada_p" in m, m
    assert abs(m["ada_p"] - p) < 1e-6, (m["step"], m["ada_p"], p)
assert seen == 3, seen
print("p followed r_t:", [(m["step"], m.get("ada_rt"), m["ada_p"]) for m in lines if m["step"] % 4 == 0])
PY
  check "[ $? -eq 0 ]" "ada_p did not move by the rule: $(tail -3 "$T/steps.log")"
  /usr/bin/python3 - "$(latest "$T/a")" "$T/a/metrics.jsonl" >"$T/ck.log" 2>&1 <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
e = h["d.net.ada.p"]
p = struct.unpack("<f", raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]])[0]
last = [json.loads(l) for l in open(sys.argv[2]) if '"ada_p"' in l][-1]["ada_p"]
assert abs(p - last) < 1e-7, (p, last)
assert h["d.ada"]["shape"] == [5], h["d.ada"]
PY
  check "[ $? -eq 0 ]" "the checkpoint's p: $(tail -2 "$T/ck.log")"
  ar "$T/b" steps=6
  ar "$T/c" steps=12 resume="$T/b"
  check "[ $? -eq 0 ]" "the resumed ADA run failed: $(tail -3 "$T/c.log")"
  "$B/tests/st_compare" "$(latest "$T/a")" "$(latest "$T/c")" >"$T/cmp.log" 2>&1
  check "[ $? -eq 0 ]" "N + resume + N differs from 2N with ADA: $(head -3 "$T/cmp.log")"
  # refusals: a bad pipe names the layer, a bad target the option
  ar "$T/bad" steps=2 ada=bgcx
  check "[ $? -ne 0 ] && grep -q \"(ada): pipe \\\"bgcx\\\": unknown part 'x'\" '$T/bad.log'" "a bad pipe: $(tail -1 "$T/bad.log")"
  ar "$T/bad2" steps=2 ada_target=1.5
  check "[ $? -ne 0 ] && grep -q \"ada_target\" '$T/bad2.log'" "ada_target = 1.5: $(tail -1 "$T/bad2.log")"
  ar "$T/bad3" steps=2 ada_p=-0.1
  check "[ $? -ne 0 ] && grep -q \"(ada): p = -0.1 is out of range\" '$T/bad3.log'" "ada_p = -0.1: $(tail -1 "$T/bad3.log")"
  ;;
ema)
  # g_step's moving average of G: checkpointed, the average of what G was
  # at each step (check_ema.py on consecutive checkpoints), a copy until
  # ema_start, resumed exactly; ganflow sample uses it unless ema=0,
  # truncation bounds the noise
  sed -e 's/^  classifier = /  ema = 0.0, ema_start = 0,\n  classifier = /' \
      -e 's/d_net = D, batch = opt.batch,/d_net = D, batch = opt.batch, ema = opt.ema, ema_start = opt.ema_start,/' \
      "$S/pipelines/dcgan_fashion.lua" >"$T/ema.lua"
  er() { local dir=$1; shift; "$G" run "$T/ema.lua" data="$DATA" batch=$BATCH dir="$dir" quiet=true samples=1000 log=10 "$@" >"$dir.log" 2>&1; }
  er "$T/a" steps=6 checkpoint_every=1 ema=0.9 ema_start=2
  check "[ $? -eq 0 ]" "run with ema failed: $(tail -3 "$T/a.log")"
  ck() { printf '%s/checkpoints/ckpt-%08d.safetensors' "$1" "$2"; }
  er "$T/b" steps=3 checkpoint_every=1 ema=0.9 ema_start=2
  for k in b/2 b/3 a/6; do # the checkpoint stage keeps the last 3 files
    r=${k%/*} k=${k#*/}
    /usr/bin/python3 "$S/tests/train/check_ema.py" "$(ck "$T/$r" $((k - 1)))" "$(ck "$T/$r" $k)" 0.9 2 >"$T/ema$k.log" 2>&1
    check "[ $? -eq 0 ]" "moving average at step $k: $(cat "$T/ema$k.log")"
  done
  # a G with spectral norm (BigGAN's, in its cBN projections and convs too):
  # u, v of the average are iterated on the averaged weight, so eval-mode
  # sigma = u^T W v stays the average's spectral norm
  run biggan_fashion "$T/sn" ch=4 n_dis=1 steps=5 checkpoint_every=1 ema=0.9 ema_start=2 samples=1000 log=10
  check "[ $? -eq 0 ]" "biggan with ema failed: $(tail -3 "$T/sn.log")"
  for k in 4 5; do
    /usr/bin/python3 "$S/tests/train/check_ema.py" "$(ck "$T/sn" $((k - 1)))" "$(ck "$T/sn" $k)" 0.9 2 >"$T/emasn$k.log" 2>&1
    check "[ $? -eq 0 ] && grep -q '([1-9][0-9]* spectral norm vectors)' '$T/emasn$k.log'" \
      "moving average of an SN generator at step $k: $(cat "$T/emasn$k.log")"
  done
  er "$T/c" steps=6 checkpoint_every=1 ema=0.9 ema_start=2 resume="$T/b"
  check "[ $? -eq 0 ]" "resumed run with ema failed: $(tail -3 "$T/c.log")"
  "$B/tests/st_compare" "$(latest "$T/a")" "$(latest "$T/c")" >"$T/cmp.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'tensors identical' '$T/cmp.log'" "N + resume + N differs from 2N with ema: $(cat "$T/cmp.log")"
  # sample: the average by default, the trained weights with ema=0
  "$G" sample "$T/a" n=8 out="$T/s_ema.png" npy="$T/s_ema" >"$T/s1.log" 2>&1
  check "grep -q 'moving-average weights' '$T/s1.log'" "sample should say it uses the average: $(cat "$T/s1.log")"
  "$G" sample "$T/a" n=8 ema=0 out="$T/s_net.png" npy="$T/s_net" >"$T/s2.log" 2>&1
  check "[ $? -eq 0 ] && ! grep -q 'moving-average' '$T/s2.log'" "ema=0 should use the trained weights: $(cat "$T/s2.log")"
  check "! cmp -s '$T/s_ema.images.npy' '$T/s_net.images.npy'" "the average and the trained weights give the same images"
  check "cmp -s '$T/s_ema.z.npy' '$T/s_net.z.npy'" "the same seed should draw the same noise"
  er "$T/p" steps=1
  "$G" sample "$T/p" n=4 ema=1 out="$T/x.png" >"$T/s3.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'no moving average' '$T/s3.log'" "ema=1 without an average should fail: $(cat "$T/s3.log")"
  "$G" sample "$T/a" n=64 truncation=0.5 out="$T/t.png" npy="$T/t" >"$T/s4.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'truncation 0.5' '$T/s4.log'" "truncation run failed: $(cat "$T/s4.log")"
  /usr/bin/python3 -c "import numpy as np, sys; z = np.load('$T/t.z.npy'); sys.exit(0 if np.abs(z).max() <= 0.5 and np.abs(z).max() > 0.4 else 1)"
  check "[ $? -eq 0 ]" "truncation=0.5: noise outside [-0.5, 0.5] (or not spread up to it)"
  ;;
resnets)
  # the ResNet GAN pipelines at tiny widths: they run, the conditional
  # BigGAN's grid has a row per class drawn from G's moving average, and
  # N + resume + N equals 2N bit for bit; biggan_imagenet runs on synth data
  n=3
  for p in "sngan_fashion ch_g=16 ch_d=16 n_dis=2" "sngan_fashion ch_g=16 ch_d=16 classes=10 attention=16 augment=color,translation,cutout" \
           "biggan_fashion ch=4 n_dis=2 ema_start=1 lecam=0.1"; do
    set -- $p
    name=$1; shift
    tag=$(echo "$*" | tr -c 'a-z0-9\n' '_' | cut -c1-40)
    run $name "$T/a$tag" steps=$((2 * n)) samples=1000 log=1 "$@"
    check "[ $? -eq 0 ]" "$name $*: run failed: $(tail -3 "$T/a$tag.log")"
    check_metrics "$T/a$tag"
    big=$(loss_sizes "$T/a$tag" 100)
    check "[ -z \"\$big\" ]" "$name $*: losses out of scale in the first steps: $big"
    run $name "$T/b$tag" steps=$n samples=1000 log=1 "$@"
    run $name "$T/c$tag" steps=$((2 * n)) samples=1000 log=1 resume="$T/b$tag" "$@"
    check "[ $? -eq 0 ]" "$name $*: resumed run failed: $(tail -3 "$T/c$tag.log")"
    "$B/tests/st_compare" "$(latest "$T/a$tag")" "$(latest "$T/c$tag")" >"$T/cmp$tag.log" 2>&1
    check "[ $? -eq 0 ] && grep -q 'tensors identical' '$T/cmp$tag.log'" "$name $*: N + resume + N differs from 2N: $(cat "$T/cmp$tag.log")"
  done
  tag=$(echo "ch=4 n_dis=2 ema_start=1 lecam=0.1" | tr -c 'a-z0-9\n' '_' | cut -c1-40)
  check "[ \"$(png_size "$T/a$tag/samples/latest.png")\" = '342 342' ]" "biggan_fashion: a 10x10 grid (a row per class) should be 342x342, got $(png_size "$T/a$tag/samples/latest.png")"
  "$G" sample "$T/a$tag" n=20 out="$T/bg.png" >"$T/bg.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'moving-average weights' '$T/bg.log'" "biggan sample should use G's average: $(cat "$T/bg.log")"
  check "[ \"$(png_size "$T/bg.png")\" = '70 342' ]" "20 samples of 10 classes: 10 rows of 2 (70x342), got $(png_size "$T/bg.png")"
  "$G" dataset synth "$T/synth" count=16 classes=3 width=160 height=140 >/dev/null 2>&1
  "$G" run "$S/pipelines/biggan_imagenet.lua" data="$T/synth" ch=8 batch=2 steps=2 dir="$T/bi" quiet=true >"$T/bi.log" 2>&1
  check "[ $? -eq 0 ] && [ -f '$T/bi/checkpoints/ckpt-00000002.safetensors' ]" "biggan_imagenet on synth data failed: $(tail -3 "$T/bi.log")"
  check "[ \"\$(png_size '$T/bi/samples/latest.png' | cut -d' ' -f2)\" -gt 128 ]" "biggan_imagenet grid should hold 128x128 images"
  # 1000 classes taken from the data (ImageNet's count): the grid shows the
  # first 8, 4 images each (a row per class for all 1000 was one batch of
  # 8000 images: out of memory); attention off keeps the test light
  "$G" dataset synth "$T/synth1k" count=2000 classes=1000 width=16 height=16 >/dev/null 2>&1
  "$G" run "$S/pipelines/biggan_imagenet.lua" data="$T/synth1k" ch=8 batch=2 steps=2 attention=0 dir="$T/bk" quiet=true >"$T/bk.log" 2>&1
  check "[ $? -eq 0 ] && [ -f '$T/bk/checkpoints/ckpt-00000002.safetensors' ]" "biggan_imagenet on 1000 classes failed: $(tail -3 "$T/bk.log")"
  check "[ \"$(png_size "$T/bk/samples/latest.png")\" = '522 1042' ]" "biggan_imagenet on 1000 classes: 8 rows of 4 128x128 images (522x1042), got $(png_size "$T/bk/samples/latest.png")"
  ;;
sg2_noise)
  # StyleGAN2's noise strength is one per synthesis layer (StyleGAN2-ADA's);
  # a checkpoint of before, one per channel (tests/train/old_noise.py makes
  # one from a new one, each strength copied to its channels): sample and
  # eval load it as it was trained (the same images: equal per-channel
  # strengths are the scalar), resume= with the scalar default is refused
  # naming the tensor and the option, and resumes with noise_strength=channel
  run stylegan2_fashion "$T/n" steps=2 samples=1000 log=1 ch=8 z=16 w=16 ada=
  check "[ $? -eq 0 ]" "stylegan2_fashion failed: $(tail -3 "$T/n.log")"
  ck=$(latest "$T/n")
  wide=$(/usr/bin/python3 "$S/tests/train/old_noise.py" "$ck" "$T/old.safetensors" 2>&1)
  check "[ \"\$wide\" -ge 14 ]" "the old checkpoint should widen every strength (net, ema, Adam's m and v): $wide"
  "$G" sample "$ck" n=8 out="$T/new.png" npy="$T/new" >"$T/new.log" 2>&1
  "$G" sample "$T/old.safetensors" n=8 out="$T/old.png" npy="$T/old" >"$T/old.log" 2>&1
  check "[ $? -eq 0 ]" "sample should load a checkpoint with per-channel strengths: $(cat "$T/old.log")"
  d=$(/usr/bin/python3 -c 'import sys, numpy as np
print(float(np.abs(np.load(sys.argv[1]) - np.load(sys.argv[2])).max()))' "$T/new.images.npy" "$T/old.images.npy" 2>&1)
  check "[ \"\$d\" = 0.0 ]" "the old checkpoint's images should be the new one's: max difference $d"
  run stylegan2_fashion "$T/r" steps=3 ch=8 z=16 w=16 ada= resume="$T/old.safetensors"
  rc=$?
  check "[ $rc -ne 0 ] && grep -qF \"tensor 'g.net.b4_conv1_noise.noise_strength' is (8) f32, expected (1) f32: one noise strength per channel\" '$T/r.log' && grep -qF 'noise_strength = \"channel\"' '$T/r.log'" \
    "resume with the scalar should be refused naming the tensor and the option: $(tail -2 "$T/r.log")"
  run stylegan2_fashion "$T/r2" steps=3 ch=8 z=16 w=16 ada= noise_strength=channel resume="$T/old.safetensors"
  check "[ $? -eq 0 ]" "resume with noise_strength=channel should continue the old run: $(tail -3 "$T/r2.log")"
  ;;
stylegan2)
  # StyleGAN2 at a tiny width (lazy R1 every 2 D steps, G's average with the
  # ramp, ADA on by default with p moving fast): N + resume + N equals 2N bit for bit, unconditional
  # with style mixing (mixing=0.9: z2 and the cutoffs drawn again on resume),
  # conditional, and with the path length (pl=2 pl_every=2: on the ws, its
  # mean checkpointed); the tracked mean of w moves; truncation= in w-space shrinks
  # the spread of the samples and leaves z alone (sampling a G with mixing
  # layers: eval forwards); the conditional grid has a row per class
  n=3
  for p in "ch=8 z=16 w=16 r1_every=2 ada_kimg=1 ada_p=0.3 mixing=0.9" "ch=8 z=16 w=16 r1_every=2 classes=10 mbstd=2 ada=" \
           "ch=8 z=16 w=16 r1_every=2 pl=2 pl_every=2 ada="; do
    tag=$(echo "$p" | tr -c 'a-z0-9\n' '_' | cut -c1-40)
    run stylegan2_fashion "$T/a$tag" steps=$((2 * n)) samples=1000 log=1 $p
    check "[ $? -eq 0 ]" "stylegan2_fashion $p: run failed: $(tail -3 "$T/a$tag.log")"
    check_metrics "$T/a$tag"
    check "grep -q '\"r1\":[0-9]' '$T/a$tag/metrics.jsonl'" "stylegan2_fashion $p: no r1 in the metrics"
    case "$p" in *pl=2*)   # the path length on the ws (penalty_at), lazily every 2 G steps
      check "grep -q '\"pl\":[0-9.e-]*[1-9]' '$T/a$tag/metrics.jsonl' && grep -q '\"pl_mean\":[0-9.e-]*[1-9]' '$T/a$tag/metrics.jsonl'" "stylegan2_fashion $p: no pl or pl_mean in the metrics: $(tail -2 "$T/a$tag.log")" ;;
    esac
    case "$p" in *ada_kimg*)
      check "grep -q '\"ada_p\":0.2' '$T/a$tag/metrics.jsonl' && grep -q '\"ada_rt\":' '$T/a$tag/metrics.jsonl'" "stylegan2_fashion $p: ada_p did not move from 0.3 or no ada_rt in the metrics (ADA is on by default)" ;;
    esac
    run stylegan2_fashion "$T/b$tag" steps=$n samples=1000 log=1 $p
    run stylegan2_fashion "$T/c$tag" steps=$((2 * n)) samples=1000 log=1 resume="$T/b$tag" $p
    check "[ $? -eq 0 ]" "stylegan2_fashion $p: resumed run failed: $(tail -3 "$T/c$tag.log")"
    "$B/tests/st_compare" "$(latest "$T/a$tag")" "$(latest "$T/c$tag")" >"$T/cmp$tag.log" 2>&1
    check "[ $? -eq 0 ] && grep -q 'tensors identical' '$T/cmp$tag.log'" "stylegan2_fashion $p: N + resume + N differs from 2N: $(cat "$T/cmp$tag.log")"
  done
  a="$T/a$(echo "ch=8 z=16 w=16 r1_every=2 ada_kimg=1 ada_p=0.3 mixing=0.9" | tr -c 'a-z0-9\n' '_' | cut -c1-40)"
  ac="$T/a$(echo "ch=8 z=16 w=16 r1_every=2 classes=10 mbstd=2 ada=" | tr -c 'a-z0-9\n' '_' | cut -c1-40)"
  check "[ \"$(png_size "$ac/samples/latest.png")\" = '342 342' ]" "conditional StyleGAN2: a 10x10 grid should be 342x342, got $(png_size "$ac/samples/latest.png")"
  "$G" sample "$a" n=16 out="$T/s0.png" npy="$T/s0" >"$T/s0.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'moving-average weights' '$T/s0.log'" "stylegan2 sample should use G's average: $(cat "$T/s0.log")"
  "$G" sample "$a" n=16 out="$T/s1.png" npy="$T/s1" truncation=0.3 >"$T/s1.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'truncation 0.3 in w-space' '$T/s1.log'" "stylegan2 sample truncation=0.3 should be in w-space: $(cat "$T/s1.log")"
  /usr/bin/python3 - "$T" "$(latest "$a")" >"$T/tr.log" 2>&1 <<'PY'
import json, struct, sys
import numpy as np
t, ck = sys.argv[1], sys.argv[2]
z0, z1 = np.load(t + "/s0.z.npy"), np.load(t + "/s1.z.npy")
i0, i1 = np.load(t + "/s0.images.npy"), np.load(t + "/s1.images.npy")
assert np.array_equal(z0, z1), "w-space truncation changed z"
s0, s1 = i0.std(0).mean(), i1.std(0).mean()
assert s1 < 0.6 * s0, f"psi 0.3 should shrink the spread of the samples: {s1} vs {s0}"
raw = open(ck, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
for k in ("g.net.w.w_avg", "g.ema.w.w_avg"):
    o = h[k]["data_offsets"]
    w = np.frombuffer(raw[8 + n + o[0]:8 + n + o[1]], dtype=np.float32)
    assert np.abs(w).max() > 0, f"{k} did not move"
print("ok", s0, s1)
PY
  check "[ $? -eq 0 ]" "stylegan2 truncation / w_avg: $(cat "$T/tr.log")"
  # style mixing on the GPU path (GANFLOW_CPU_DEVICE_CHECK=1: G's steps
  # captured and replayed, the cutoff read on the device) trains as the eager
  # CPU path, bit for bit, with G's average at the default ramp (its decay
  # changes at every update: a per-step scalar of the captured step, the
  # ema op's)
  for m in 0 1; do
    GANFLOW_CPU_DEVICE_CHECK=$m run stylegan2_fashion "$T/mix$m" ch=8 z=16 w=16 mixing=0.9 steps=4 \
      samples=1000 log=10
    check "[ $? -eq 0 ]" "stylegan2 mixing=0.9 (device check $m) failed: $(tail -3 "$T/mix$m.log")"
  done
  check "grep -q 'G steps: .* captured, [1-9][0-9]* replayed' '$T/mix1.log'" "stylegan2 mixing=0.9 under the device check should replay G's steps: $(grep 'G steps' "$T/mix1.log")"
  "$B/tests/st_compare" "$(latest "$T/mix0")" "$(latest "$T/mix1")" >"$T/cmpmix.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'tensors identical' '$T/cmpmix.log'" "stylegan2 mixing=0.9: the device check's run differs from the eager one: $(cat "$T/cmpmix.log")"
  # StyleGAN2's ramp of G's average: after update k (1-based) the decay is
  # 0.5^(batch / min(1000 ema_kimg, (k - 1) batch ema_rampup)): batch 16,
  # ema_kimg 0.05, ema_rampup 1 give 0.5^(16/48) at step 4, 0.5^(16/50) at 5
  run stylegan2_fashion "$T/ramp" ch=8 z=16 w=16 ada= steps=5 checkpoint_every=1 samples=1000 log=10 \
    ema_kimg=0.05 ema_rampup=1
  check "[ $? -eq 0 ]" "stylegan2 run with the ramp failed: $(tail -3 "$T/ramp.log")"
  ck() { printf '%s/checkpoints/ckpt-%08d.safetensors' "$1" "$2"; }
  for kd in 4:48 5:50; do
    k=${kd%:*} h=${kd#*:}
    d=$(/usr/bin/python3 -c "print(0.5 ** (16 / $h))")
    /usr/bin/python3 "$S/tests/train/check_ema.py" "$(ck "$T/ramp" $((k - 1)))" "$(ck "$T/ramp" $k)" "$d" 0 >"$T/ramp$k.log" 2>&1
    check "[ $? -eq 0 ]" "StyleGAN2's ramp at step $k (decay $d): $(cat "$T/ramp$k.log")"
  done
  ;;
resume_fail)
  # A resume that fails leaves the run as it was: its record of how it was
  # started (args.txt, pipeline.lua) changes only once the new run has
  # written a checkpoint, so a plain resume=RUN afterwards still works
  run dcgan_fashion "$T/a" steps=4 log=1
  check "[ $? -eq 0 ]" "dcgan_fashion failed: $(tail -3 "$T/a.log")"
  cp "$T/a/args.txt" "$T/args0"
  cp "$T/a/pipeline.lua" "$T/p0"
  same() { cmp -s "$T/args0" "$T/a/args.txt" && cmp -s "$T/p0" "$T/a/pipeline.lua" && [ ! -e "$T/a/.next" ]; }
  # options that break the run at once (D not finite before any checkpoint)
  "$G" run "$S/pipelines/dcgan_fashion.lua" resume="$T/a" r1=1e30 r1_every=1 steps=8 >"$T/b.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'not finite' '$T/b.log'" "r1=1e30 should stop the resumed run: $(tail -2 "$T/b.log")"
  check "same" "a failed resume rewrote the run's record: $(diff "$T/args0" "$T/a/args.txt")"
  check "grep -q 'resume: changed from $T/a/args.txt: r1 (not given) -> 1e30, r1_every (not given) -> 1, steps 4 -> 8' '$T/b.log'" \
    "a resume that changes options should say so in one line: $(grep resume: "$T/b.log")"
  # another pipeline (tensors of other shapes): refused while its stages are
  # created, before anything is written (only the lock file is touched)
  touch "$T/marker"
  sleep 1
  "$G" run "$S/pipelines/cgan_fashion.lua" resume="$T/a" steps=8 >"$T/c.log" 2>&1
  check "[ $? -ne 0 ] && grep -q \"tensor 'd.net.0.weight' is (\" '$T/c.log'" "a cGAN resumed from a DC-GAN run should be refused: $(tail -1 "$T/c.log")"
  check "same" "the refused resume rewrote the run's record: $(diff "$T/args0" "$T/a/args.txt")"
  written=$(find "$T/a" -newer "$T/marker" ! -name .lock | tr '\n' ' ')
  check "[ -z \"\$written\" ]" "the refused resume wrote: $written"
  # a full disk under the new record: the old one stays; a fresh run leaves none
  GF_FAULT_ENOSPC=args.txt GF_FAULT_ENOSPC_AFTER=0 LD_PRELOAD="$B/tests/libgf_enospc.so" \
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
    "$G" run "$S/pipelines/dcgan_fashion.lua" resume="$T/a" steps=8 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ] && grep -q \"cannot write '$T/a/.next/args.txt' into the run directory: No space left on device\" '$T/e.log'" \
    "a full disk under the record should be named: $(tail -1 "$T/e.log")"
  check "same" "a full disk rewrote the run's record"
  GF_FAULT_ENOSPC=args.txt GF_FAULT_ENOSPC_AFTER=0 LD_PRELOAD="$B/tests/libgf_enospc.so" \
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
    "$G" run "$S/pipelines/dcgan_fashion.lua" data="$DATA" batch=8 dir="$T/f" steps=2 quiet=true >"$T/f.log" 2>&1
  check "[ $? -ne 0 ] && grep -q \"cannot write '$T/f/args.txt' into the run directory: No space left on device\" '$T/f.log'" \
    "a full disk at the start should be named: $(tail -1 "$T/f.log")"
  check "[ ! -e '$T/f/args.txt' ] && [ ! -e '$T/f/pipeline.lua' ] && ! ls -a '$T/f' | grep -q tmp" \
    "a full disk at the start should leave no record, no 0-byte args.txt: $(ls -la "$T/f")"
  # the run continues as recorded; a changed option is recorded with its checkpoint
  "$G" run "$S/pipelines/dcgan_fashion.lua" resume="$T/a" steps=6 lr=1e-4 >"$T/g.log" 2>&1
  check "[ $? -eq 0 ]" "resume=RUN after the failed ones should work: $(tail -2 "$T/g.log")"
  check "grep -qx 'lr=1e-4' '$T/a/args.txt' && grep -qx 'steps=6' '$T/a/args.txt' && ! grep -q r1 '$T/a/args.txt' && [ ! -e '$T/a/.next' ]" \
    "the resumed run should record its options: $(cat "$T/a/args.txt")"
  # steps at or below the checkpoint's step contradict it: nothing to run
  cp "$T/a/args.txt" "$T/args0"
  cp "$T/a/pipeline.lua" "$T/p0"
  "$G" run "$S/pipelines/dcgan_fashion.lua" resume="$T/a" steps=5 >"$T/h.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'ckpt-00000006.safetensors was written at step 6 and steps=5: nothing to run (give steps above 6' '$T/h.log'" \
    "steps below the checkpoint's should be refused: $(tail -1 "$T/h.log")"
  check "same" "the refused steps rewrote the run's record"
  ;;
resume_other)
  run dcgan_fashion "$T/a" steps=10 log=5
  run cgan_fashion "$T/b" steps=20 resume="$T/a"
  check "[ $? -ne 0 ]" "resuming a DC-CGAN from a DC-GAN checkpoint should fail"
  check "grep -q \"tensor '[gd].net.[0-9]*.weight' is (\" '$T/b.log'" "the error should name the first tensor that differs: $(tail -3 "$T/b.log")"
  ;;
ckpt_format)
  # a checkpoint's format is checked by every reader: sample, eval, resume= (the
  # bridge: tests/bridge damaged); newer, foreign and unmarked files are refused
  # naming the file, the format found and the formats read
  run dcgan_fashion "$T/a" steps=2 log=1
  check "[ $? -eq 0 ]" "dcgan_fashion failed: $(tail -3 "$T/a.log")"
  ck=$(latest "$T/a")
  /usr/bin/python3 - "$ck" "$T" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
for name, fmt in (("v99", "ganflow-checkpoint-99"), ("foreign", "pt"), ("none", None)):
    h = json.loads(json.dumps(head))
    if fmt:
        h["__metadata__"]["format"] = fmt
    else:
        del h["__metadata__"]["format"]
    hb = json.dumps(h).encode()
    open(f"{sys.argv[2]}/{name}.safetensors", "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
PY
  "$G" sample "$ck" n=4 out="$T/ok.png" >"$T/ok.log" 2>&1
  check "[ $? -eq 0 ]" "a ganflow-checkpoint-1 file should sample: $(cat "$T/ok.log")"
  for v in v99 foreign none; do
    f=$T/$v.safetensors
    case $v in
    v99) want="$f: checkpoint format 'ganflow-checkpoint-99' is not one this version reads (written by another version of ganflow); it reads formats ganflow-checkpoint-1, ganflow-nn-1" ;;
    foreign) want="$f: checkpoint format 'pt' is not one this version reads (not a ganflow checkpoint)" ;;
    none) want="$f: no checkpoint format in its metadata" ;;
    esac
    "$G" sample "$f" n=4 out="$T/$v.png" >"$T/$v.s.log" 2>&1
    check "[ $? -ne 0 ] && grep -qF \"$want\" '$T/$v.s.log' && [ ! -e '$T/$v.png' ]" "sample of $v: $(cat "$T/$v.s.log")"
    "$G" eval "$f" classifier="$f" >"$T/$v.e.log" 2>&1
    check "[ $? -ne 0 ] && grep -qF \"$want\" '$T/$v.e.log'" "eval of $v: $(cat "$T/$v.e.log")"
    run dcgan_fashion "$T/r$v" steps=4 resume="$f"
    check "[ $? -ne 0 ] && grep -qF \"resume: $want\" '$T/r$v.log' && [ ! -e '$T/r$v/checkpoints' ]" "resume from $v: $(tail -3 "$T/r$v.log")"
  done
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
stall_resume)
  # a data path that stops delivering mid-run (nan_batch holds back every
  # batch from number 12 on): the stall watchdog stops the run (exit 1,
  # "the run stalled") gracefully, writing the final checkpoint of the last
  # step done; resume=RUN_DIR from it, with the data flowing again, to
  # step 20 gives exactly what 20 steps in one go give
  cat >"$T/p.lua" <<EOF
local gf = require "ganflow"
local dcgan = require "backbones.dcgan"
local G, D = dcgan.G {}, dcgan.D {}
local r = gf.stage "lmdb_reader" { name = "reader", path = "$DATA" }
local dec = gf.stage "jpeg_decode" { size = 32, channels = 1 }
local b = gf.stage "batch" { size = 8 }
local hold = gf.stage "nan_batch" { at = -1, stall_at = gf.arg("stall_at", -1) }
local d = gf.stage "d_step" { name = "d", net = D }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = 8 }
local ck = gf.stage "checkpoint" {}
gf.connect(r.samples, dec.records) gf.connect(dec.samples, b.samples) gf.connect(b.batch, hold.batch)
gf.connect(hold.batch, d.real) gf.connect(g.fakes, d.fakes) gf.connect(d.weights, g.d_weights)
gf.connect(g.state, ck.state) gf.connect(d.state, ck.state)
gf.run { quiet = true, threads = 1 }
EOF
  "$G" run "$T/p.lua" dir="$T/s" steps=1000 stall_at=12 stall=1 stall_stop=2 >"$T/s.log" 2>&1
  rc=$?
  check "[ $rc -eq 1 ] && grep -q 'the run stalled' '$T/s.log' && grep -q 'stopped gracefully' '$T/s.log'" "the stalled run should stop gracefully with status 1 (got $rc): $(tail -3 "$T/s.log")"
  check "[ \"$(cat "$T/s/checkpoints/latest" 2>/dev/null)\" = ckpt-00000012.safetensors ]" "the stop should write the checkpoint of step 12: $(ls "$T/s/checkpoints" 2>&1)"
  "$G" run "$T/p.lua" resume="$T/s" steps=20 stall_at=-1 >"$T/s2.log" 2>&1
  check "[ $? -eq 0 ]" "resuming after the stall failed: $(tail -3 "$T/s2.log")"
  check "grep -q 'resume: continuing the run in $T/s' '$T/s2.log'" "resume=RUN_DIR should continue in the stalled run's directory: $(grep resume "$T/s2.log")"
  "$G" run "$T/p.lua" dir="$T/f" steps=20 >"$T/f.log" 2>&1
  check "[ $? -eq 0 ]" "20 steps in one go failed: $(tail -3 "$T/f.log")"
  "$B/tests/st_compare" "$(latest "$T/f")" "$(latest "$T/s")" >"$T/cmp.log" 2>&1
  check "[ $? -eq 0 ]" "12 steps + stall + resume to 20 differs from 20 steps: $(cat "$T/cmp.log")"
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
  # the sample grid and the TensorBoard file name the real cause: no libpng
  # "Write Error" turned into EIO, no event file ending inside a record
  GF_FAULT_ENOSPC=samples/step-00000004.png LD_PRELOAD="$B/tests/libgf_enospc.so" \
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
    "$G" run "$S/pipelines/dcgan_fashion.lua" data="$DATA" batch=8 dir="$T/g" quiet=true steps=6 samples=2 \
    >"$T/g.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'samples/step-00000004.png: cannot write PNG: No space left on device' '$T/g.log'" \
    "a full disk under a sample grid should say so: $(tail -3 "$T/g.log")"
  check "! grep -Eq 'libpng|Write Error|Input/output' '$T/g.log'" "libpng's message or EIO in: $(grep -E 'libpng|Input' "$T/g.log")"
  check "! ls '$T/g/samples' | grep -q tmp" "a temporary grid was left behind: $(ls "$T/g/samples")"
  if /usr/bin/python3 -c 'import google.protobuf' 2>/dev/null; then
    GF_FAULT_ENOSPC=events.out.tfevents GF_FAULT_ENOSPC_AFTER=3000 LD_PRELOAD="$B/tests/libgf_enospc.so" \
      ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
      "$G" run "$S/pipelines/dcgan_fashion.lua" data="$DATA" batch=8 dir="$T/e" quiet=true steps=6 samples=2 \
      log=1 >"$T/e.log" 2>&1
    check "[ $? -eq 0 ]" "a full disk under the TensorBoard file should not stop the run: $(tail -3 "$T/e.log")"
    check "grep -q 'TensorBoard events: .*No space left on device (the file ends at its last whole record)' '$T/e.log'" \
      "the TensorBoard warning should name the cause: $(grep -i tensorboard "$T/e.log")"
    ev=$(ls "$T"/e/events.out.tfevents.*)
    out=$(/usr/bin/python3 "$S/tests/train/check_tfevents.py" --framing "$T/e" 2>&1)
    check "[ $? -eq 0 ] && [ \"\$(stat -c %s "$ev")\" -le 3000 ]" "the event file should end at its last whole record: $out"
  fi
  # a real full disk (a 256 KiB tmpfs of our own, where we may mount one)
  if unshare -m true 2>/dev/null; then
    ck=$T/r/checkpoints/ckpt-00000020.safetensors
    unshare -m bash -c "mkdir -p '$T/full' && mount -t tmpfs -o size=256k tmpfs '$T/full' &&
      head -c 200000 /dev/zero >'$T/full/fill' && '$G' sample '$ck' n=256 cols=16 out='$T/full/grid.png'; echo rc=\$?;
      echo files: \$(ls '$T/full')" >"$T/full.log" 2>&1
    check "grep -q 'rc=1' '$T/full.log' && grep -q 'grid.png: cannot write PNG: No space left on device' '$T/full.log'" \
      "sample on a full tmpfs should say No space left on device: $(cat "$T/full.log")"
    check "! grep -Eq 'libpng|Write Error|Input/output' '$T/full.log' && grep -qx 'files: fill' '$T/full.log'" \
      "on a full tmpfs (no other message, no file left): $(cat "$T/full.log")"
  else
    echo "note: no mount namespace here (not root): the tmpfs check is skipped, the LD_PRELOAD ones ran"
  fi
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
  # D the slow side (SNGAN, 10 D steps per G step): the SIGINT finds G
  # waiting for D's weights; D, stopping, pushes none and must end rather
  # than wait for fakes that cannot come (it held G and D until the 30 s
  # grace ran out and the run ended without a checkpoint)
  "$G" run "$S/pipelines/sngan_fashion.lua" data="$DATA" batch=8 dir="$T/sn" quiet=true steps=1000000 \
    samples=1000000 log=1 ch_g=8 ch_d=16 n_dis=10 >"$T/sn.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    [ "$(cat "$T/sn/metrics.jsonl" 2>/dev/null | wc -l)" -ge 3 ] && break
    sleep 0.1
  done
  kill -INT $pid
  wait $pid
  rc=$?
  check "[ $rc -eq 130 ]" "SIGINT (D the slow side) should end the run with status 130, got $rc: $(tail -3 "$T/sn.log")"
  check "[ -f '$T/sn/checkpoints/latest' ]" "no checkpoint written on SIGINT (D the slow side)"
  ;;
pix2pix)
  # pix2pix on edges2fashion (U-Net G, PatchGAN D, adversarial + 100 L1):
  # it learns (L1 of G(A) against B falls), the grid shows A | G(A) | B for
  # 8 test pairs, and N + resume + N gives the networks of 2N exactly
  "$G" dataset edges2fashion out="$T/e2f" >"$T/e2f.log" 2>&1
  check "[ $? -eq 0 ]" "edges2fashion failed: $(tail -3 "$T/e2f.log")"
  check "grep -q '60000 records' '$T/e2f.log' && grep -q '10000 records' '$T/e2f.log'" \
    "edges2fashion should write 60000 + 10000 pairs: $(cat "$T/e2f.log")"
  n=$((STEPS / 8))
  p2p() {
    local d=$1
    shift
    "$G" run "$S/pipelines/pix2pix_edges.lua" data="$T/e2f/train" test="$T/e2f/test" batch=8 ngf=16 ndf=16 \
      log=5 samples=1000 dir="$d" quiet=true "$@" >"$d.log" 2>&1
  }
  p2p "$T/a" steps=$((2 * n))
  check "[ $? -eq 0 ]" "pix2pix run failed: $(tail -3 "$T/a.log")"
  check_metrics "$T/a"
  first=$(grep -o '"l1_g":[0-9.e-]*' "$T/a/metrics.jsonl" | head -1 | cut -d: -f2)
  last=$(grep -o '"l1_g":[0-9.e-]*' "$T/a/metrics.jsonl" | tail -1 | cut -d: -f2)
  check "[ -n '$first' ]" "no l1_g in metrics.jsonl"
  if [ -z "${GF_SANITIZE:-}" ]; then
    check "awk 'BEGIN { exit !($last < 0.8 * $first) }'" "L1 should fall by 20% in $((2 * n)) steps: $first -> $last"
  fi
  check "[ \"\$(png_size '$T/a/samples/latest.png')\" = '104 274' ]" \
    "the grid should be 3 columns (A | G(A) | B) x 8 rows of 32x32: $(png_size "$T/a/samples/latest.png")"
  p2p "$T/b" steps=$n
  p2p "$T/c" steps=$((2 * n)) resume="$T/b"
  check "[ $? -eq 0 ]" "resumed pix2pix run failed: $(tail -3 "$T/c.log")"
  "$B/tests/st_compare" "$(latest "$T/a")" "$(latest "$T/c")" >"$T/cmp.log" 2>&1
  check "[ $? -eq 0 ]" "pix2pix N + resume + N differs from 2N: $(cat "$T/cmp.log")"
  check "grep -q 'tensors identical' '$T/cmp.log'" "nothing compared"
  # the asynchronous edges work for pix2pix too (D reuses cached (A, G(A)) batches)
  p2p "$T/y" steps=$n mode=async
  check "[ $? -eq 0 ]" "async pix2pix run failed: $(tail -3 "$T/y.log")"
  check "grep -q '\"staleness\":[0-9]' '$T/y/metrics.jsonl' && grep -q '\"l1_g\":[0-9]' '$T/y/metrics.jsonl'" \
    "async pix2pix should record staleness and l1_g"
  ;;
plot)
  run dcgan_fashion "$T/r" steps=40 log=5 samples=1000
  "$G" plot "$T/r" >"$T/p.log" 2>&1
  check "[ $? -eq 0 ]" "ganflow plot failed: $(cat "$T/p.log")"
  check "[ \"$(png_size "$T/r/plot.png" | cut -d' ' -f1)\" = 1000 ]" "plot should be 1000 pixels wide"
  check "grep -q '8 points, 3 panels' '$T/p.log'" "expected 8 points (steps 5..40) in 3 panels: $(cat "$T/p.log")"
  ;;
resume_keep)
  # a run resumed in its directory keeps `keep` (3) checkpoints in all, those
  # of the run before it counted; its progress line starts at the restored
  # step (a batch of 256 makes the first step outlast the first line)
  run dcgan_fashion "$T/k" steps=4 checkpoint_every=1 log=1
  check "[ $? -eq 0 ]" "dcgan_fashion failed: $(tail -3 "$T/k.log")"
  "$G" run "$S/pipelines/dcgan_fashion.lua" resume="$T/k" steps=8 batch=256 >"$T/k2.log" 2>&1
  check "[ $? -eq 0 ]" "resume in place failed: $(tail -3 "$T/k2.log")"
  got=$(ls "$T/k/checkpoints" | tr '\n' ' ')
  check "[ '$got' = 'ckpt-00000006.safetensors ckpt-00000007.safetensors ckpt-00000008.safetensors latest ' ]" "the last 3 checkpoints should be kept, the resumed run's included: $got"
  first=$(grep -o 'step [0-9]*/8' "$T/k2.log" | head -1)
  check "[ -n '$first' ] && [ '$first' != 'step 0/8' ]" "the first progress line should show the restored step, not '$first'"
  ;;
data_classes)
  # data that cannot serve a conditional model: named at the start, refused
  # where nothing can work, and what the model never saw is left out after
  /usr/bin/python3 - "$T" <<'PY'
import gzip, struct, sys
d = gzip.open("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz").read()
l = gzip.open("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz").read()
n, h, w = struct.unpack(">III", d[4:16])
img = lambda i: d[16 + i * h * w:16 + (i + 1) * h * w]
def write(name, pick):
    with open(f"{sys.argv[1]}/{name}-images.idx", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, len(pick), h, w) + b"".join(img(i) for i, _ in pick))
    with open(f"{sys.argv[1]}/{name}-labels.idx", "wb") as f:
        f.write(struct.pack(">II", 0x801, len(pick)) + bytes(lab for _, lab in pick))
write("seven", [(i, 7) for i in range(n) if l[8 + i] == 7][:300])        # one class of 10
write("twelve", [(i, i % 12) for i in range(240)])                      # labels up to 11
PY
  for x in seven twelve; do
    "$G" dataset idx "$T/$x-images.idx" "$T/$x-labels.idx" "$T/$x" >/dev/null 2>&1 || fail "dataset $x"
  done
  run cgan_fashion "$T/c7" steps=2 log=1 data="$T/seven"
  check "[ $? -eq 0 ]" "cgan_fashion on one class failed: $(tail -3 "$T/c7.log")"
  check "grep -q \"D is conditional on 10 classes, the training data '$T/seven' holds images of 1 of them: 7 (none of 0-6,8,9)\" '$T/c7.log'" "no warning naming the classes present: $(grep -m3 -i 'warn\|class' "$T/c7.log")"
  got=$(/usr/bin/python3 -c 'import json, struct, sys
raw = open(sys.argv[1], "rb").read()
print(json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"].get("d.data_classes"))' "$(latest "$T/c7")")
  check "[ '$got' = 7 ]" "the checkpoint should record the classes of the data (d.data_classes): got '$got'"
  "$G" sample "$T/c7" class=3 n=4 out="$T/s3.png" >"$T/s3.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'never saw a real image of class 3: its training data held class 7 only' '$T/s3.log' && [ ! -e '$T/s3.png' ]" "sample class=3 of a class never seen: $(cat "$T/s3.log")"
  "$G" sample "$T/c7" class=7 n=4 out="$T/s7.png" >"$T/s7.log" 2>&1
  check "[ $? -eq 0 ]" "sample class=7: $(cat "$T/s7.log")"
  "$G" sample "$T/c7" n=20 out="$T/grid.png" npy="$T/grid" >"$T/sg.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'G is conditional on 10 classes, its training data held images of 7 only: drawing those' '$T/sg.log'" "the grid should say it draws class 7 only: $(cat "$T/sg.log")"
  labs=$(/usr/bin/python3 -c 'import numpy, sys; print(sorted(set(numpy.load(sys.argv[1]).tolist())))' "$T/grid.labels.npy" 2>&1)
  check "[ '$labs' = '[7]' ]" "the grid's images should all be of class 7: labels $labs"
  run cgan_fashion "$T/c12" steps=2 data="$T/twelve"
  check "[ $? -ne 0 ] && grep -q \"the training data '$T/twelve' holds images of classes 10,11, beyond the 10 classes (0-9) D is conditional on\" '$T/c12.log'" "labels beyond the model's classes should be refused at the start: $(tail -2 "$T/c12.log")"
  run cgan_fashion "$T/call" steps=1
  check "[ $? -eq 0 ] && ! grep -q 'holds images of' '$T/call.log'" "every class present: no warning: $(grep -m2 'holds images' "$T/call.log")"
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
r3gan)
  # R3GAN (r3gan_fashion, tiny width, conditional, augmentation on): the
  # relativistic pairs with R1 + R2, every schedule following R3GAN's cosine
  # decay over the images seen (its values in metrics.jsonl at each step,
  # ADA's p the schedule's), N + resume + N = 2N bit for bit with the
  # schedules, and ganflow sample / eval of its checkpoint
  # log=2: a line merges two steps of each stage, where a scheduled value
  # must be the latest step's (a mean of two would be the curve's at no step)
  r3() { local dir=$1; shift; run r3gan_fashion "$dir" width=16 cardinality=2 classes=10 aug=0.5 decay_kimg=0.1 \
           samples=1000 log=2 "$@"; }
  r3 "$T/a" steps=8
  check "[ $? -eq 0 ]" "r3gan_fashion failed: $(tail -3 "$T/a.log")"
  /usr/bin/python3 - "$T/a/metrics.jsonl" $BATCH >"$T/sched.log" 2>&1 <<'PY'
import json, math, sys
batch = int(sys.argv[2])
def cosine(nimg, base, final, total):
    if nimg > total:
        return final
    return base + (1 - 0.5 * (1 + math.cos(math.pi * nimg / total))) * (final - base)
want = {"lr_g": (1e-3, 2.5e-4), "lr_d": (1e-3, 2.5e-4), "beta2_g": (0.9, 0.99), "beta2_d": (0.9, 0.99),
        "r1_d": (0.05, 0.005), "r2_d": (0.05, 0.005), "ema_kimg_g": (0.0, 64.0), "ada_p_d": (0.0, 0.5)}
seen = {}
for line in open(sys.argv[1]):
    m = json.loads(line)
    # the metrics stage merges G's and D's messages into lines as they
    # arrive, so a value may be of another step than its line's: each must
    # be the curve's at some step, the latest of its source in the line
    # (and move: below), the values of one message agree with each other
    for k, (a, b) in want.items():
        if k not in m:
            continue
        steps = range(1, 20)
        close = lambda s: abs(m[k] - cosine((s - 1) * batch, a, b, 100.0)) <= 1e-6 * max(abs(m[k]), 1e-3)
        assert any(close(s) for s in steps), (k, m["step"], m[k])
        seen[k] = seen.get(k, 0) + 1
    if "ada_p" in m:  # the device's p: the schedule's value of the same iteration
        assert abs(m["ada_p"] - m["ada_p_d"]) < 1e-6, (m["step"], m["ada_p"], m["ada_p_d"])
        assert abs(m["r1_d"] - m["r2_d"]) < 1e-12, m
        seen["ada_p"] = seen.get("ada_p", 0) + 1
    for k in ("loss_d", "loss_g", "r1", "r2"):
        if k in m:
            assert m[k] is not None and math.isfinite(m[k]), (k, m)
            seen[k] = seen.get(k, 0) + 1
assert len({round(json.loads(l).get("lr_g", 0), 12) for l in open(sys.argv[1])}) >= 3, "lr_g should move every line"
missing = [k for k in list(want) + ["ada_p", "loss_d", "loss_g", "r1", "r2"] if not seen.get(k)]
assert not missing, missing
PY
  check "[ $? -eq 0 ]" "R3GAN's schedules and metrics: $(tail -3 "$T/sched.log")"
  r3 "$T/b" steps=4 checkpoint_every=4
  r3 "$T/b" steps=8 resume="$T/b"
  check "[ $? -eq 0 ]" "r3gan_fashion resume failed: $(tail -3 "$T/b.log")"
  "$B/tests/st_compare" "$(latest "$T/a")" "$(latest "$T/b")" >"$T/cmp.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'tensors identical' '$T/cmp.log'" "4 + resume + 4 should equal 8 steps: $(cat "$T/cmp.log")"
  "$G" sample "$(latest "$T/a")" n=20 out="$T/grid.png" >"$T/s.log" 2>&1
  check "[ $? -eq 0 ] && [ \"\$(png_size '$T/grid.png')\" != '' ]" "ganflow sample of an R3GAN checkpoint failed: $(cat "$T/s.log")"
  # what rpgan refuses, each by name before training: a G without the real
  # images, LeCam, async pairs of a conditional D (cached fakes carry
  # another batch's labels), a scheduled option that is off
  cat >"$T/rp.lua" <<EOF
local gf = require "ganflow"
local gan = require "gan"
local r3 = require "backbones.r3gan"
local opt = gf.args { mode = "sync", lecam = 0.0, real = true, classes = 10, r1 = 0.05, sched_r1 = false, sched_pl = false }
local net = { size = 32, channels = 1, widths = 8, cardinality = 2, blocks = 1, classes = opt.classes }
local G, D = r3.G(gf.merge(net, { z = 16 })), r3.D(net)
local real = gan.data { path = "$DATA", size = 32, batch = 8 }
local d = gf.stage "d_step" { name = "d", net = D, loss = "rpgan", max_batch = 8, mode = opt.mode, lecam = opt.lecam,
                              r1 = opt.r1, r2 = 0.05, schedule = opt.sched_r1 and { r1 = gf.cosine { from = 1, to = 0, kimg = 1 } } or nil }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = 8, loss = "rpgan", mode = opt.mode,
                              schedule = opt.sched_pl and { pl = gf.cosine { from = 2, to = 0, kimg = 1 } } or nil }
gf.connect(real.batch, d.real)
if opt.real then gf.connect(real.batch, g.real) end
gf.connect(g.fakes, d.fakes) gf.connect(d.weights, g.d_weights)
gf.run { steps = 2 }
EOF
  for c in "real=false|connect g_step's input 'real'" "lecam=0.1|parameter 'lecam': LeCam's averages" \
           "mode=async|and a conditional D: a pair must share its label" "r1=0 sched_r1=true|r1 is scheduled but off (r1 = 0)" \
           "sched_pl=true|pl is scheduled but off (pl = 0)"; do
    args=${c%%|*} want=${c#*|}
    "$G" run "$T/rp.lua" dir="$T/rp" force=1 quiet=true $args >"$T/rp.log" 2>&1
    check "[ $? -ne 0 ] && grep -qF \"$want\" '$T/rp.log'" "rpgan with $args should be refused ('$want'): $(tail -2 "$T/rp.log")"
  done
  ;;
*)
  echo "unknown case $case_name"
  exit 2
  ;;
esac
[ $fails -eq 0 ] && echo "ok [$case_name]"
exit $((fails > 0))

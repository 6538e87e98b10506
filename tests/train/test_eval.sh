#!/usr/bin/env bash
# End-to-end tests of the evaluator on Fashion-MNIST: the classifier
# pipeline, `ganflow eval` on real and noise data, the in-training evaluator
# stage, and bad input. One CTest test per case:
#
#   test_eval.sh CASE    CASE = setup | classifier | real_vs_noise | training |
#                               small_n | wrong_size | not_classifier | mismatch |
#                               nonfinite | bad_records | small_real | messages | folders | ema | classes
#
# `setup` (a CTest fixture the other cases require) converts Fashion-MNIST
# and trains two short classifiers (32x32 and 28x28, 150 steps: ~10k images)
# and a tiny G into $GF_BINARY_DIR/tests/evalfix, shared by the cases.
# Exit 0/1, 77 to skip.
set -u
case_name=${1:?usage: test_eval.sh CASE}
B=${GF_BINARY_DIR:?} S=${GF_SOURCE_DIR:?}
G=$B/ganflow
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "skip: /usr/share/datasets/fashion-mnist is missing (apt-get install dataset-fashion-mnist)"
  exit 77
fi
F=$B/tests/evalfix
T=$(mktemp -d /tmp/gf-eval.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL [$case_name]: $*"; fails=$((fails + 1)); }
check() { if ! eval "$1"; then fail "$2"; fi; }

# classifier SIZE: a short classifier run into $F/clf<SIZE>.safetensors
classifier() {
  rm -rf "$F/crun$1"
  "$G" run "$S/pipelines/classifier_fashion.lua" data="$F/fm/train" test="$F/fm/test" out="$F/clf$1.safetensors" \
    size="$1" steps=150 batch=64 log=50 dir="$F/crun$1" quiet=true >"$F/crun$1.log" 2>&1
}
if [ "$case_name" = setup ]; then
  rm -rf "$F" && mkdir -p "$F"
  "$G" dataset fashion-mnist out="$F/fm" >/dev/null 2>&1 || { echo "FAIL: cannot convert Fashion-MNIST"; exit 1; }
  classifier 32 || { echo "FAIL: classifier run: $(tail -3 "$F/crun32.log")"; exit 1; }
  classifier 28 || { echo "FAIL: classifier run: $(tail -3 "$F/crun28.log")"; exit 1; }
  "$G" run "$S/pipelines/dcgan_fashion.lua" data="$F/fm/train" batch=8 steps=3 dir="$F/g" quiet=true \
    >"$F/g.log" 2>&1 || { echo "FAIL: G run: $(tail -3 "$F/g.log")"; exit 1; }
  echo "ok [setup]"
  exit 0
fi
[ -f "$F/clf32.safetensors" ] && [ -f "$F/clf28.safetensors" ] && [ -f "$F/g/checkpoints/latest" ] ||
  { echo "FAIL: the fixture is missing: run the eval_setup test first"; exit 1; }
gck="$F/g/checkpoints/$(cat "$F/g/checkpoints/latest")"
# fid FILE: the FID ganflow eval printed
fid() { awk '$1 == "FID" { print $2 }' "$1"; }
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
# corrupt DATASET K: breaks the JPEG start marker of K records spread evenly
# over the first shard of DATASET
corrupt() {
  /usr/bin/python3 - "$@" <<'PY'
import glob, sys
path = sorted(glob.glob(sys.argv[1] + "/shard-*/data.mdb"))[0]
k = int(sys.argv[2])
raw = bytearray(open(path, "rb").read())
at, i = [], raw.find(b"\xff\xd8\xff")
while i >= 0:
    at.append(i)
    i = raw.find(b"\xff\xd8\xff", i + 3)
for j in range(k):
    raw[at[j * len(at) // k]:at[j * len(at) // k] + 2] = b"\x00\x00"
open(path, "wb").write(raw)
PY
}
# flip DATASET KEY: inverts the 14 bytes of record KEY's JFIF (APP0) segment
# after its length: the JPEG still decodes, to the same pixels; only the
# payload's CRC-32C tells
flip() {
  /usr/bin/python3 - "$@" <<'PY'
import glob, struct, sys
path = sorted(glob.glob(sys.argv[1] + "/shard-*/data.mdb"))[0]
raw = bytearray(open(path, "rb").read())
# the LMDB leaf node of the key: the value inline after the key, or (flag
# F_BIGDATA) the number of its first overflow page, whose 16-byte header it follows
key, at, v = struct.pack(">Q", int(sys.argv[2])), 0, -1
while v < 0:
    at = raw.find(key, at + 1)
    assert at >= 0, "record not found"
    flags, ksize = struct.unpack("<HH", raw[at - 4:at])
    if ksize == 8 and raw[at + 8:at + 10] == b"GF":
        v = at + 8
    elif ksize == 8 and flags & 1:
        v = struct.unpack("<Q", raw[at + 8:at + 16])[0] * 4096 + 16
        v = v if raw[v:v + 2] == b"GF" else -1
assert raw[v + 24:v + 28] == b"\xff\xd8\xff\xe0", "not a JFIF JPEG"
for j in range(6, 20):
    raw[v + 24 + j] ^= 0xFF
open(path, "wb").write(raw)
PY
}
acc_of() { grep -o '"test_acc":[0-9.]*' "$1" | tail -1 | cut -d: -f2; }

case $case_name in
classifier)
  acc=$(acc_of "$F/crun32/metrics.jsonl")
  check "awk -v a='${acc:-0}' 'BEGIN { exit !(a >= 0.75) }'" "150 steps should reach 75% test accuracy, got ${acc:-none}"
  check "grep -aq '\"clf.role\":\"classifier\"' '$F/clf32.safetensors'" "the exported file is not a classifier checkpoint"
  check "grep -q 'test accuracy' '$F/crun32.log'" "the test accuracy is not reported"
  ;;
real_vs_noise)
  # noise images: an ImageNet-like synthetic set, decoded to 32x32 gray
  "$G" dataset synth "$T/noise" count=600 width=64 height=48 classes=10 >/dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
  "$G" eval "$F/fm/test" classifier="$F/clf32.safetensors" real="$F/fm/train" real_n=6000 n=2000 >"$T/a.log" 2>&1
  check "[ $? -eq 0 ]" "eval of the test split failed: $(cat "$T/a.log")"
  "$G" eval "$T/noise" classifier="$F/clf32.safetensors" real="$F/fm/train" real_n=6000 n=600 pr=false >"$T/b.log" 2>&1
  check "[ $? -eq 0 ]" "eval of noise failed: $(cat "$T/b.log")"
  ft=$(fid "$T/a.log") fn=$(fid "$T/b.log")
  check "awk -v t='${ft:-1e9}' -v n='${fn:-0}' 'BEGIN { exit !(t < 5 && n > 20 * t) }'" "FID(train, test) = $ft should be small and FID(train, noise) = $fn large"
  check "grep -q 'cached statistics' '$T/b.log'" "the real statistics should come from the cache the second time: $(head -1 "$T/b.log")"
  check "ls -a '$F/fm/train' | grep -q '^.ganflow-fid-'" "no cache file beside the dataset"
  check "grep -q 'per-class FID' '$T/a.log'" "labelled images should give per-class FID"
  kid=$(awk '$1 == "KID" { print $2, $4 }' "$T/a.log")
  check "awk -v m='${kid% *}' -v s='${kid#* }' 'BEGIN { d = m < 0 ? -m : m; exit !(d <= 3 * s + 1e-3) }'" "KID of test vs train should be ~0 within its std: $kid"
  ;;
training)
  "$G" run "$S/pipelines/dcgan_fashion.lua" data="$F/fm/train" classifier="$F/clf32.safetensors" batch=16 \
    steps=40 samples=20 log=10 eval=20 eval_n=300 eval_real_n=2000 dir="$T/r" quiet=true >"$T/r.log" 2>&1
  check "[ $? -eq 0 ]" "training with the evaluator failed: $(tail -3 "$T/r.log")"
  n=$(grep -c '"fid":' "$T/r/metrics.jsonl")
  check "[ '$n' -ge 2 ]" "expected FID at steps 20 and 40 in metrics.jsonl, found $n lines"
  check "! grep -q '\"fid\":null' '$T/r/metrics.jsonl'" "non-finite FID"
  check "grep -q '\"kid\":' '$T/r/metrics.jsonl' && grep -q '\"is\":' '$T/r/metrics.jsonl'" "no IS/KID in metrics.jsonl"
  ;;
small_n)
  "$G" eval "$gck" classifier="$F/clf32.safetensors" \
    real="$F/fm/train" real_n=1000 n=100 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ]" "n = 100 below the feature dimension (128) should fail"
  check "grep -q 'n=100' '$T/e.log' && grep -q 'n >= 129' '$T/e.log'" "the error should suggest a larger n: $(cat "$T/e.log")"
  # the evaluator stage's n is the pipeline's eval_n: the message names both
  "$G" run "$S/pipelines/dcgan_fashion.lua" data="$F/fm/train" classifier="$F/clf32.safetensors" eval=2 eval_n=100 \
    eval_real_n=1000 steps=2 dir="$T/r" >"$T/r.log" 2>&1
  check "[ $? -ne 0 ] && grep -q \"evaluator images (parameter n): n=100 is not more than the feature dimension 128.*: the pipeline passes the command line's eval_n=100 as n\" '$T/r.log'" \
    "the evaluator's n should be named as typed, eval_n: $(grep -i evaluator "$T/r.log" | head -2)"
  ;;
wrong_size)
  "$G" eval "$gck" classifier="$F/clf28.safetensors" \
    real="$F/fm/train" real_n=1000 n=500 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ]" "32x32 images with a 28x28 classifier should fail"
  check "grep -q '1x32x32' '$T/e.log' && grep -q '1x28x28' '$T/e.log'" "the error should name both sizes: $(cat "$T/e.log")"
  ;;
not_classifier)
  "$G" eval "$gck" classifier="$gck" real="$F/fm/train" n=500 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'not a classifier checkpoint' '$T/e.log'" "a G checkpoint as classifier should be refused: $(cat "$T/e.log")"
  ;;
mismatch)
  # the weights of the 28x28 classifier under the table of the 32x32 one
  "$B/tests/st_splice" "$T/bad.safetensors" "$F/clf28.safetensors" "$F/clf32.safetensors" || exit 1
  "$G" eval "$F/fm/test" classifier="$T/bad.safetensors" real="$F/fm/train" real_n=1000 n=500 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ]" "a classifier whose weights do not match its table should fail"
  check "grep -q 'does not match its backbone' '$T/e.log' && grep -q \"clf.net\" '$T/e.log'" "the error should name the first tensor that differs: $(cat "$T/e.log")"
  ;;
nonfinite)
  # a NaN weight, then finite weights whose images are not: named errors,
  # not a finite-looking FID
  poison "$gck" "$T/nan.safetensors" g.net.2.weight nan
  "$G" eval "$T/nan.safetensors" classifier="$F/clf32.safetensors" real="$F/fm/train" real_n=1000 n=500 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'g.net.2.weight\[0\] is nan' '$T/e.log'" "a NaN weight should fail naming it: $(tail -2 "$T/e.log")"
  poison "$gck" "$T/out.safetensors" g.net.4.weight 3e38 all
  "$G" eval "$T/out.safetensors" classifier="$F/clf32.safetensors" real="$F/fm/train" real_n=1000 n=500 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'generator output is not finite' '$T/e.log'" "non-finite images should fail: $(tail -2 "$T/e.log")"
  poison "$F/clf32.safetensors" "$T/clf.safetensors" clf.net.0.weight inf
  "$G" eval "$gck" classifier="$T/clf.safetensors" real="$F/fm/train" real_n=1000 n=500 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'clf.net.0.weight\[0\] is inf' '$T/e.log'" "a non-finite classifier should fail naming the tensor: $(tail -2 "$T/e.log")"
  ;;
bad_records)
  # as in training: bad records are skipped and counted, up to max_bad_fraction
  "$G" dataset synth "$T/ok" count=600 width=64 height=48 classes=10 >/dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
  cp -r "$T/ok" "$T/few" && corrupt "$T/few" 3
  cp -r "$T/ok" "$T/many" && corrupt "$T/many" 30
  "$G" eval "$T/few" classifier="$F/clf32.safetensors" real="$F/fm/train" real_n=1000 n=600 pr=false >"$T/a.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'bad records skipped: 3 of' '$T/a.log' && grep -q ': 597 images vs' '$T/a.log'" "3 bad records of 600 should be skipped and counted: $(tail -3 "$T/a.log")"
  check "grep -q 'skipping bad record.*key 200' '$T/a.log'" "each bad record should be named: $(head -3 "$T/a.log")"
  "$G" eval "$T/many" classifier="$F/clf32.safetensors" real="$F/fm/train" real_n=1000 n=600 pr=false >"$T/b.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'max_bad_fraction = 0.01' '$T/b.log'" "30 bad records of 600 should fail: $(tail -2 "$T/b.log")"
  "$G" eval "$T/many" classifier="$F/clf32.safetensors" real="$F/fm/train" real_n=1000 n=600 pr=false max_bad_fraction=0.1 >"$T/b.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'bad records skipped: 30 of' '$T/b.log'" "max_bad_fraction=0.1 should let 30 of 600 pass: $(tail -2 "$T/b.log")"
  # the real split too; statistics with records skipped are not cached
  "$G" eval "$F/fm/test" classifier="$F/clf32.safetensors" real="$T/few" n=600 pr=false >"$T/c.log" 2>&1
  check "[ $? -eq 0 ] && grep -q '3 of the real split' '$T/c.log' && grep -q '(597 images, statistics computed)' '$T/c.log'" "bad records of the real split should be skipped: $(tail -3 "$T/c.log")"
  check "! ls -a '$T/few' | grep -q '^.ganflow-fid-'" "statistics with skipped records should not be cached"
  # a payload changed after it was written that still decodes: its CRC-32C
  # finds it, as in training and `dataset verify` (evaluated and as the real split)
  cp -r "$T/ok" "$T/flip" && flip "$T/flip" 300 || { echo "FAIL: flip"; exit 1; }
  "$G" eval "$T/flip" classifier="$F/clf32.safetensors" real="$F/fm/train" real_n=1000 n=600 pr=false >"$T/f.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'bad records skipped: 1 of' '$T/f.log' && grep -q ': 599 images vs' '$T/f.log'" "a record with a wrong checksum should be skipped and counted: $(tail -3 "$T/f.log")"
  check "grep -q 'key 300: payload checksum mismatch' '$T/f.log'" "the record with a wrong checksum should be named: $(grep -m2 -i 'skip\|bad' "$T/f.log")"
  "$G" eval "$F/fm/test" classifier="$F/clf32.safetensors" real="$T/flip" n=600 pr=false >"$T/g.log" 2>&1
  check "[ $? -eq 0 ] && grep -q '1 of the real split' '$T/g.log' && grep -q '(599 images, statistics computed)' '$T/g.log'" "a real split's record with a wrong checksum should be skipped: $(tail -3 "$T/g.log")"
  check "grep -q 'key 300: payload checksum mismatch' '$T/g.log'" "the real split's record with a wrong checksum should be named: $(grep -m2 -i 'skip\|bad' "$T/g.log")"
  ;;
classes)
  # a conditional model against real data of other classes: per-class FID
  # needs real images of every class generated (refused before any work
  # otherwise), and a model whose data held one class generates that class
  /usr/bin/python3 - "$T" <<'PY'
import gzip, struct, sys
d = gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").read()
l = gzip.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz").read()
n, h, w = struct.unpack(">III", d[4:16])
pick = [i for i in range(n) if l[8 + i] == 7][:300]
open(sys.argv[1] + "/seven-images.idx", "wb").write(struct.pack(">IIII", 0x803, len(pick), h, w) +
                                                   b"".join(d[16 + i * h * w:16 + (i + 1) * h * w] for i in pick))
open(sys.argv[1] + "/seven-labels.idx", "wb").write(struct.pack(">II", 0x801, len(pick)) + bytes([7] * len(pick)))
PY
  "$G" dataset idx "$T/seven-images.idx" "$T/seven-labels.idx" "$T/seven" >/dev/null 2>&1 || { echo "FAIL: dataset"; exit 1; }
  "$G" run "$S/pipelines/cgan_fashion.lua" data="$F/fm/train" batch=8 steps=2 dir="$T/c" quiet=true >"$T/c.log" 2>&1 ||
    { echo "FAIL: cgan run: $(tail -3 "$T/c.log")"; exit 1; }
  "$G" eval "$T/c" "$T/seven" classifier="$F/clf32.safetensors" n=300 pr=false >"$T/e.log" 2>&1
  check "[ $? -eq 1 ] && grep -q \"per-class FID of class 0: the real split '$T/seven' holds no image of it (it holds classes 7)\" '$T/e.log' && ! grep -q 'real features' '$T/e.log'" "a real split without the generated classes should be refused before any work: $(tail -2 "$T/e.log")"
  "$G" eval "$T/c" "$T/seven" classifier="$F/clf32.safetensors" n=300 pr=false per_class=false >"$T/e.log" 2>&1
  check "[ $? -eq 0 ] && ! grep -q 'per-class FID' '$T/e.log'" "per_class=false should evaluate without per-class FID: $(tail -2 "$T/e.log")"
  "$G" run "$S/pipelines/cgan_fashion.lua" data="$T/seven" batch=8 steps=2 dir="$T/c7" quiet=true >"$T/c7.log" 2>&1 ||
    { echo "FAIL: cgan run: $(tail -3 "$T/c7.log")"; exit 1; }
  "$G" eval "$T/c7" "$F/fm/test" classifier="$F/clf32.safetensors" n=300 pr=false >"$T/e7.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'G is conditional on 10 classes, its training data held images of 7 only: generating those' '$T/e7.log'" "eval of a one-class model should say it generates that class: $(tail -3 "$T/e7.log")"
  check "grep 'per-class FID' '$T/e7.log' | grep -q ' 7:[0-9]' && [ \"\$(grep 'per-class FID' '$T/e7.log' | grep -o ':nan' | wc -l)\" = 9 ]" "per-class FID for class 7 only: $(grep 'per-class' "$T/e7.log")"
  ;;
small_real)
  # too few real images for FID: refused before any work, nothing cached
  "$G" dataset synth "$T/small" count=100 width=64 height=48 classes=10 >/dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
  "$G" eval "$F/fm/test" classifier="$F/clf32.safetensors" real="$T/small" n=500 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'n=100' '$T/e.log' && grep -q 'n >= 129' '$T/e.log' && grep -q \"real split 'small'\" '$T/e.log'" "a real split of 100 images should be refused naming it: $(tail -2 "$T/e.log")"
  check "! ls -a '$T/small' | grep -q '^.ganflow-fid-'" "a failed eval should write no statistics cache: $(ls -a "$T/small")"
  # the other side short (A of `eval A B`, a dataset or a folder): refused
  # before any feature of B is computed (a real_n of its own: no cache file
  # of it exists before, and none may after)
  before=$(ls -a "$F/fm/train" | grep -c '^.ganflow-fid-')
  "$G" eval "$T/small" "$F/fm/train" classifier="$F/clf32.safetensors" real_n=1234 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ] && grep -q \"$T/small: n=100 is not more than the feature dimension 128\" '$T/e.log'" \
    "a dataset of 100 images against the train split should be refused naming it: $(tail -2 "$T/e.log")"
  check "[ \"\$(ls -a '$F/fm/train' | grep -c '^.ganflow-fid-')\" = $before ]" \
    "the real split's features were computed before the short side was refused: $(ls -a "$F/fm/train")"
  "$G" sample "$F/g" n=100 out="$T/pngs/" >/dev/null 2>&1 || { echo "FAIL: sample out=DIR/"; exit 1; }
  "$G" eval "$T/pngs" "$F/fm/train" classifier="$F/clf32.safetensors" real_n=1234 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ] && grep -q \"$T/pngs: n=100 is not more\" '$T/e.log'" \
    "a folder of 100 images should be refused naming it: $(tail -2 "$T/e.log")"
  check "[ \"\$(ls -a '$F/fm/train' | grep -c '^.ganflow-fid-')\" = $before ]" "a folder: real features computed first"
  ;;
messages)
  # a run directory stands for its latest checkpoint, as resume= takes it
  "$G" sample "$F/g" n=4 out="$T/s.png" >"$T/s.log" 2>&1
  check "[ $? -eq 0 ] && [ -f '$T/s.png' ]" "sample of a run directory should use its latest checkpoint: $(cat "$T/s.log")"
  mkdir "$T/empty"
  "$G" sample "$T/empty" n=4 out="$T/s.png" >"$T/s.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'is a directory' '$T/s.log' && ! grep -q 'read failed' '$T/s.log'" "a directory without checkpoints should be named as one: $(cat "$T/s.log")"
  "$G" eval "$T/empty" classifier="$F/clf32.safetensors" real="$F/fm/train" real_n=1000 n=500 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'is a directory' '$T/e.log' && ! grep -q 'read failed' '$T/e.log'" "eval of a directory without checkpoints: $(tail -1 "$T/e.log")"
  # one message for the argument at fault
  "$G" sample "$gck" n=0 >"$T/s.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'n=0: need 1 <= n' '$T/s.log' && ! grep -q cols '$T/s.log'" "sample n=0 should name n alone: $(cat "$T/s.log")"
  "$G" sample "$gck" cols=0 >"$T/s.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'cols=0: need cols >= 1' '$T/s.log'" "sample cols=0 should name cols: $(cat "$T/s.log")"
  "$G" sample "$gck" n=4 out="$T/missing/s.png" >"$T/s.log" 2>&1
  check "[ $? -ne 0 ] && grep -q \"$T/missing/s.png: cannot write PNG\" '$T/s.log' && ! grep -q '\.tmp\.' '$T/s.log'" "an output in a missing directory should name the path given: $(cat "$T/s.log")"
  "$G" eval "$gck" classifier="$F/clf32.safetensors" real="$F/fm/train" real_n=1000 n=0 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'generated images: n=0' '$T/e.log' && grep -q 'n >= 129' '$T/e.log' && ! grep -q NULL '$T/e.log'" "eval n=0 should ask for a larger n: $(tail -1 "$T/e.log")"
  ;;
folders)
  # `ganflow eval DIR DIR` on folders of PNGs: the same images as dataset
  # records give the same FID, a folder against itself 0, and the record
  # names the feature network, its hash and the resize
  /usr/bin/python3 - "$T" <<'PY'
import gzip, os, struct, sys, zlib
out = sys.argv[1]
def png(path, pix, w, h):
    raw = b"".join(b"\0" + pix[y * w:(y + 1) * w] for y in range(h))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
def images(name):
    d = gzip.open(f"/usr/share/datasets/fashion-mnist/{name}-images-idx3-ubyte.gz").read()
    n, h, w = struct.unpack(">III", d[4:16])
    return [d[16 + i * h * w:16 + (i + 1) * h * w] for i in range(n)], h, w
test, h, w = images("t10k")
train, _, _ = images("train")
os.makedirs(f"{out}/a"); os.makedirs(f"{out}/b")
for i in range(300):   # the records ganflow eval DATASET n=300 reads: evenly spaced
    png(f"{out}/a/{i:05d}.png", test[i * len(test) // 300], w, h)
for i in range(400):
    png(f"{out}/b/{i:05d}.png", train[i * 150], w, h)
PY
  "$G" eval "$T/a" "$T/b" classifier="$F/clf28.safetensors" json="$T/f.json" >"$T/f.log" 2>&1
  check "[ $? -eq 0 ]" "eval DIR DIR failed: $(tail -2 "$T/f.log")"
  "$G" eval "$F/fm/test" "$T/b" n=300 classifier="$F/clf28.safetensors" >"$T/d.log" 2>&1
  check "[ $? -eq 0 ] && [ -n \"\$(fid "$T/f.log")\" ] && [ \"\$(fid "$T/f.log")\" = \"\$(fid "$T/d.log")\" ]" "a folder of a dataset's images should give its FID: $(fid "$T/f.log") vs $(fid "$T/d.log")"
  check "grep -q '\"features\":\"classifier\"' '$T/f.json' && grep -q '\"features_hash\":\"[0-9a-f]\{16\}\"' '$T/f.json' && grep -q '\"n_real\":400' '$T/f.json'" "the record should name the features and counts: $(cat "$T/f.json")"
  check "grep -q 'features   classifier' '$T/f.log'" "the table should name the features: $(cat "$T/f.log")"
  "$G" eval "$T/b" "$T/b" classifier="$F/clf28.safetensors" >"$T/s.log" 2>&1
  check "[ $? -eq 0 ] && awk '\$1 == \"FID\" { exit !(\$2 < 1e-3) }' '$T/s.log'" "a folder against itself should have FID 0: $(fid "$T/s.log")"
  # an ImageFolder tree (DIR/<class>/..., what `ganflow sample out=DIR/` writes): subfolders are read
  mkdir -p "$T/tree/0" "$T/tree/1"
  for f in "$T"/b/*.png; do k=$(basename "$f" .png); cp "$f" "$T/tree/$((10#$k % 2))/"; done
  "$G" eval "$T/a" "$T/tree" classifier="$F/clf28.safetensors" >"$T/t.log" 2>&1
  check "[ $? -eq 0 ] && [ \"\$(fid "$T/t.log")\" = \"\$(fid "$T/f.log")\" ]" "a class-folder tree of the same images should give the same FID: $(fid "$T/t.log") vs $(fid "$T/f.log"); $(tail -2 "$T/t.log")"
  # PNGs named .jpg: read by what they hold, as `ganflow dataset folder` reads them
  mkdir "$T/aj" && for f in "$T"/a/*.png; do cp "$f" "$T/aj/$(basename "$f" .png).jpg"; done
  "$G" eval "$T/aj" "$T/b" classifier="$F/clf28.safetensors" >"$T/aj.log" 2>&1
  check "[ $? -eq 0 ] && [ \"\$(fid "$T/aj.log")\" = \"\$(fid "$T/f.log")\" ] && ! grep -q 'skipping bad record' '$T/aj.log'" "PNGs named .jpg should evaluate as the PNGs: $(fid "$T/aj.log") vs $(fid "$T/f.log"); $(tail -2 "$T/aj.log")"
  # README's round trip: `ganflow sample CKPT n=300 out=DIR/`, then `ganflow eval DIR/ REAL`: DIR holds
  # only a class folder (DIR/unlabelled/), read as images because images lie below it
  (cd "$T" && "$G" sample "$gck" n=300 out=rt/ >rt.log 2>&1 &&
    "$G" eval rt/ "$F/fm/test" classifier="$F/clf32.safetensors" pr=false >rte.log 2>&1)
  check "[ $? -eq 0 ] && grep -q '^rt/: 300 images vs real split' '$T/rte.log'" "sample out=DIR/ then eval DIR/ REAL: $(tail -2 "$T/rt.log" "$T/rte.log")"
  # a directory holding no checkpoint, dataset or image is named before any work
  mkdir "$T/nothing" && echo x >"$T/nothing/notes.txt"
  "$G" eval "$T/nothing" "$F/fm/test" classifier="$F/clf32.safetensors" >"$T/no.log" 2>&1
  check "[ $? -eq 1 ] && grep -q 'is a directory without checkpoints/latest, a ganflow dataset or .png/.jpg images' '$T/no.log' && ! grep -q 'real features' '$T/no.log'" "a directory of nothing evaluable: $(tail -2 "$T/no.log")"
  "$G" eval "$T/a" "$T/b" features=inception >"$T/i.log" 2>&1
  check "[ $? -eq 2 ] && grep -q 'features=inception needs weights=FILE' '$T/i.log'" "features=inception without weights: $(cat "$T/i.log")"
  "$G" eval "$T/a" "$T/b" features=inception weights="$F/clf28.safetensors" >"$T/i.log" 2>&1
  check "[ $? -eq 1 ] && grep -q 'is not an FID Inception file' '$T/i.log'" "a classifier as Inception weights: $(cat "$T/i.log")"
  # the evaluator stage: eval_features = inception
  "$G" run "$S/pipelines/dcgan_fashion.lua" data="$F/fm/train" eval=2 steps=2 eval_features=inception dir="$T/r1" \
    quiet=true >"$T/r.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'features = inception needs weights = FILE' '$T/r.log'" "eval_features=inception without weights: $(tail -3 "$T/r.log")"
  "$G" run "$S/pipelines/dcgan_fashion.lua" data="$F/fm/train" eval=2 steps=2 eval_features=inception \
    eval_weights="$F/clf28.safetensors" dir="$T/r2" quiet=true >"$T/r.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'is not an FID Inception file' '$T/r.log'" "a classifier as the stage's Inception weights: $(tail -3 "$T/r.log")"
  ;;
ema)
  # a checkpoint with G's moving average: measured on it by default, on the
  # trained weights with ema=0; ema=1 insists on it; ema= on images is refused
  "$G" run "$S/pipelines/biggan_fashion.lua" data="$F/fm/train" ch=4 n_dis=1 batch=8 steps=4 ema_start=1 \
    dir="$T/bg" quiet=true >"$T/bg.log" 2>&1
  check "[ $? -eq 0 ]" "biggan run with ema failed: $(tail -3 "$T/bg.log")"
  bck="$T/bg/checkpoints/$(cat "$T/bg/checkpoints/latest")"
  ev() { "$G" eval "$@" classifier="$F/clf32.safetensors" real="$F/fm/train" real_n=1000 n=500 pr=false kid=false; }
  ev "$bck" >"$T/avg.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'moving-average weights' '$T/avg.log'" "eval should use G's average: $(tail -3 "$T/avg.log")"
  ev "$bck" ema=0 >"$T/net.log" 2>&1
  check "[ $? -eq 0 ] && ! grep -q 'moving-average' '$T/net.log'" "ema=0 should use the trained weights: $(tail -3 "$T/net.log")"
  check "[ -n \"$(fid "$T/avg.log")\" ] && [ \"$(fid "$T/avg.log")\" != \"$(fid "$T/net.log")\" ]" \
    "the average and the trained weights should give different FIDs: $(fid "$T/avg.log") vs $(fid "$T/net.log")"
  ev "$gck" ema=1 >"$T/e.log" 2>&1
  check "[ $? -ne 0 ] && grep -q 'no moving average' '$T/e.log'" "ema=1 without an average should fail: $(tail -2 "$T/e.log")"
  ev "$F/fm/test" ema=0 >"$T/e.log" 2>&1
  check "[ $? -eq 2 ] && grep -q 'not a checkpoint' '$T/e.log'" "ema= on a dataset should be refused: $(tail -2 "$T/e.log")"
  ev "$bck" ema=2 >"$T/e.log" 2>&1
  check "[ $? -eq 2 ] && grep -q 'bad value ema=2' '$T/e.log'" "ema=2 should be refused: $(tail -2 "$T/e.log")"
  # a StyleGAN2 checkpoint (its average with the ramp, the w_avg layer, ADA's layer in D)
  "$G" run "$S/pipelines/stylegan2_fashion.lua" data="$F/fm/train" ch=8 z=16 w=16 batch=8 steps=4 r1_every=2 \
    dir="$T/sg" quiet=true >"$T/sg.log" 2>&1
  check "[ $? -eq 0 ]" "stylegan2 run failed: $(tail -3 "$T/sg.log")"
  ev "$T/sg" >"$T/sg_e.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'moving-average weights' '$T/sg_e.log' && [ -n \"$(fid "$T/sg_e.log")\" ]" "eval of a StyleGAN2 checkpoint failed: $(tail -3 "$T/sg_e.log")"
  ;;
*)
  echo "unknown case $case_name"
  exit 2
  ;;
esac
[ $fails -eq 0 ] && echo "ok [$case_name]"
exit $((fails > 0))

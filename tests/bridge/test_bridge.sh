#!/usr/bin/env bash
# The PyTorch bridge end to end (python/ganflow, `ganflow export`), each case
# run by CTest as its own test:
#
#   test_bridge.sh CASE     CASE = kinds | dcgan | cgan | perclass | classifier | stylegan2 | r3gan | export | errors |
#                                  damaged | ema_parts
#
# kinds: a network of every layer kind (tests/bridge/kinds.json) in a
# checkpoint made by net_forward --make, bridge and ONNX vs ganflow (kinds2.json:
# the ResNet/SN kinds, bridge only; kinds4.json: attention, bridge and ONNX;
# kinds6.json, kinds7.json: R3GAN's grouped convolutions and bases).
# dcgan, cgan, perclass, classifier: train the backbone's pipeline 3 steps on
# Fashion-MNIST, then ganflow.torch.load must give ganflow's outputs on the
# same inputs within 1e-4: G through `ganflow sample npy=` (same noise and
# labels), D and the classifier through net_forward (same x, labels; the
# classifier's "features" too). export: `ganflow export` of the conditional
# G and D and of the classifier, checked with python3-onnx (checker, inputs,
# outputs) and run on the same inputs. errors: what the bridge and the
# command say about a missing part, a missing PyTorch, a bad checkpoint.
# damaged: truncated, foreign, newer, mistyped, misshapen and non-finite
# checkpoints are refused by the bridge and export with the C reader's message.
# ema_parts: a StyleGAN2 checkpoint missing each tensor of G's moving average
# in turn: sample, eval, the bridge and export apply one rule (refuse naming
# the tensor; ema=0 / ema=False: the trained weights, the same images).
# Exit 0 pass, 1 fail, 77 skip (no python3-torch / python3-onnx or no
# Fashion-MNIST on this machine).
set -u
case_name=${1:?usage: test_bridge.sh CASE}
B=${GF_BINARY_DIR:?} S=${GF_SOURCE_DIR:?}
G=$B/ganflow PY=/usr/bin/python3 CHECK=$S/tests/bridge/check_bridge.py
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
  echo "skip: $PY lacks torch or onnx (apt-get install python3-torch python3-onnx)"
  exit 77
fi
if [ "$case_name" != kinds ] && [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "skip: /usr/share/datasets/fashion-mnist is missing (apt-get install dataset-fashion-mnist)"
  exit 77
fi
export PYTHONPATH=$S/python OMP_NUM_THREADS=2
T=$(mktemp -d /tmp/gf-bridge.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL [$case_name]: $*"; fails=$((fails + 1)); }
check() { if ! eval "$1"; then fail "$2"; fi; }

# train PIPELINE [key=value...]: 3 steps into a new $T/r.*; prints the checkpoint
train() {
  local p=$1
  shift
  [ -d "$T/fm" ] || "$G" dataset fashion-mnist out="$T/fm" >/dev/null 2>&1 ||
    { echo "FAIL: cannot convert Fashion-MNIST" >&2; exit 1; }
  # a run directory of its own: ganflow refuses to run into an earlier run's
  local r
  r=$(mktemp -u "$T/r.XXXXXX")
  "$G" run "$S/pipelines/$p.lua" data="$T/fm/train" batch=16 dir="$r" quiet=true steps=3 log=1 "$@" \
    >"$r.log" 2>&1 || { echo "FAIL: $p failed: $(tail -3 "$r.log")" >&2; exit 1; }
  echo "$r/checkpoints/$(cat "$r/checkpoints/latest")"
}

# compare WHAT ARGS...: check_bridge.py, its report shown, a failure counted
compare() {
  local what=$1
  shift
  "$PY" "$CHECK" "$@" >"$T/c.log" 2>&1
  local rc=$?
  cat "$T/c.log"
  check "[ $rc -eq 0 ]" "$what"
}

# sample CKPT N: ganflow's images, noise (and labels) as $T/s.*.npy
sample() {
  "$G" sample "$1" n="$2" out="$T/s.png" npy="$T/s" >"$T/s.log" 2>&1
  check "[ $? -eq 0 ] && [ -s '$T/s.z.npy' ] && [ -s '$T/s.images.npy' ]" "ganflow sample npy= failed: $(cat "$T/s.log")"
}

# forward CKPT PART N: ganflow's forward of a part on random inputs, $T/PART.st
forward() {
  "$B/tests/net_forward" "$1" "$2" "$T/$2.st" "$3" >"$T/f.log" 2>&1
  check "[ $? -eq 0 ]" "net_forward $2 failed: $(cat "$T/f.log")"
}

case $case_name in
kinds)
  # every layer kind and alias, named sources, positions, no-bias and
  # non-affine layers, bn on (C), (C, L) and (C, H, W), through a checkpoint
  # that net_forward --make writes (no backbone uses tconv, avgpool, softmax...)
  "$B/tests/net_forward" --make "$S/tests/bridge/kinds.json" "$T/k.safetensors" >"$T/f.log" 2>&1
  check "[ $? -eq 0 ]" "net_forward --make failed: $(cat "$T/f.log")"
  forward "$T/k.safetensors" t 9
  compare "every layer kind: bridge vs ganflow" net "$T/k.safetensors" t "$T/t.st"
  "$G" export "$T/k.safetensors" "$T/k.onnx" part=t >"$T/e.log" 2>&1
  check "[ $? -eq 0 ]" "ganflow export of every layer kind failed: $(cat "$T/e.log")"
  compare "every layer kind: ONNX vs ganflow" onnx "$T/k.onnx" "$T/t.st"
  # the ResNet / SNGAN kinds: spectral norm on conv, tconv, linear and
  # embedding (eval: sigma from the stored u, v), instancenorm, add, gsp,
  # split (tests/bridge/kinds2.json)
  "$B/tests/net_forward" --make "$S/tests/bridge/kinds2.json" "$T/k2.safetensors" >"$T/f.log" 2>&1
  check "[ $? -eq 0 ]" "net_forward --make (kinds2) failed: $(cat "$T/f.log")"
  forward "$T/k2.safetensors" t 9
  compare "ResNet/SN kinds: bridge vs ganflow" net "$T/k2.safetensors" t "$T/t.st"
  # BigGAN/SNGAN conditioning: cbn from a cond chunk (sn, biases) and from
  # the labels (2-d and flat), proj with sn (tests/bridge/kinds3.json)
  "$B/tests/net_forward" --make "$S/tests/bridge/kinds3.json" "$T/k3.safetensors" >"$T/f.log" 2>&1
  check "[ $? -eq 0 ]" "net_forward --make (kinds3) failed: $(cat "$T/f.log")"
  forward "$T/k3.safetensors" t 9
  compare "cbn/proj: bridge vs ganflow" net "$T/k3.safetensors" t "$T/t.st"
  # self-attention, plain and with sn, gamma away from 0 (tests/bridge/kinds4.json)
  "$B/tests/net_forward" --make "$S/tests/bridge/kinds4.json" "$T/k4.safetensors" >"$T/f.log" 2>&1
  check "[ $? -eq 0 ]" "net_forward --make (kinds4) failed: $(cat "$T/f.log")"
  forward "$T/k4.safetensors" t 9
  compare "attention: bridge vs ganflow" net "$T/k4.safetensors" t "$T/t.st"
  "$G" export "$T/k4.safetensors" "$T/k4.onnx" part=t >"$T/e.log" 2>&1
  check "[ $? -eq 0 ]" "ganflow export of attention failed: $(cat "$T/e.log")"
  compare "attention: ONNX vs ganflow" onnx "$T/k4.onnx" "$T/t.st"
  # StyleGAN2's kinds (eqlr linear/conv, norm2, w_avg with psi, const,
  # modconv 3x3 / up 2 / 1x1 toRGB, noise auto/const, fir up/down/blurs,
  # bias_act with clamp and lr_mul, mbstd, dot: kinds5.json) and R3GAN's
  # parts (grouped and depthwise conv, grouped eqlr conv, the depthwise
  # basis and projection: kinds6.json; the class embedding after z, the
  # generative basis as a depthwise transposed conv, a residual block, a
  # grouped strided tconv: kinds7.json; init = "msr" keys), parameters
  # perturbed away from their zero starts, bridge and ONNX
  for k in 5 6 7; do
    what="$([ $k = 5 ] && echo StyleGAN2 || echo "R3GAN ($k)") kinds"
    "$B/tests/net_forward" --make-perturbed "$S/tests/bridge/kinds$k.json" "$T/k$k.safetensors" >"$T/f.log" 2>&1
    check "[ $? -eq 0 ]" "net_forward --make-perturbed (kinds$k) failed: $(cat "$T/f.log")"
    forward "$T/k$k.safetensors" t 8
    compare "$what: bridge vs ganflow" net "$T/k$k.safetensors" t "$T/t.st"
    "$G" export "$T/k$k.safetensors" "$T/k$k.onnx" part=t >"$T/e.log" 2>&1
    check "[ $? -eq 0 ]" "ganflow export of $what failed: $(cat "$T/e.log")"
    compare "$what: ONNX vs ganflow" onnx "$T/k$k.onnx" "$T/t.st"
  done
  ;;
dcgan)
  ck=$(train dcgan_fashion samples=1000) || exit 1
  sample "$ck" 16
  check "[ ! -e '$T/s.labels.npy' ]" "an unconditional G should write no labels.npy"
  compare "G: bridge vs ganflow sample" g "$ck" g "$T/s"
  # the run directory and the role select the same part
  compare "G by run directory and role" g "${ck%/checkpoints/*}" generator "$T/s"
  forward "$ck" d 16
  compare "D: bridge vs ganflow" net "$ck" d "$T/d.st"
  "$G" sample "$ck" n=2 out="$T/s.png" npy="$T/no/such/s" >"$T/e.log" 2>&1
  check "[ $? -eq 1 ] && grep -q 'cannot write .*no/such/s.z.npy' '$T/e.log'" "npy= into a missing directory: $(cat "$T/e.log")"
  ;;
cgan)
  ck=$(train cgan_fashion samples=1000 labels=data) || exit 1
  sample "$ck" 20
  check "[ -s '$T/s.labels.npy' ]" "a conditional G should write labels.npy"
  compare "conditional G: bridge vs ganflow sample" g "$ck" g "$T/s"
  forward "$ck" d 20
  compare "conditional D: bridge vs ganflow" net "$ck" d "$T/d.st"
  ;;
perclass)
  # one G per class: part="g<k>" on the rows of class k of the mixture
  ck=$(train perclass_fashion samples=1000 classes=3) || exit 1
  sample "$ck" 9
  for k in 0 1 2; do
    compare "per-class G$k: bridge vs ganflow sample" g "$ck" g$k "$T/s"
  done
  ;;
classifier)
  ck=$(train classifier_fashion test= out="$T/clf.safetensors") || exit 1
  forward "$ck" clf 16
  compare "classifier (logits, features): bridge vs ganflow" net "$ck" clf "$T/clf.st"
  # the file classifier_step exports for the evaluator loads the same way
  compare "exported classifier: bridge vs ganflow" net "$T/clf.safetensors" classifier "$T/clf.st"
  ;;
stylegan2)
  # the conditional StyleGAN2 at a tiny width with style mixing: G (its
  # moving average, the constant noise, w_avg, style_mix/style_w as eval's
  # identity) against ganflow sample, D (mbstd, cmap) against net_forward,
  # both through the bridge and exported to ONNX
  ck=$(train stylegan2_fashion samples=1000 ch=8 z=16 w=16 classes=10 mbstd=2 r1_every=2 mixing=0.9) || exit 1
  sample "$ck" 20
  compare "StyleGAN2 G: bridge vs ganflow sample" g "$ck" g "$T/s"
  # a checkpoint of before the scalar noise strength (one per channel,
  # tests/train/old_noise.py: each the scalar repeated): the bridge reads it
  # as gf_ckpt_table does, as it was trained: the same images
  "$PY" "$S/tests/train/old_noise.py" "$ck" "$T/old.safetensors" >/dev/null || fail "cannot make the old checkpoint"
  compare "StyleGAN2 G with per-channel noise strengths (old checkpoint): bridge vs ganflow sample" g "$T/old.safetensors" g "$T/s"
  forward "$ck" d 16
  compare "StyleGAN2 D: bridge vs ganflow" net "$ck" d "$T/d.st"
  "$G" export "$ck" "$T/g.onnx" >"$T/e.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'labels' '$T/e.log'" "ganflow export (StyleGAN2 G) failed: $(cat "$T/e.log")"
  compare "ONNX StyleGAN2 G vs ganflow sample" onnx "$T/g.onnx" "$T/s"
  "$G" export "$ck" "$T/d.onnx" part=discriminator >"$T/e.log" 2>&1
  check "[ $? -eq 0 ]" "ganflow export (StyleGAN2 D) failed: $(cat "$T/e.log")"
  compare "ONNX StyleGAN2 D vs ganflow" onnx "$T/d.onnx" "$T/d.st"
  ;;
r3gan)
  # the conditional R3GAN at a tiny width (grouped convolutions, the bases,
  # the fir resamplers, G's average on its schedule): G against ganflow
  # sample, D (its projection) against net_forward, through the bridge and
  # exported to ONNX
  ck=$(train r3gan_fashion samples=1000 width=16 cardinality=2 classes=10 decay_kimg=0.05) || exit 1
  sample "$ck" 20
  compare "R3GAN G: bridge vs ganflow sample" g "$ck" g "$T/s"
  forward "$ck" d 16
  compare "R3GAN D: bridge vs ganflow" net "$ck" d "$T/d.st"
  "$G" export "$ck" "$T/g.onnx" >"$T/e.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'labels' '$T/e.log'" "ganflow export (R3GAN G) failed: $(cat "$T/e.log")"
  compare "ONNX R3GAN G vs ganflow sample" onnx "$T/g.onnx" "$T/s"
  ;;
export)
  ck=$(train cgan_fashion samples=1000 labels=data) || exit 1
  sample "$ck" 20
  forward "$ck" d 12
  "$G" export "$ck" "$T/g.onnx" >"$T/e.log" 2>&1
  check "[ $? -eq 0 ] && grep -q 'labels' '$T/e.log'" "ganflow export (G) failed: $(cat "$T/e.log")"
  cat "$T/e.log"
  compare "ONNX conditional G vs ganflow sample" onnx "$T/g.onnx" "$T/s"
  "$G" export "$ck" "$T/d.onnx" part=discriminator batch=3 >"$T/e.log" 2>&1
  check "[ $? -eq 0 ]" "ganflow export part=discriminator failed: $(cat "$T/e.log")"
  compare "ONNX conditional D vs ganflow" onnx "$T/d.onnx" "$T/d.st"
  ck=$(train classifier_fashion test= out="$T/clf.safetensors") || exit 1
  forward "$ck" clf 8
  "$G" export "$ck" "$T/c.onnx" part=clf >"$T/e.log" 2>&1
  check "[ $? -eq 0 ]" "ganflow export part=clf failed: $(cat "$T/e.log")"
  compare "ONNX classifier vs ganflow" onnx "$T/c.onnx" "$T/clf.st"
  # an installed tree: the command finds the package under share/ganflow/python
  cmake --install "$B" --prefix "$T/inst" >"$T/i.log" 2>&1
  check "[ $? -eq 0 ] && [ -f '$T/inst/share/ganflow/python/ganflow/export.py' ]" "cmake --install put no python package: $(tail -3 "$T/i.log")"
  (cd / && env -u PYTHONPATH "$T/inst/bin/ganflow" export "$ck" "$T/i.onnx" part=clf) >"$T/e.log" 2>&1
  check "[ $? -eq 0 ] && [ -s '$T/i.onnx' ]" "the installed ganflow export failed: $(cat "$T/e.log")"
  ;;
errors)
  ck=$(train classifier_fashion test= out="$T/clf.safetensors") || exit 1
  "$G" export "$ck" "$T/x.onnx" >"$T/e.log" 2>&1
  check "[ $? -eq 1 ] && grep -q \"has no part 'g' (its parts: clf (classifier))\" '$T/e.log'" \
    "export without part g should name the parts: $(cat "$T/e.log")"
  check "[ ! -e '$T/x.onnx' ]" "a failed export should write no file"
  # PyTorch missing: python3 -S leaves dist-packages (torch) off the path
  printf '#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n' >"$T/py" && chmod +x "$T/py"
  GANFLOW_PYTHON=$T/py "$G" export "$ck" "$T/x.onnx" part=clf >"$T/e.log" 2>&1
  check "[ $? -eq 3 ] && grep -q 'install python3-torch' '$T/e.log'" "no torch should say install python3-torch: $(cat "$T/e.log")"
  GANFLOW_PYTHON=$T/none "$G" export "$ck" "$T/x.onnx" >"$T/e.log" 2>&1
  check "[ $? -eq 1 ] && grep -q 'python3-torch' '$T/e.log'" "no interpreter should say what to install: $(cat "$T/e.log")"
  "$G" export "$T/fm" "$T/x.onnx" >"$T/e.log" 2>&1
  check "[ $? -eq 1 ] && grep -q 'checkpoints/latest' '$T/e.log'" "a directory without checkpoints: $(cat "$T/e.log")"
  "$G" export "$ck" "$T/x.onnx" part=clf bogus=1 >"$T/e.log" 2>&1
  check "[ $? -eq 2 ] && grep -q \"unknown argument 'bogus=1'\" '$T/e.log'" "unknown key: $(cat "$T/e.log")"
  # the Python API: a part that is not there, a tensor of another shape
  out=$("$PY" - "$ck" <<'PY' 2>&1
import sys, torch, ganflow.torch as gt
from ganflow.checkpoint import CheckpointError
try:
    gt.load(sys.argv[1], part="g3")
except CheckpointError as e:
    print("E1", e)
net = gt.load(sys.argv[1], part="classifier", ema=True)
print("EMA", net.ema, net.training, net.input_shape, net.output_shape, net.classes)
PY
)
  echo "$out"
  check "echo \"\$out\" | grep -q \"E1 .*has no part 'g3'\"" "load(part=g3) should name the missing part"
  check "echo \"\$out\" | grep -q 'EMA False False (1, 32, 32) (10,) 0'" "ema=True without EMA weights: live weights, eval mode"
  ;;
damaged)
  # A damaged or foreign checkpoint: the bridge and `ganflow export` refuse
  # what `ganflow sample` (the C reader) refuses, with the same message.
  ck=$(train dcgan_fashion) || exit 1
  "$PY" - "$ck" "$T" <<'PY' || { echo "FAIL: cannot make the damaged checkpoints"; exit 1; }
import json, struct, sys
src, T = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head, data = json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])
def write(name, h, d):
    hb = json.dumps(h).encode()
    open(f"{T}/{name}.safetensors", "wb").write(struct.pack("<Q", len(hb)) + hb + bytes(d))
def edit(f):
    h = json.loads(json.dumps(head))
    f(h)
    return h
open(f"{T}/half.safetensors", "wb").write(raw[:len(raw) // 2])            # truncated
open(f"{T}/short.safetensors", "wb").write(raw[:8 + n // 2])               # inside the header
write("v99", edit(lambda h: h["__metadata__"].update(format="ganflow-checkpoint-99")), data)
write("foreign", edit(lambda h: h["__metadata__"].update(format="pt")), data)
write("noformat", edit(lambda h: h["__metadata__"].pop("format")), data)
write("i32", edit(lambda h: h["g.net.0.weight"].update(dtype="I32")), data)
write("shape", edit(lambda h: h["g.net.0.weight"].update(shape=h["g.net.0.weight"]["shape"][::-1])), data)
a = head["g.net.2.running_var"]["data_offsets"][0]
nan = bytearray(data)
nan[a:a + 4] = struct.pack("<f", float("nan"))
write("nan", head, nan)
PY
  # the bridge on every file in one interpreter (PyTorch loads once), export on three
  "$PY" - "$T" half short v99 foreign noformat i32 shape nan >"$T/bridge.txt" 2>&1 <<'PY'
import sys, ganflow.torch as gt
from ganflow.checkpoint import CheckpointError
for v in sys.argv[2:]:
    try:
        gt.load(f"{sys.argv[1]}/{v}.safetensors")
        print(f"{v}\tloaded")
    except CheckpointError as e:
        print(f"{v}\t{e}")
PY
  for v in half short v99 foreign noformat i32 shape nan; do
    f=$T/$v.safetensors
    "$G" sample "$f" n=4 out="$T/$v.png" >"$T/$v.c.log" 2>&1
    crc=$?
    msg=$(awk -F '\t' -v v="$v" '$1 == v { print $2 }' "$T/bridge.txt")
    echo "$v: sample rc=$crc: $(tail -1 "$T/$v.c.log")"
    echo "$v: bridge: $msg"
    check "[ $crc -ne 0 ] && [ -n \"\$msg\" ] && [ \"\$msg\" != loaded ]" "$v: sample (rc $crc) and the bridge ($msg) should both refuse it"
    check "grep -qF -- \"\$msg\" '$T/$v.c.log'" "$v: the bridge's message should be the C reader's: C says $(tail -1 "$T/$v.c.log")"
    case $v in half | v99 | nan) ;; *) continue ;; esac
    "$G" export "$f" "$T/$v.onnx" >"$T/$v.e.log" 2>&1
    erc=$?
    check "[ $erc -eq 1 ] && grep -qF -- \"\$msg\" '$T/$v.e.log' && [ ! -e '$T/$v.onnx' ]" "$v: export should fail with the same message, no file: rc $erc, $(tail -1 "$T/$v.e.log")"
  done
  check "grep -q 'outside the [0-9]* data bytes (truncated file?)' '$T/half.c.log'" "half a checkpoint: $(tail -1 "$T/half.c.log")"
  check "grep -q \"checkpoint format 'ganflow-checkpoint-99' is not one this version reads\" '$T/v99.c.log' && grep -q 'reads formats ganflow-checkpoint-1, ganflow-nn-1' '$T/v99.c.log'" "format 99: $(tail -1 "$T/v99.c.log")"
  check "grep -q 'g.net.2.running_var\[0\] is nan' '$T/nan.c.log'" "a NaN should be named: $(tail -1 "$T/nan.c.log")"
  # the formats ganflow wrote still load: a training checkpoint, a classifier export
  clf=$(train classifier_fashion test= out="$T/clf.safetensors") || exit 1
  out=$("$PY" -c 'import sys, ganflow.torch as gt
print(gt.load(sys.argv[1]).role, gt.load(sys.argv[2], part="classifier").role)' "$ck" "$T/clf.safetensors" 2>&1)
  check "[ \"\$out\" = 'generator classifier' ]" "ganflow-checkpoint-1 and ganflow-nn-1 files should load: $out"
  ;;
ema_parts)
  # G's moving average with one tensor taken out, for each of its tensors
  # (parameters, buffers such as w_avg and noise_const, its generator state
  # g.ema.rng): ganflow sample and the bridge refuse it with the same
  # message naming the tensor, never the trained weights in its place
  ck=$(train stylegan2_fashion samples=1000 ch=4 z=8 w=8 mbstd=2 r1_every=2) || exit 1
  "$PY" - "$ck" "$T" >"$T/parts.txt" <<'PY' || { echo "FAIL: cannot make the checkpoints"; exit 1; }
import json, struct, sys
src, T = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
for i, name in enumerate(k for k in head if k.startswith("g.ema.")):
    h = {k: v for k, v in head.items() if k != name}
    hb = json.dumps(h).encode()
    open(f"{T}/m{i}.safetensors", "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
    print(f"m{i}\t{name}")
PY
  # shellcheck disable=SC2046
  "$PY" - "$T" $(cut -f1 "$T/parts.txt") >"$T/bridge.txt" 2>&1 <<'PY'
import sys, ganflow.torch as gt
from ganflow.checkpoint import CheckpointError
for v in sys.argv[2:]:
    try:
        print(f"{v}\tloaded ema={gt.load(f'{sys.argv[1]}/{v}.safetensors').ema}")
    except CheckpointError as e:
        print(f"{v}\t{e}")
PY
  nparts=0
  while IFS=$'\t' read -r v name; do
    nparts=$((nparts + 1))
    "$G" sample "$T/$v.safetensors" n=4 out="$T/$v.png" >"$T/$v.c.log" 2>&1
    crc=$?
    msg=$(awk -F '\t' -v v="$v" '$1 == v { print $2 }' "$T/bridge.txt")
    want="no tensor '$name' (the network has it): the moving average of 'g' (g.ema.*) is incomplete;"
    check "[ $crc -ne 0 ] && grep -qF -- \"\$want\" '$T/$v.c.log' && grep -q 'ema=0 takes the trained weights' '$T/$v.c.log' && [ ! -e '$T/$v.png' ]" \
      "$name missing: ganflow sample should refuse naming it: rc $crc, $(tail -1 "$T/$v.c.log")"
    check "[[ \"\$msg\" == *\"\$want\"* ]] && [[ \"\$msg\" == *'ema=False takes the trained weights'* ]]" \
      "$name missing: the bridge should refuse it as sample does: $msg"
  done <"$T/parts.txt"
  check "[ $nparts -ge 20 ] && grep -q 'g.ema.w.w_avg' '$T/parts.txt' && grep -q 'g.ema.rng' '$T/parts.txt'" \
    "the average's tensors (w_avg and rng among them) should all be tried: $nparts"
  echo "ema_parts: $nparts tensors of G's average taken out one at a time"
  # eval and export follow the same rule; ema=0 / ema=False take the trained
  # weights: the same images through sample and the bridge
  m=$(awk -F '\t' '$2 == "g.ema.w.w_avg" { print $1 }' "$T/parts.txt")
  "$G" eval "$T/$m.safetensors" classifier="$ck" real="$T/fm/train" n=500 >"$T/eval.log" 2>&1
  check "[ $? -ne 0 ] && grep -q \"no tensor 'g.ema.w.w_avg'.*is incomplete\" '$T/eval.log'" "eval should refuse it: $(tail -1 "$T/eval.log")"
  "$G" export "$T/$m.safetensors" "$T/m.onnx" >"$T/export.log" 2>&1
  check "[ $? -eq 1 ] && grep -q \"no tensor 'g.ema.w.w_avg'.*is incomplete\" '$T/export.log' && [ ! -e '$T/m.onnx' ]" \
    "export should refuse it, no file: $(tail -1 "$T/export.log")"
  "$G" sample "$T/$m.safetensors" n=8 ema=0 out="$T/s.png" npy="$T/s" >"$T/s.log" 2>&1
  check "[ $? -eq 0 ]" "sample ema=0 should use the trained weights: $(cat "$T/s.log")"
  "$PY" - "$T/$m.safetensors" "$T/s" >"$T/net.log" 2>&1 <<'PY'
import sys, numpy as np, torch, ganflow.torch as gt
g = gt.load(sys.argv[1], ema=False)
assert not g.ema
z, y = np.load(sys.argv[2] + ".z.npy"), np.load(sys.argv[2] + ".images.npy")
d = float(np.abs(g(torch.from_numpy(z)).detach().numpy() - y).max())
print(f"ema=False vs sample ema=0: max_abs_diff={d:.3g}")
sys.exit(0 if d <= 1e-4 else 1)
PY
  check "[ $? -eq 0 ]" "the bridge's trained weights should give sample ema=0's images: $(cat "$T/net.log")"
  cat "$T/net.log"
  ;;
*)
  echo "unknown case $case_name"
  exit 2
  ;;
esac
[ $fails -eq 0 ] || exit 1
echo "ok [$case_name]"

#!/usr/bin/env bash
# Every recipe inside its captured step (docs/cuda.md "Nothing eager"): each
# pipeline of pipelines/ with its documented options runs a few steps on the
# plain CPU backend and on the CPU backend as a checked device
# (GANFLOW_CPU_DEVICE_CHECK=1: the CUDA backend's rules, graphs, events,
# results read later). Under the check every step stage must report
#   - no eager step after the warm-up of each kind of step (each key runs
#     eagerly once, then is captured and replayed), and
#   - no host wait inside a step (between an entry's begin and its push),
# and the checkpoint (networks, optimisers, EMA, every regulariser's state)
# must equal the eager run's, bit for bit. (Metrics values read a step later
# are compared value by value by test_train.sh's graphs case, whose G and D
# write separate files; here one metrics stage merges them as they arrive.)
#
#   test_recipes.sh GROUP      GROUP = dcgan | sngan | models | dp
#
# Exit 0 pass, 1 fail, 77 skip (no Fashion-MNIST; dp: no mpirun).
set -u
group=${1:?usage: test_recipes.sh GROUP}
B=${GF_BINARY_DIR:?} S=${GF_SOURCE_DIR:?}
G=$B/ganflow
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "skip: /usr/share/datasets/fashion-mnist is missing (apt-get install dataset-fashion-mnist)"
  exit 77
fi
if [ "$group" = dp ] && ! command -v mpirun >/dev/null; then
  echo "skip: no mpirun (apt-get install openmpi-bin)"
  exit 77
fi
# Open MPI's own allocations read as leaks at exit under AddressSanitizer
# (tests/dist.cmake does the same for the dist tests)
[ "$group" = dp ] && export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
T=$(mktemp -d /tmp/gf-recipes.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL [$group]: $*"; fails=$((fails + 1)); }

"$G" dataset fashion-mnist out="$T/fm" >/dev/null 2>&1 || { echo "FAIL: cannot convert Fashion-MNIST"; exit 1; }

# name | ranks | pipeline | options (besides steps, seed, threads, dir, data); r3gan:
# the relativistic pairs, R1 + R2 in the step, every schedule (lr, beta2,
# gamma, G's average, ADA's p) moving within the 6 steps
table() {
  case $group in
  dcgan) cat <<'EOF'
dcgan        1 dcgan_fashion     batch=8 n_dis=2
dcgan_r1     1 dcgan_fashion     batch=8 r1=1 r1_every=1
dcgan_lazy   1 dcgan_fashion     batch=8 n_dis=2 r1=1 r1_every=3 pl=2 pl_every=2
dcgan_gp     1 dcgan_fashion     batch=8 loss=wgan gp=10 n_dis=2 pl=2 pl_every=1
dcgan_ada    1 dcgan_fashion     batch=8 n_dis=2 ada=bgc ada_kimg=0.01 ada_p=0.2
dcgan_clip   1 dcgan_fashion     batch=8 clip=0.05
EOF
  ;;
  sngan) cat <<'EOF'
sngan_lecam  1 sngan_fashion     batch=8 ch_g=16 ch_d=16 n_dis=2 lecam=0.3
sngan_r1     1 sngan_fashion     batch=8 ch_g=16 ch_d=16 n_dis=2 r1=0.5 r1_every=3
sngan_aug    1 sngan_fashion     batch=8 ch_g=16 ch_d=16 n_dis=2 augment=color,translation,cutout classes=10
EOF
  ;;
  models) cat <<'EOF'
biggan       1 biggan_fashion    batch=8 ch=8 n_dis=2
stylegan2    1 stylegan2_fashion batch=8 ch=8 z=16 w=16 r1_every=2 ada_kimg=0.01
sg2_mix_pl   1 stylegan2_fashion batch=8 ch=8 z=16 w=16 r1_every=2 mixing=0.9 pl=2 pl_every=2 classes=10
pix2pix      1 pix2pix_edges     batch=4 ngf=8 ndf=8 test=@DATA@/../test
r3gan        1 r3gan_fashion     batch=8 width=16 cardinality=2 classes=10 aug=0.3 decay_kimg=0.05
EOF
  ;;
  dp) cat <<'EOF'
dp_allreduce 2 dp_fashion        batch=8
dp_zero1     2 dp_fashion        batch=8 mode=zero1 clip=1.0
EOF
  ;;
  *) echo "unknown group '$group'"; exit 2 ;;
  esac
}

data_of() {
  case $1 in
  pix2pix_edges)
    [ -d "$T/e2f/train" ] || "$G" dataset edges2fashion out="$T/e2f" >/dev/null 2>&1
    echo "$T/e2f/train" ;;
  *) echo "$T/fm/train" ;;
  esac
}

latest() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest")"; }

# sanitizer builds (GF_SANITIZE set, 5-10x slower): one row of each group,
# the one that combines the most recipes
asan_rows=" dcgan_gp sngan_lecam r3gan dp_zero1 "
while read -r name ranks pipe opts; do
  if [ -n "${GF_SANITIZE:-}" ] && [[ "$asan_rows" != *" $name "* ]]; then
    continue
  fi
  data=$(data_of "$pipe")
  for mode in eager check; do
    env=()
    [ $mode = check ] && env=(GANFLOW_CPU_DEVICE_CHECK=1)
    cmd=("$G" run "$S/pipelines/$pipe.lua" steps=6 seed=1 threads=1 samples=1000 log=1 "data=$data"
      "dir=$T/$name-$mode" quiet=true ${opts//@DATA@/$data})
    [ "$ranks" -gt 1 ] && cmd=(mpirun --allow-run-as-root --oversubscribe -np "$ranks" "${cmd[@]}")
    if ! env "${env[@]}" "${cmd[@]}" </dev/null >"$T/$name-$mode.log" 2>&1; then
      fail "$name ($mode) failed: $(tail -3 "$T/$name-$mode.log")"
      continue 2
    fi
  done
  log=$T/$name-check.log
  lines=$(grep -c ' steps: [0-9]* eager, [0-9]* captured, [0-9]* replayed as graphs' "$log")
  # every step stage on every rank: captured and replayed, nothing eager
  # after the warm-up, no host wait inside a step
  if [ "$lines" -lt 2 ]; then
    fail "$name: no step stage reported its steps: $(grep -h 'steps:' "$log")"
  elif grep ' steps: [0-9]* eager, [0-9]* captured, [0-9]* replayed as graphs' "$log" |
    grep -v ' [1-9][0-9]* replayed as graphs (0 eager after warm-up, 0 host waits inside steps,' | grep -q .; then
    fail "$name: steps eager after their warm-up, or host waits inside steps: $(grep -h 'steps:' "$log")"
  fi
  if ! "$B/tests/st_compare" "$(latest "$T/$name-eager")" "$(latest "$T/$name-check")" >"$T/$name.cmp" 2>&1; then
    fail "$name: the captured steps' checkpoint differs from the eager run's: $(tail -3 "$T/$name.cmp")"
  fi
  echo "$name: $(grep -h ' steps:' "$log" | sed 's/;.*//' | tr '\n' ' ')"
done < <(table)

[ "$fails" -eq 0 ] && echo "all $group recipes inside their captured steps" && exit 0
exit 1

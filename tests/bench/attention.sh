#!/usr/bin/env bash
# tests/bench/run attention [batch=64] [channels=128] [size=16] [threads=2] [iters=10] [repeat=5]:
# forward + backward of the self-attention layer (bench_attention) and of
# BigGAN's Attention module in PyTorch 1.13 on the CPU (tests/bench/
# torch_attention.py, /usr/bin/python3 or GF_PYTHON) in the same run, with
# and without spectral norm. Prints both times and their ratio per row, and
# last "attention: worst_ratio=X target=1.2". Without python3-torch the
# peer is skipped and the last line says so.
set -euo pipefail
build=${GF_BUILD:?run through tests/bench/run}
here=$(cd "$(dirname "$0")" && pwd)
batch=64 channels=128 size=16 threads=2 iters=10 repeat=5
for a in "$@"; do
  case $a in
    batch=*|channels=*|size=*|threads=*|iters=*|repeat=*) eval "${a%%=*}=${a#*=}" ;;
    *) echo "attention: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
args="batch=$batch channels=$channels size=$size threads=$threads iters=$iters repeat=$repeat"
ours=$("$build/tests/bench/bench_attention" $args)
py=${GF_PYTHON:-/usr/bin/python3}
echo "attention: batch $batch, ($channels, $size, $size), $threads threads, forward + backward"
if ! theirs=$(OMP_NUM_THREADS=$threads "$py" "$here/torch_attention.py" "$batch" "$channels" "$size" "$threads" \
              "$iters" "$repeat" 2>/dev/null); then
  echo "$ours"
  echo "attention: worst_ratio=n/a target=1.2 (no PyTorch peer: $py lacks torch)"
  exit 0
fi
printf '%-8s %12s %12s %8s\n' row ganflow_ms torch_ms ratio
worst=
for sn in 0 1; do
  g=$(sed -n "s/^attention sn=$sn ms=//p" <<<"$ours")
  t=$(sed -n "s/^torch sn=$sn ms=//p" <<<"$theirs")
  r=$(awk -v g="$g" -v t="$t" 'BEGIN { printf "%.2f", t / g }')
  printf '%-8s %12s %12s %8s\n' "sn=$sn" "$g" "$t" "$r"
  worst=$(awk -v w="${worst:-1e30}" -v r="$r" 'BEGIN { print (r < w ? r : w) }')
done
echo "attention: worst_ratio=$worst target=1.2"

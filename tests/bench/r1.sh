#!/usr/bin/env bash
# tests/bench/run r1 [net=both] [batch=64] [threads=2] [iters=10] [repeat=5] [gamma=10] [every=16]:
# the D step with the R1 penalty against the same step without it, in
# ganflow (bench_r1) and in PyTorch 1.13 (tests/bench/torch_r1.py,
# /usr/bin/python3 or GF_PYTHON) in the same run, for the DC-GAN D and the
# SNGAN D (ch 32) at 32x32x1. Per network and engine: the plain step, the
# step with R1 in it (r1_every = 1) and their ratio (target <= 2.5), the
# lazy R1 step (r1_every = every) and the amortised overhead of plain steps
# with one lazy step every `every` (target <= 1.15); then PyTorch's R1 step
# time over ganflow's, and last "r1: speedup_vs_torch=X target=1.2" (X the
# worse of the two networks). Without python3-torch the peer is skipped and
# the last line says so.
set -euo pipefail
build=${GF_BUILD:?run through tests/bench/run}
here=$(cd "$(dirname "$0")" && pwd)
net=both batch=64 threads=2 iters=10 repeat=5 gamma=10 every=16
for a in "$@"; do
  case $a in
    net=*|batch=*|threads=*|iters=*|repeat=*|gamma=*|every=*) eval "${a%%=*}=${a#*=}" ;;
    *) echo "r1: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
case $net in both) nets="dcgan sngan" ;; dcgan|sngan) nets=$net ;; *) echo "r1: net=dcgan|sngan|both" >&2; exit 2 ;; esac
py=${GF_PYTHON:-/usr/bin/python3}
echo "r1: D step, batch $batch, 32x32x1, $threads threads, gamma $gamma, lazy every $every (best of $repeat x $iters)"
printf '%-6s %-8s %9s %9s %7s %9s %10s\n' net engine plain_ms r1_ms ratio reg_ms amortised
worst= torch=1
get() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$2"; }
for n in $nets; do
  ours=$("$build/tests/bench/bench_r1" net="$n" batch="$batch" threads="$threads" iters="$iters" repeat="$repeat" \
         gamma="$gamma" every="$every")
  theirs=
  if [ -n "$torch" ] && ! theirs=$(OMP_NUM_THREADS=$threads "$py" "$here/torch_r1.py" "$n" "$batch" "$iters" "$repeat" \
                                   "$threads" "$gamma" "$every" 2>/dev/null); then
    torch= theirs=
  fi
  for line in "$ours" ${theirs:+"$theirs"}; do
    e=${line%% *}
    p=$(get plain_ms "$line") r=$(get r1_ms "$line") g=$(get reg_ms "$line")
    awk -v n="$n" -v e="$e" -v p="$p" -v r="$r" -v g="$g" -v k="$every" \
      'BEGIN { printf "%-6s %-8s %9.2f %9.2f %7.2f %9.2f %10.3f\n", n, e, p, r, r / p, g, (k * p + g) / (k * p) }'
  done
  if [ -n "$theirs" ]; then
    s=$(awk -v a="$(get r1_ms "$theirs")" -v b="$(get r1_ms "$ours")" 'BEGIN { printf "%.2f", a / b }')
    echo "$n: PyTorch's R1 step / ganflow's = $s"
    worst=$(awk -v w="${worst:-1e30}" -v s="$s" 'BEGIN { print (s < w ? s : w) }')
  fi
done
echo "targets: ratio (the R1 step over the plain step) <= 2.5, amortised <= 1.15"
if [ -z "$torch" ]; then
  echo "r1: speedup_vs_torch=n/a target=1.2 (no PyTorch peer: $py lacks torch)"
else
  echo "r1: speedup_vs_torch=$worst target=1.2"
fi

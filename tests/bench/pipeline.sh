#!/usr/bin/env bash
# tests/bench/run pipeline [steps=400] [rounds=3]
# images/s of the full default pipeline (pipelines/dcgan_fashion.lua:
# reader -> decode -> batch -> d_step <-> g_step, sample grids, metrics,
# checkpoint) against the isolated step benchmark of the same networks
# (bench_dcgan_step: G step + D step in a loop, no data path), alternated
# `rounds` times in the same run; best of each. Both figures are means over
# the same number of steps after a warm-up: the pipeline's, of its metrics
# lines after the first two (50 steps); the isolated step's, of one timed
# run of steps - 50 iterations (a shorter one would catch only the
# machine's fast moments, a shared VM's speed drifts by 10%). And the
# reader->d_step edge's stalls after warm-up are reported: the data path
# must never starve the step. Target: pipeline >= 0.95 x isolated step.
set -euo pipefail
build=${GF_BUILD:?run through tests/bench/run}
src=${GF_SOURCE_DIR:?}
steps=400 rounds=3
for a in "$@"; do
  case $a in
    steps=*) steps=${a#steps=} ;;
    rounds=*) rounds=${a#rounds=} ;;
    *) echo "pipeline: unknown argument $a (steps=, rounds=)" >&2; exit 2 ;;
  esac
done
data=$build/bench-data/fashion-mnist
"$build/ganflow" dataset fashion-mnist out="$data" >/dev/null
tmp=$(mktemp -d /tmp/gf-bench-pipeline.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

best_step=0 best_pipe=0 stalls=-1
for r in $(seq 1 "$rounds"); do
  # the same statistic on both sides: mean images/s over as many steps as
  # the pipeline's measured part (its steps after the 50 warm-up steps)
  s=$("$build/tests/bench/bench_dcgan_step" peer=0 iters=$((steps - 50)) repeat=1 |
      awk '/ganflow images\/s \(best\)/ { print $NF }')
  "$build/ganflow" run "$src/pipelines/dcgan_fashion.lua" data="$data/train" steps="$steps" log=25 \
    dir="$tmp/run$r" quiet=true >"$tmp/run$r.log" 2>&1
  # mean images/s after warm-up, and stalls of the batch -> d edge since then
  read -r p st < <(awk -F'"images_per_s":' 'NR > 2 && NF > 1 { split($2, a, ","); if (a[1] != "null") { s += a[1]; n++ } }
      END { printf "%.1f ", n ? s / n : 0 }' "$tmp/run$r/metrics.jsonl"
    grep -o '"from":"batch.batch","to":"d.real"[^}]*"stalls":[0-9]*' "$tmp/run$r/metrics.jsonl" |
      sed 's/.*"stalls"://' | awk 'NR == 2 { first = $1 } { last = $1 } END { print last - first }')
  printf "round %d: isolated step %8.1f images/s   full pipeline %8.1f images/s   reader->d stalls after warm-up %s\n" \
    "$r" "$s" "$p" "$st"
  best_step=$(awk -v a="$best_step" -v b="$s" 'BEGIN { print (b > a ? b : a) }')
  if awk -v a="$best_pipe" -v b="$p" 'BEGIN { exit !(b > a) }'; then best_pipe=$p; stalls=$st; fi
done
ratio=$(awk -v p="$best_pipe" -v s="$best_step" 'BEGIN { printf "%.3f", (s > 0 ? p / s : 0) }')
printf "\n%-52s %10s\n" "pipeline (seed DC-GAN, batch 64, 32x32x1, CPU)" "value"
printf "%-52s %10.1f\n" "isolated step (bench_dcgan_step), best images/s" "$best_step"
printf "%-52s %10.1f\n" "full default pipeline, best images/s after warm-up" "$best_pipe"
printf "%-52s %10s\n" "batch -> d_step stalls after warm-up (that run)" "$stalls"
echo "pipeline: ratio_vs_step=$ratio target=0.95"

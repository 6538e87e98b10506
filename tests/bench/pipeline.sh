#!/usr/bin/env bash
# tests/bench/run pipeline [backend=cpu|cuda] [batch=64] [precision=fp32]
#                          [steps=N] [rounds=N] [log=N] [decoders=N]
# images/s of the full default pipeline (pipelines/dcgan_fashion.lua:
# reader -> decode -> batch -> d_step <-> g_step, sample grids, metrics,
# checkpoint) against the isolated step benchmark of the same networks
# (bench_dcgan_step: G step + D step in a loop, no data path), alternated
# `rounds` times in the same run; best of each. Both figures are means over
# the same number of steps after a warm-up: the pipeline's, of its metrics
# lines after the first two (the warm-up, 2 x log steps); the isolated
# step's, of one timed run of steps - warm-up iterations (a shorter one
# would catch only the machine's fast moments, a shared VM's speed drifts by
# 10%). And the reader->d_step edge's stalls after warm-up are reported: the
# data path must never starve the step.
#
#   CPU (default): steps=400 rounds=3, log every 25 steps; the isolated step
#   on the CPU backend in fp32 (precision=tf32 is plain fp32 there).
#   Target: pipeline >= 0.95 x isolated step.
#
#   CUDA (backend=cuda): the pipeline with backend=cuda and the same
#   precision (fp32, tf32, bf16, fp16) against bench_dcgan_step backend=cuda
#   with CUDA graphs at the same batch and precision; steps=2000 at batch
#   <= 256, else 400, rounds=1, log every steps/20. Target (issue 27): the
#   pipeline >= 0.9 x the isolated step. Without a GPU it says
#   "pipeline: no CUDA device (...) — GPU figures not measured" and exits 0.
#
# log= sets the metrics interval (the warm-up is two of them); decoders= is
# passed to the pipeline (its default otherwise). The last line
# is "pipeline: ratio_vs_step=X target=T".
set -euo pipefail
build=${GF_BUILD:?run through tests/bench/run}
src=${GF_SOURCE_DIR:?}
backend=cpu batch=64 precision=fp32 steps='' rounds='' log='' decoders=''
for a in "$@"; do
  case $a in
    backend=*) backend=${a#backend=} ;;
    batch=*) batch=${a#batch=} ;;
    precision=*) precision=${a#precision=} ;;
    steps=*) steps=${a#steps=} ;;
    rounds=*) rounds=${a#rounds=} ;;
    log=*) log=${a#log=} ;;
    decoders=*) decoders=${a#decoders=} ;;
    *) echo "pipeline: unknown argument $a (backend=, batch=, precision=, steps=, rounds=, log=, decoders=)" >&2; exit 2 ;;
  esac
done
case $backend in cpu|cuda) ;; *) echo "pipeline: backend=$backend (cpu or cuda)" >&2; exit 2 ;; esac
case $precision in fp32|tf32|bf16|fp16) ;; *) echo "pipeline: precision=$precision (fp32, tf32, bf16, fp16)" >&2; exit 2 ;; esac
if [ "$backend" = cpu ] && [ "$precision" != fp32 ] && [ "$precision" != tf32 ]; then
  echo "pipeline: precision=$precision needs backend=cuda (the CPU backend computes in fp32)" >&2
  exit 2
fi
if [ "$backend" = cuda ]; then
  : "${steps:=$([ "$batch" -le 256 ] && echo 2000 || echo 400)}" "${rounds:=1}" "${log:=$((steps / 20))}"
else
  : "${steps:=400}" "${rounds:=3}" "${log:=25}"
fi
[ "$log" -ge 1 ] || log=1
warm=$((2 * log))
if ! [ "$batch" -ge 1 ] 2>/dev/null || [ "$steps" -le $((warm + log)) ] || ! [ "$rounds" -ge 1 ]; then
  echo "pipeline: batch and rounds must be positive, steps > 3 x log ($steps, log $log)" >&2
  exit 2
fi
tmp=$(mktemp -d /tmp/gf-bench-pipeline.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
data=$build/bench-data/fashion-mnist
"$build/ganflow" dataset fashion-mnist out="$data" >"$tmp/convert.log" 2>&1 || { cat "$tmp/convert.log" >&2; exit 1; }
extra=()
[ -z "$decoders" ] || extra+=("decoders=$decoders")

# The isolated step, same batch (and on the GPU same precision, with CUDA
# graphs): mean images/s of one timed run of `iters` iterations.
isolated() { # iters
  if [ "$backend" = cuda ]; then
    "$build/tests/bench/bench_dcgan_step" backend=cuda batches="$batch" precision="$precision" graphs=1 \
      iters="$1" repeat=1 peer=0 >"$tmp/step.log" 2>&1 || { cat "$tmp/step.log" >&2; return 1; }
    if grep -q "no CUDA device" "$tmp/step.log"; then
      echo "pipeline: $(grep -o 'no CUDA device.*' "$tmp/step.log" | head -1)"
      return 0
    fi
    awk '/graphs=1:/ { for (i = 1; i < NF; i++) if ($(i + 1) == "images/s") print $i }' "$tmp/step.log"
  else
    "$build/tests/bench/bench_dcgan_step" batch="$batch" peer=0 iters="$1" repeat=1 |
      awk '/ganflow images\/s \(best\)/ { print $NF }'
  fi
}

best_step=0 best_pipe=0 stalls=-1
for r in $(seq 1 "$rounds"); do
  # the same statistic on both sides: mean images/s over as many steps as
  # the pipeline's measured part (its steps after the warm-up)
  s=$(isolated $((steps - warm)))
  case $s in "pipeline: no CUDA device"*) echo "$s"; exit 0 ;; esac
  [ -n "$s" ] || { echo "pipeline: no figure from bench_dcgan_step" >&2; exit 1; }
  if ! "$build/ganflow" run "$src/pipelines/dcgan_fashion.lua" data="$data/train" steps="$steps" log="$log" \
    backend="$backend" batch="$batch" precision="$precision" "${extra[@]}" \
    dir="$tmp/run$r" quiet=true >"$tmp/run$r.log" 2>&1; then
    echo "pipeline: the pipeline failed (backend=$backend batch=$batch precision=$precision):" >&2
    tail -5 "$tmp/run$r.log" >&2
    exit 1
  fi
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
if [ "$backend" = cuda ]; then
  what="CUDA, $precision" step_what="isolated step with CUDA graphs, best images/s" target=0.9
else
  what="CPU, fp32" step_what="isolated step (bench_dcgan_step), best images/s" target=0.95
  [ "$precision" = fp32 ] || what="CPU, $precision = fp32 there"
fi
printf "\n%-52s %10s\n" "pipeline (seed DC-GAN, batch $batch, 32x32x1, $what)" "value"
printf "%-52s %10.1f\n" "$step_what" "$best_step"
printf "%-52s %10.1f\n" "full default pipeline, best images/s after warm-up" "$best_pipe"
printf "%-52s %10s\n" "batch -> d_step stalls after warm-up (that run)" "$stalls"
echo "pipeline: ratio_vs_step=$ratio target=$target"

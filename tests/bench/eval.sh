#!/usr/bin/env bash
# tests/bench/run eval [n=10000]
# Seconds of `ganflow eval` over n generated images on 2 threads, split into
# generation (G forward), feature extraction (classifier forward) and the
# statistics (FID + IS + KID; precision/recall shown apart). The real
# statistics are cached beforehand (computed once per split and
# classifier, as in normal use). Needs a classifier and a G checkpoint: the
# script trains small ones into the bench build directory on first use.
# Target: statistics under 2 s.
set -euo pipefail
build=${GF_BUILD:?run through tests/bench/run}
src=${GF_SOURCE_DIR:?}
n=10000
for a in "$@"; do
  case $a in
    n=*) n=${a#n=} ;;
    *) echo "eval: unknown argument $a (n=)" >&2; exit 2 ;;
  esac
done
G=$build/ganflow
work=$build/bench-data
data=$work/fashion-mnist
"$G" dataset fashion-mnist out="$data" >/dev/null
clf=$work/classifier.safetensors
if [ ! -f "$clf" ]; then
  echo "training the benchmark's classifier (once) ..."
  "$G" run "$src/pipelines/classifier_fashion.lua" data="$data/train" test="$data/test" out="$clf" \
    steps=400 dir="$work/clf-run" quiet=true >/dev/null 2>&1
fi
if [ ! -f "$work/g-run/checkpoints/latest" ]; then
  echo "training the benchmark's generator (once) ..."
  rm -rf "$work/g-run"
  "$G" run "$src/pipelines/dcgan_fashion.lua" data="$data/train" steps=100 dir="$work/g-run" quiet=true >/dev/null 2>&1
fi
ck=$work/g-run/checkpoints/$(cat "$work/g-run/checkpoints/latest")
# the cache of the real statistics, as a training run leaves it
"$G" eval "$data/test" classifier="$clf" real="$data/train" n=2000 pr=false threads=2 >/dev/null 2>&1
out=$(mktemp /tmp/gf-bench-eval.XXXXXX.json)
trap 'rm -f "$out"' EXIT
"$G" eval "$ck" classifier="$clf" real="$data/train" n="$n" threads=2 json="$out" 2>/dev/null | sed 's/^/  /'
read -r gen feat stats _ < <(tr ',' '\n' <"$out" | awk -F: '
  /sec_generation/ { g = $2 } /sec_features/ { f = $2 } /sec_statistics/ { s = $2 }
  END { printf "%s %s %s 0\n", g, f, s }')
printf "\n%-48s %10s\n" "eval of $n generated images (2 threads)" "seconds"
printf "%-48s %10.2f\n" "generation (G forward)" "$gen"
printf "%-48s %10.2f\n" "feature extraction (classifier forward)" "$feat"
printf "%-48s %10.2f\n" "statistics: FID + IS + KID" "$stats"
echo "eval: stats_seconds=$(printf '%.2f' "$stats") target=2.00"

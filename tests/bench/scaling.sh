#!/usr/bin/env bash
# tests/bench/run scaling [steps=40] [reps=3] [batch=64]
# Weak scaling, 1 vs 2 ranks (one compute thread per step stage:
# threads=1; every rank bound to a core of its own, mpirun --bind-to core,
# as it would own its GPU: a single unbound rank would also borrow the
# second core for its D and data-path threads, which no rank of a full
# machine can), fixed per-rank batch, DC-GAN on Fashion-MNIST:
#   allreduce  pipelines/dp_fashion.lua (gradients all-reduced in buckets
#              during the backward pass);
#   per-class  pipelines/perclass_mpi.lua with one class per rank (no
#              gradient exchange; the books cross to rank 0).
# Throughput comes from the wall times of a 10-step and a `steps`-step run
# (start-up and the end cancel out; a run ends with its slowest rank);
# efficiency = throughput(2 ranks) / (2 x throughput(1 rank)) = step
# rate(2) / step rate(1), the median over `reps` alternating repetitions. The communication-wait fraction is the time
# the step stages waited for the exchange after their own work
# (comm_wait_g + comm_wait_d) over the step time. Then bench_scaling
# calibrates alpha/beta on this machine and prints the cost model's
# prediction for 2 ranks next to the measurement, and for 8-1024 GPUs.
# The last line is the convention line for the all-reduce efficiency.
set -euo pipefail
build=${GF_BUILD:?run through tests/bench/run}
root=${GF_SOURCE_DIR:?}
G=$build/ganflow
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
steps=40 reps=3 batch=64
for a in "$@"; do
  case $a in
    steps=*) steps=${a#steps=} ;;
    reps=*) reps=${a#reps=} ;;
    batch=*) batch=${a#batch=} ;;
    *) echo "scaling: unknown argument $a (steps=, reps=, batch=)" >&2; exit 2 ;;
  esac
done
command -v mpirun >/dev/null || { echo "scaling: mpirun not found (openmpi-bin)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/gf_scaling_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
data=$root/data/fashion-mnist/train
if [ ! -d "$data" ]; then
  "$G" dataset fashion-mnist out="$tmp/fm" >/dev/null 2>&1 || { echo "scaling: no Fashion-MNIST (ganflow dataset fashion-mnist)" >&2; exit 2; }
  data=$tmp/fm/train
fi

# one MODE NP STEPS DIR: one run; prints its wall time in seconds
one() {
  local mode=$1 np=$2 st=$3 dir=$4 t0 t1
  local common=(data="$data" batch="$batch" steps="$st" threads=1 samples=1000000 log=5 dir="$dir" quiet=true)
  local p=("$root/pipelines/dp_fashion.lua")
  [ "$mode" = perclass ] && p=("$root/pipelines/perclass_mpi.lua" classes="$np")
  t0=$(date +%s.%N)
  mpirun --allow-run-as-root --bind-to core --map-by core -np "$np" "$G" run "${p[@]}" "${common[@]}" \
    >"$dir.log" 2>&1 || { cat "$dir.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }'
}

# run MODE NP REP -> "rate wait_g wait_d busy_g busy_d": steps/s from the
# wall times of a 10-step and a `steps`-step run (start-up and the final
# checkpoint cancel out; a run ends when its slowest rank does), and the
# per-step exchange waits (seconds) from the longer run's metrics
run() {
  local mode=$1 np=$2 rep=$3 base=$tmp/$1-$2-$3
  local ta tb
  ta=$(one "$mode" "$np" 10 "$base-a")
  tb=$(one "$mode" "$np" "$steps" "$base-b")
  python3 - "$base-b/metrics.jsonl" "$ta" "$tb" "$steps" <<'PY'
import json, sys
ta, tb, steps = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
win = [r for r in rows if r.get("step", 0) > 10]
avg = lambda k: sum(r.get(k, 0.0) for r in win) / max(1, len(win))
rate = (steps - 10) / (tb - ta)
print(f'{rate:.6f} {avg("comm_wait_g"):.6f} {avg("comm_wait_d"):.6f} {avg("comm_busy_g"):.6f} {avg("comm_busy_d"):.6f}')
PY
}

declare -A R
for rep in $(seq 1 "$reps"); do
  for cfg in "allreduce 1" "allreduce 2" "perclass 1" "perclass 2"; do
    set -- $cfg
    R[$1-$2-$rep]=$(run "$1" "$2" "$rep")
  done
done
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { local k=$1 c=$2; for rep in $(seq 1 "$reps"); do echo "${R[$k-$rep]}" | awk -v c="$c" '{ print $c }'; done | median; }

ar1=$(col allreduce-1 1) ar2=$(col allreduce-2 1) pc1=$(col perclass-1 1) pc2=$(col perclass-2 1)
wg=$(col allreduce-2 2) wd=$(col allreduce-2 3) bg=$(col allreduce-2 4) bd=$(col allreduce-2 5)
eff_ar=$(awk -v a="$ar1" -v b="$ar2" 'BEGIN { printf "%.3f", b / a }')
eff_pc=$(awk -v a="$pc1" -v b="$pc2" 'BEGIN { printf "%.3f", b / a }')
frac=$(awk -v w1="$wg" -v w2="$wd" -v r="$ar2" 'BEGIN { printf "%.4f", (w1 + w2) * r }')
t1=$(awk -v r="$ar1" 'BEGIN { printf "%.6f", 1 / r }')

echo "scaling: DC-GAN on Fashion-MNIST, batch $batch per rank, threads=1, one core per rank, steps 10..$steps, median of $reps"
echo "(the machine is shared: other builds and runs may load its cores)"
printf "%-10s %6s %12s %12s %12s %10s %10s\n" mode ranks "steps/s" "images/s" "step ms" efficiency "comm wait"
for m in allreduce perclass; do
  for np in 1 2; do
    v=$(col $m-$np 1)
    e=1.000
    [ "$np" = 2 ] && { [ $m = allreduce ] && e=$eff_ar || e=$eff_pc; }
    cw=-
    [ $m = allreduce ] && [ "$np" = 2 ] && cw=$frac
    printf "%-10s %6s %12.3f %12.1f %12.1f %10s %10s\n" $m "$np" "$v" \
      "$(awk -v v="$v" -v b="$batch" -v n="$np" 'BEGIN { print v * b * n }')" \
      "$(awk -v v="$v" 'BEGIN { print 1000 / v }')" "$e" "$cw"
  done
done
printf "all-reduce, 2 ranks, per step: G waited %.2f ms and D %.2f ms for the exchange; the exchange worked %.2f + %.2f ms\n" \
  "$(awk -v x="$wg" 'BEGIN { print x * 1e3 }')" "$(awk -v x="$wd" 'BEGIN { print x * 1e3 }')" \
  "$(awk -v x="$bg" 'BEGIN { print x * 1e3 }')" "$(awk -v x="$bd" 'BEGIN { print x * 1e3 }')"
for r in $(seq 1 "$reps"); do
  echo "  rep $r steps/s: allreduce ${R[allreduce-1-$r]%% *} / ${R[allreduce-2-$r]%% *}, per-class ${R[perclass-1-$r]%% *} / ${R[perclass-2-$r]%% *}"
done

cal=$(mpirun --allow-run-as-root --oversubscribe -np 2 "$build/tests/bench/bench_scaling" calibrate)
alpha=$(echo "$cal" | sed -n 's/.*alpha_us=\([0-9.e+-]*\).*/\1/p')
beta=$(echo "$cal" | sed -n 's/.*beta_gbps=\([0-9.e+-]*\).*/\1/p')
"$build/tests/bench/bench_scaling" model t1="$t1" alpha_us="$alpha" beta_gbps="$beta" bucket_mb=4 measured="$eff_ar"
echo "scaling: perclass_efficiency=$eff_pc target=0.97 comm_wait_fraction=$frac"
echo "scaling: allreduce_efficiency=$eff_ar target=0.90"

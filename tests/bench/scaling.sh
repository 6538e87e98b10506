#!/usr/bin/env bash
# tests/bench/run scaling [steps=40] [reps=3] [batch=64] [warm=10]
# Weak scaling, 1 vs 2 ranks (one compute thread per step stage:
# threads=1; every rank bound to a core of its own, mpirun --bind-to core,
# as it would own its GPU: a single unbound rank would also borrow the
# second core for its D and data-path threads, which no rank of a full
# machine can), fixed per-rank batch, DC-GAN on Fashion-MNIST:
#   allreduce  pipelines/dp_fashion.lua (gradients all-reduced in buckets
#              during the backward pass);
#   per-class  pipelines/perclass_mpi.lua with one class per rank (no
#              gradient exchange; the books cross to rank 0);
#   independent  the machine's ceiling: the one-class pipeline as 1 and
#              as 2 unrelated processes (no MPI, taskset to a core each)
#              at once; a world of two is as slow as its slower rank, so
#              the slower one counts.
# Step rate: steady state, inside each run. metrics.jsonl (log=1) records
# for every step stage (g, d; g0, d0, g1, d1 of both ranks) its latest
# step and when it arrived ("sources"); a stage's rate is its steps from
# `warm` to the end over the time they took, and a run's rate is that of
# its slowest stage (a rank that lags holds the world back). Start-up,
# warm-up and the final checkpoint are left out: the same in both worlds,
# they are noise here, not scaling. Efficiency = rate(2 ranks) / rate(1
# rank) (weak scaling: the same batch per rank), taken within each
# repetition, which runs 1, 2, 2 and 1 ranks in a row and compares the
# means (this VM's speed drifts by ~10% over minutes: a linear drift
# cancels), and the median over `reps` repetitions.
# The end-to-end wall-clock figure (start-up included) is printed beside
# it. The communication-wait fraction is the time the step stages spent
# in the exchange's collectives (comm_wait_g + comm_wait_d) over the step
# time. Then bench_scaling calibrates alpha/beta on this machine
# and prints the cost model's prediction for 2 ranks next to the
# measurement, and for 8-1024 GPUs. The last line is the convention line
# for the all-reduce efficiency.
set -euo pipefail
build=${GF_BUILD:?run through tests/bench/run}
root=${GF_SOURCE_DIR:?}
G=$build/ganflow
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
steps=40 reps=3 batch=64 warm=10
for a in "$@"; do
  case $a in
    steps=*) steps=${a#steps=} ;;
    reps=*) reps=${a#reps=} ;;
    batch=*) batch=${a#batch=} ;;
    warm=*) warm=${a#warm=} ;;
    *) echo "scaling: unknown argument $a (steps=, reps=, batch=, warm=)" >&2; exit 2 ;;
  esac
done
[ "$steps" -ge $((warm + 10)) ] || { echo "scaling: steps=$steps must be at least warm + 10 = $((warm + 10))" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "scaling: mpirun not found (openmpi-bin)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/gf_scaling_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
data=$root/data/fashion-mnist/train
if [ ! -d "$data" ]; then
  "$G" dataset fashion-mnist out="$tmp/fm" >/dev/null 2>&1 || { echo "scaling: no Fashion-MNIST (ganflow dataset fashion-mnist)" >&2; exit 2; }
  data=$tmp/fm/train
fi

# run MODE NP REP -> "rate wall_rate wait_g wait_d busy_g busy_d": the
# steady step rate (slowest stage, steps warm..end), the end-to-end rate
# (steps over the wall time of the whole run) and the per-step exchange
# waits (seconds, mean over the steady steps)
run() {
  local mode=$1 np=$2 dir=$tmp/$1-$2-$3 t0 t1 files
  local common=(data="$data" batch="$batch" steps="$steps" threads=1 samples=1000000 log=1 quiet=true)
  local p=("$root/pipelines/dp_fashion.lua")
  [ "$mode" = allreduce ] || p=("$root/pipelines/perclass_mpi.lua" classes="$np")
  t0=$(date +%s.%N)
  if [ "$mode" = independent ]; then
    # the machine's own ceiling: NP unrelated one-class processes (no
    # MPI), each pinned to a core of its own, at the same time
    p=("$root/pipelines/perclass_mpi.lua" classes=1)
    for i in $(seq 0 $((np - 1))); do
      taskset -c "$i" "$G" run "${p[@]}" "${common[@]}" dir="$dir-$i" >"$dir-$i.log" 2>&1 &
    done
    wait || { cat "$dir"-*.log >&2; exit 1; }
    files=$(for i in $(seq 0 $((np - 1))); do printf '%s,' "$dir-$i/metrics.jsonl"; done)
  else
    mpirun --allow-run-as-root --bind-to core --map-by core -np "$np" "$G" run "${p[@]}" "${common[@]}" dir="$dir" \
      >"$dir.log" 2>&1 || { cat "$dir.log" >&2; exit 1; }
    files=$dir/metrics.jsonl
  fi
  t1=$(date +%s.%N)
  python3 - "$files" "$warm" "$steps" "$t0" "$t1" <<'PY'
import json, re, sys
fs, warm, steps, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
rows, seen = [], {}  # seen: stage -> [(step, time)] as the lines saw it
for n, f in enumerate(x for x in fs.split(",") if x):
    mine = [json.loads(l) for l in open(f) if l.strip()]
    rows += mine
    for r in mine:
        for k, (s, t) in r.get("sources", {}).items():
            k = f"{k}@{n}"
            if re.fullmatch(r"[gd][0-9]*@[0-9]+", k) and (not seen.get(k) or s > seen[k][-1][0]):
                seen.setdefault(k, []).append((s, t))
rates = {}
for k, pts in seen.items():
    a = next((p for p in pts if p[0] >= warm), None)
    b = pts[-1]
    if a is None or b[0] - a[0] < (steps - warm) // 2 or b[1] <= a[1]:
        sys.exit(f"scaling: {fs}: stage {k} has no steady window ({pts[:3]} ... {pts[-3:]})")
    rates[k] = (b[0] - a[0]) / (b[1] - a[1])
win = [r for r in rows if r.get("step", 0) > warm]
avg = lambda k: sum(r.get(k, 0.0) for r in win) / max(1, len(win))
print(f'{min(rates.values()):.6f} {steps / (t1 - t0):.6f} {avg("comm_wait_g"):.6f} {avg("comm_wait_d"):.6f}')
PY
}

# the columns' means of two result lines
avg2() { printf '%s\n%s\n' "$1" "$2" | awk '{ for (i = 1; i <= NF; i++) s[i] += $i } END { for (i = 1; i <= NF; i++) printf "%.6f%s", s[i] / 2, i < NF ? " " : "\n" }'; }

# per repetition and mode: 1, 2, 2, 1 ranks (a linear drift of the
# machine's speed cancels out of the means)
declare -A R
for rep in $(seq 1 "$reps"); do
  for mode in allreduce perclass independent; do
    a=$(run $mode 1 $rep-a) b=$(run $mode 2 $rep-a) c=$(run $mode 2 $rep-b) d=$(run $mode 1 $rep-b)
    R[$mode-1-$rep]=$(avg2 "$a" "$d")
    R[$mode-2-$rep]=$(avg2 "$b" "$c")
  done
done
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { local k=$1 c=$2; for rep in $(seq 1 "$reps"); do echo "${R[$k-$rep]}" | awk -v c="$c" '{ print $c }'; done | median; }

# ratio KEY2 KEY1 COLUMN: the median over the repetitions of the per-repetition ratio
ratio() {
  for rep in $(seq 1 "$reps"); do
    awk -v a="$(echo "${R[$2-$rep]}" | awk -v c="$3" '{ print $c }')" \
        -v b="$(echo "${R[$1-$rep]}" | awk -v c="$3" '{ print $c }')" 'BEGIN { printf "%.6f\n", b / a }'
  done | median
}
ar1=$(col allreduce-1 1)
wg=$(col allreduce-2 3) wd=$(col allreduce-2 4)
eff_ar=$(ratio allreduce-2 allreduce-1 1 | awk '{ printf "%.3f", $1 }')
eff_pc=$(ratio perclass-2 perclass-1 1 | awk '{ printf "%.3f", $1 }')
wall_ar=$(ratio allreduce-2 allreduce-1 2 | awk '{ printf "%.3f", $1 }')
wall_pc=$(ratio perclass-2 perclass-1 2 | awk '{ printf "%.3f", $1 }')
eff_in=$(ratio independent-2 independent-1 1 | awk '{ printf "%.3f", $1 }')
wall_in=$(ratio independent-2 independent-1 2 | awk '{ printf "%.3f", $1 }')
frac=$(awk -v w1="$wg" -v w2="$wd" -v r="$(col allreduce-2 1)" 'BEGIN { printf "%.4f", (w1 + w2) * r }')
t1=$(awk -v r="$ar1" 'BEGIN { printf "%.6f", 1 / r }')

echo "scaling: DC-GAN on Fashion-MNIST, batch $batch per rank, threads=1, one core per rank, steady steps $warm..$steps, median of $reps"
echo "(the machine is shared: other builds and runs may load its cores)"
printf "%-12s %6s %12s %12s %12s %10s %10s %10s\n" mode ranks "steps/s" "images/s" "step ms" efficiency "end-to-end" "comm wait"
for m in allreduce perclass independent; do
  for np in 1 2; do
    v=$(col $m-$np 1)
    e=1.000 w=1.000
    if [ "$np" = 2 ]; then
      case $m in allreduce) e=$eff_ar w=$wall_ar ;; perclass) e=$eff_pc w=$wall_pc ;; *) e=$eff_in w=$wall_in ;; esac
    fi
    cw=-
    [ $m = allreduce ] && [ "$np" = 2 ] && cw=$frac
    printf "%-12s %6s %12.3f %12.1f %12.1f %10s %10s %10s\n" $m "$np" "$v" \
      "$(awk -v v="$v" -v b="$batch" -v n="$np" 'BEGIN { print v * b * n }')" \
      "$(awk -v v="$v" 'BEGIN { print 1000 / v }')" "$e" "$w" "$cw"
  done
done
echo "(efficiency: steady step rates; end-to-end: whole runs of $steps steps, start-up and final checkpoint included;"
echo " independent: unrelated one-class processes without MPI, one per core at once, the slower one counted: what"
echo " this machine gives two ranks that share nothing, the ceiling of per-class training here)"
printf "all-reduce, 2 ranks, per step: G spent %.2f ms and D %.2f ms in the exchange's collectives (the later rank's lateness included)\n" \
  "$(awk -v x="$wg" 'BEGIN { print x * 1e3 }')" "$(awk -v x="$wd" 'BEGIN { print x * 1e3 }')"
for r in $(seq 1 "$reps"); do
  echo "  rep $r steady steps/s (1 / 2 ranks): allreduce ${R[allreduce-1-$r]%% *} / ${R[allreduce-2-$r]%% *}, per-class ${R[perclass-1-$r]%% *} / ${R[perclass-2-$r]%% *}, independent ${R[independent-1-$r]%% *} / ${R[independent-2-$r]%% *}"
done

cal=$(mpirun --allow-run-as-root --oversubscribe -np 2 "$build/tests/bench/bench_scaling" calibrate)
alpha=$(echo "$cal" | sed -n 's/.*alpha_us=\([0-9.e+-]*\).*/\1/p')
beta=$(echo "$cal" | sed -n 's/.*beta_gbps=\([0-9.e+-]*\).*/\1/p')
"$build/tests/bench/bench_scaling" model t1="$t1" alpha_us="$alpha" beta_gbps="$beta" bucket_mb=4 measured="$eff_ar"
echo "scaling: perclass_efficiency=$eff_pc target=0.97 machine_ceiling=$eff_in comm_wait_fraction=$frac"
echo "scaling: allreduce_efficiency=$eff_ar target=0.90"

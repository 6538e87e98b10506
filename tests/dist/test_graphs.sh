#!/usr/bin/env bash
# test_graphs.sh GANFLOW
# The data-parallel exchange inside the captured steps (docs/dist.md,
# docs/cuda.md "Step stages"): dp_fashion (all-reduce), zero_fashion
# (ZeRO-1) and gossip_dposg (DPOSG gossip) under mpirun -np 2, with the CPU
# backend as a checked device (GANFLOW_CPU_DEVICE_CHECK=1: graph steps,
# the CUDA backend's rules) and eagerly. Under the check, the exchange's
# collectives are ops of the captured D and G steps (MPI run when called,
# recorded in the step's signature), so after the warm-up no D or G step
# is eager: one eager step per kind of step (D: one; G: its forward and its
# training step), every later one captured once and replayed. The
# checkpoints equal the eager run's tensor for tensor, and rank 0's
# metrics value for value (the clocks and the communication wait aside).
source "$(dirname "$0")/common.sh" "$1"
need_mpi
FM=/usr/share/datasets/fashion-mnist
[ -f $FM/train-images-idx3-ubyte.gz ] || skip "$FM is missing (apt-get install dataset-fashion-mnist)"
"$G" dataset fashion-mnist out=fm >fm.log 2>&1 || { cat fm.log; fail "cannot convert Fashion-MNIST"; }
CMP=$BIN/tests/st_compare
N=5

# metrics_same A B: rank 0's metrics, every value but the clock's, the
# runtime's and the communication wait, keyed by the step of the stage
# that sent it ("sources": the metrics stage writes the latest of each
# stage on a line, and which of G's steps meets which line is a matter of
# timing, results being read a step later under the check)
metrics_same() {
  /usr/bin/python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY'
import json, sys
def load(f):
    skip = ("step", "time", "images_per_s", "sources", "edges", "workers", "flop_s", "mfu")  # measured, not computed
    out = {}
    for l in open(f):
        m = json.loads(l)
        for k, v in m.items():
            if k in skip or k.startswith("comm_"):
                continue
            who = "g" if k.endswith("_g") else "d"
            key = (who, m["sources"][who][0], k)
            if out.setdefault(key, v) != v:
                sys.exit(f"{f}: two values of {key}")
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
common = set(a) & set(b)
steps = {w: {k[1] for k in common if k[0] == w} for w in "dg"}
bad = [(k, a[k], b[k]) for k in sorted(common) if a[k] != b[k]]
if bad or len(steps["d"]) < 4 or len(steps["g"]) < 3:
    sys.exit(f"differ: {bad[:6]}; steps compared: {steps}")
print(f"{len(common)} values of D steps {sorted(steps['d'])} and G steps {sorted(steps['g'])} equal")
PY
}

for c in "dp dp_fashion.lua" "zero zero_fashion.lua" "gossip gossip_dposg.lua"; do
  set -- $c
  name=$1 pipe=$2
  args=(data=fm/train batch=8 seed=1 threads=1 samples=1000 log=1 steps=$N)
  mpi 120 2 "$G" run "$SRC/pipelines/$pipe" "${args[@]}" dir=e_$name >e_$name.log 2>&1 ||
    { tail -20 e_$name.log; fail "$name: eager run"; }
  mpi 120 2 -x GANFLOW_CPU_DEVICE_CHECK=1 "$G" run "$SRC/pipelines/$pipe" "${args[@]}" dir=c_$name >c_$name.log 2>&1 ||
    { tail -20 c_$name.log; fail "$name: device-check run"; }
  grep -h "steps: " c_$name.log
  # every rank: the warm-up's eager steps only, one per kind of step
  [ "$(grep -c "D steps: 1 eager, 1 captured, $((N - 2)) replayed as graphs" c_$name.log)" -eq 2 ] ||
    fail "$name: D steps eager after the warm-up, or not captured on both ranks: $(grep -h 'D steps' c_$name.log)"
  [ "$(grep -c "G steps: 2 eager, 2 captured, $((2 * (N - 2))) replayed as graphs" c_$name.log)" -eq 2 ] ||
    fail "$name: G steps eager after the warm-up, or not captured on both ranks: $(grep -h 'G steps' c_$name.log)"
  grep -q "rank 1 of 2 sent: .*in [1-9][0-9]* collectives\|rank 1 of 2 sent: .*parameters [1-9]" c_$name.log ||
    fail "$name: nothing was exchanged: $(grep -h 'sent:' c_$name.log)"
  "$CMP" "$(ckpt_of e_$name)" "$(ckpt_of c_$name)" >cmp_$name.log 2>&1 && grep -q "tensors identical" cmp_$name.log ||
    { cat cmp_$name.log; fail "$name: the captured steps' checkpoint differs from the eager one's"; }
  metrics_same e_$name c_$name >m_$name.log 2>&1 || { head -c 800 m_$name.log; fail "$name: the metrics differ"; }
  cat m_$name.log
  echo "$name: captured and replayed with the exchange inside; checkpoint and metrics equal the eager run's"
done
echo "PASS: exchanges inside captured steps"

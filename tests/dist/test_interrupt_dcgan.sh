#!/usr/bin/env bash
# test_interrupt_dcgan.sh GANFLOW [BATCH]
# Ctrl-C at a terminal under mpirun with Open MPI's default settings keeps
# the work of a model of the seed's size (docs/dist.md, "Interrupting"):
# pipelines/dp_fashion.lua (the DC-GAN of the quick start, 1.15 M
# parameters, a 13.8 MB checkpoint) on 2 ranks, ^C typed to mpirun on a
# pseudo-terminal (tests/dist/pty_run.py). Open MPI 4.1 sends SIGKILL 2 s
# after the Ctrl-C; in that time the ranks must agree on the step under way
# (not the one after it), finish it and write its checkpoint. Checked: both
# ranks announce the same step S, `latest` names ckpt-S (no partial file)
# and it loads (ganflow sample). BATCH (per rank, default 16) keeps a step
# short on a loaded 2-core machine; the checkpoint's size is the model's
# whatever the batch. Sanitizer builds (several times slower) give mpirun
# SLOW seconds instead of the default 1, as test_interrupt.sh does.
source "$(dirname "$0")/common.sh" "$1"
B=${2:-16}
need_mpi
command -v python3 >/dev/null || skip "python3 not found"
# 28x28 images as Fashion-MNIST's (the content does not matter here)
mkdir -p d.idx
python3 "$HERE/make_idx.py" d.idx 512 2 "$B" 28 || fail "make_idx.py"
"$G" dataset idx d.idx/blocked-images.idx d.idx/blocked-labels.idx d encoding=raw force=1 >/dev/null 2>&1 ||
  fail "dataset d"
sk=()
[ "$SLOW" -gt 1 ] && sk=(--mca odls_base_sigkill_timeout "$SLOW")
start=$(date +%s)
timeout -k 5 $((120 * SLOW)) python3 "$HERE/pty_run.py" "xg: allreduce over 2 ranks" 6 $((100 * SLOW)) \
  "$MPIRUN" --allow-run-as-root --oversubscribe "${sk[@]}" -np 2 \
  "$G" run "$SRC/pipelines/dp_fashion.lua" data=d batch="$B" steps=10000000 dir=int >int.log 2>&1
rc=$?
tr -d '\r' <int.log >int.txt
grep -v "step [0-9]*/" int.txt
echo "mpirun returned $rc after $(($(date +%s) - start)) s"
[ "$rc" -ne 124 ] || fail "the interrupted run did not end within $((100 * SLOW)) s"
[ "$rc" -ne 0 ] || fail "mpirun returned 0 after Ctrl-C"
grep -q "ranks agree on the last step" int.txt || fail "Ctrl-C did not start an agreed stop (is the ^C reaching mpirun?)"
n=$(grep -c "every rank ends after step" int.txt)
[ "$n" -eq 2 ] || fail "$n of 2 ranks announced the agreed step"
S=$(grep -o "every rank ends after step [0-9]*" int.txt | awk '{print $NF}' | sort -u)
[ "$(echo "$S" | wc -l)" -eq 1 ] || fail "the ranks announced different steps: $S"
[ "$S" -gt 0 ] || fail "agreed step $S"
ls int/checkpoints/*.tmp.* >/dev/null 2>&1 && fail "a partial checkpoint was left: $(ls int/checkpoints)"
want=$(printf 'ckpt-%08d.safetensors' "$S")
[ -f int/checkpoints/latest ] ||
  fail "no checkpoint: mpirun killed the ranks before the checkpoint of step $S was written ($(ls int/checkpoints 2>&1))"
latest=$(cat int/checkpoints/latest)
[ "$latest" = "$want" ] || fail "latest is $latest, the agreed step is $S"
"$G" sample int n=4 out=s.png >sample.log 2>&1 || { cat sample.log; fail "ganflow sample cannot read $latest"; }
echo "PASS: Ctrl-C under mpirun (default settings): every rank stopped after step $S, $latest" \
  "($(stat -c %s "int/checkpoints/$latest") bytes) written before mpirun's SIGKILL"

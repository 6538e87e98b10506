#!/usr/bin/env bash
# test_interrupt.sh GANFLOW WORLD
# Ctrl-C at a terminal under mpirun (docs/dist.md, "Interrupting"):
# mpirun is the foreground job of a pseudo-terminal (tests/dist/pty_run.py
# types ^C); Open MPI ends the job with SIGCONT, SIGTERM 1 s later, SIGKILL
# 1 s after that. Every rank must end after the same step (each says
# "every rank ends after step S"), the final checkpoint must be that
# step's (no partial .tmp file, `latest` pointing at it), every rank must
# have run the same number of collectives, and resuming from it to S + 3
# steps must give exactly what S + 3 steps in one go give.
source "$(dirname "$0")/common.sh" "$1"
W=${2:-2}
need_mpi
command -v python3 >/dev/null || skip "python3 not found"
make_data d $((W * 8 * 16)) "$W" 8
DP=$SRC/tests/dist/dp_small.lua
CMP=$BIN/tests/st_close
# checkpoint_every: only the final checkpoint (the one the stop writes).
# Open MPI's default second between SIGCONT, SIGTERM and SIGKILL is what
# the normal build gets; sanitizer builds, several times slower, get SLOW.
sk=()
[ "$SLOW" -gt 1 ] && sk=(--mca odls_base_sigkill_timeout "$SLOW")
timeout -k 5 $((60 * SLOW)) python3 "$HERE/pty_run.py" "allreduce over $W ranks" $((1 * SLOW)) $((50 * SLOW)) \
  "$MPIRUN" --allow-run-as-root --oversubscribe "${sk[@]}" -np "$W" \
  "$G" run "$DP" data=d-blocked mode=allreduce steps=10000000 checkpoint_every=10000000 dir=int >int.log 2>&1
rc=$?
tr -d '\r' <int.log >int.txt
cat int.txt
[ "$rc" -ne 124 ] || fail "the interrupted run did not end within $((50 * SLOW)) s"
[ "$rc" -ne 0 ] || fail "mpirun returned 0 after Ctrl-C"
grep -q "ranks agree on the last step" int.txt || fail "Ctrl-C did not start an agreed stop (is the ^C reaching mpirun?)"
n=$(grep -c "every rank ends after step" int.txt)
[ "$n" -eq "$W" ] || fail "$n of $W ranks announced the agreed step"
steps=$(grep -o "every rank ends after step [0-9]*" int.txt | awk '{print $NF}' | sort -u)
[ "$(echo "$steps" | wc -l)" -eq 1 ] || fail "the ranks announced different steps: $steps"
S=$steps
[ "$S" -gt 0 ] || fail "agreed step $S"
colls=$(grep -o "gradients [0-9.]* [KMG]*i*B in [0-9]* collectives" int.txt | awk '{print $(NF-1)}' | sort -u)
[ "$(grep -c "collectives" int.txt)" -eq "$W" ] || fail "not every rank reported its traffic (a rank was killed)"
[ "$(echo "$colls" | wc -l)" -eq 1 ] || fail "the ranks ran different numbers of collectives: $colls"
ls int/checkpoints/*.tmp.* >/dev/null 2>&1 && fail "a partial checkpoint was left: $(ls int/checkpoints)"
latest=$(cat int/checkpoints/latest)
[ "$latest" = "$(printf 'ckpt-%08d.safetensors' "$S")" ] || fail "latest is $latest, the agreed step is $S"
echo "agreed step $S, $colls collectives on every rank, final checkpoint $latest"
# resume from it, and the same number of steps in one go
T=$((S + 3))
mpi 120 "$W" "$G" run "$DP" data=d-blocked mode=allreduce steps=$T resume=int dir=res >res.log 2>&1 ||
  { cat res.log; fail "resume from the interrupted run"; }
mpi 120 "$W" "$G" run "$DP" data=d-blocked mode=allreduce steps=$T dir=full >full.log 2>&1 ||
  { cat full.log; fail "$T steps in one go"; }
"$CMP" "$(ckpt_of full)" "$(ckpt_of res)" 0 g.net. d.net. ||
  fail "Ctrl-C at step $S + resume to $T differs from $T steps in one go"
echo "PASS: Ctrl-C under mpirun: every rank stopped after step $S, the checkpoint resumes exactly"

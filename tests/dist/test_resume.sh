#!/usr/bin/env bash
# test_resume.sh GANFLOW WORLD
# Data-parallel resume: WORLD ranks train 4 steps, then resume from that
# checkpoint (every rank loads the same networks; each reader continues in
# its own part of the data) for 4 more; the result is bit-identical to 8
# steps in one go. Also for ZeRO-1 (the checkpoint's gathered optimiser
# state is re-sharded on resume).
source "$(dirname "$0")/common.sh" "$1"
W=${2:?world}
need_mpi
make_data d $((W * 8 * 12)) "$W" 8
DP=$SRC/tests/dist/dp_small.lua
CMP=$BIN/tests/st_close
for mode in allreduce zero1; do
  mpi 60 "$W" "$G" run "$DP" data=d-blocked mode=$mode steps=8 dir=$mode-full >full.log 2>&1 || { cat full.log; fail "$mode 8 steps"; }
  mpi 60 "$W" "$G" run "$DP" data=d-blocked mode=$mode steps=4 dir=$mode-half >half.log 2>&1 || { cat half.log; fail "$mode 4 steps"; }
  mpi 60 "$W" "$G" run "$DP" data=d-blocked mode=$mode steps=8 resume=$mode-half dir=$mode-resumed >res.log 2>&1 ||
    { cat res.log; fail "$mode resume"; }
  "$CMP" "$(ckpt_of $mode-full)" "$(ckpt_of $mode-resumed)" 0 g.net. d.net. ||
    fail "$mode: 4 + resume + 4 steps differ from 8 steps"
done
echo "PASS: data-parallel resume over $W ranks is exact (allreduce, zero1)"

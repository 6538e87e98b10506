#!/usr/bin/env bash
# test_equal.sh GANFLOW WORLD MODE
#   MODE allreduce: WORLD ranks with batch B, gradients all-reduced, end with
#     the networks (and Adam state) one process reaches with batch WORLD x B
#     on the same images in the same steps (within float tolerance: only the
#     order of sums differs). Also: one process with an exchange stage
#     (world 1) is bit-identical to one without, and gradients were really
#     exchanged (the traffic line).
#   MODE zero1: WORLD ranks with ZeRO-1 end where WORLD ranks with all-reduce +
#     Adam end (parameters and the gathered optimiser state).
source "$(dirname "$0")/common.sh" "$1"
W=${2:?world}
MODE=${3:?mode}
need_mpi
B=8
make_data d $((W * B * 8)) "$W" "$B"
DP=$SRC/tests/dist/dp_small.lua
CMP=$BIN/tests/st_close

mpi 60 "$W" "$G" run "$DP" data=d-blocked mode=allreduce batch=$B dir=ar >ar.log 2>&1 || { cat ar.log; fail "allreduce run"; }
grep -q "rank 0 of $W sent: gradients [1-9]" ar.log || { cat ar.log; fail "no gradients were exchanged"; }
# the log says the bucket size in numbers (dp_small.lua's bucket_mb = 0.001: 262 floats)
grep -q "allreduce over $W ranks ([0-9]* parameters, buckets of up to 0.001 MiB: bucket_mb = 0.001, 262 floats)" ar.log ||
  { grep -i bucket ar.log; fail "the exchange's log line should give bucket_mb's value"; }
if [ "$MODE" = allreduce ]; then
  timeout $((60 * SLOW)) "$G" run "$DP" data=d-inter mode=single batch=$((W * B)) dir=single >single.log 2>&1 || { cat single.log; fail "single run"; }
  "$CMP" "$(ckpt_of single)" "$(ckpt_of ar)" 2e-5 g.net. d.net. || fail "all-reduce over $W ranks differs from one process with batch $((W * B))"
  # an exchange stage in a world of one changes nothing at all
  timeout $((60 * SLOW)) "$G" run "$DP" data=d-inter mode=single batch=$B dir=s1 >s1.log 2>&1 || { cat s1.log; fail "single run"; }
  timeout $((60 * SLOW)) "$G" run "$DP" data=d-inter mode=allreduce batch=$B dir=x1 >x1.log 2>&1 || { cat x1.log; fail "world-1 exchange run"; }
  "$CMP" "$(ckpt_of s1)" "$(ckpt_of x1)" 0 g. d. || fail "an exchange stage in a world of one changed the result"
else
  mpi 60 "$W" "$G" run "$DP" data=d-blocked mode=zero1 batch=$B clip=0.5 dir=z1 >z1.log 2>&1 || { cat z1.log; fail "zero1 run"; }
  mpi 60 "$W" "$G" run "$DP" data=d-blocked mode=allreduce batch=$B clip=0.5 dir=ar2 >ar2.log 2>&1 || { cat ar2.log; fail "allreduce run"; }
  grep -q "rank 0 of $W sent: gradients [1-9].*parameters [1-9]" z1.log || { cat z1.log; fail "zero1 did not reduce-scatter and all-gather"; }
  "$CMP" "$(ckpt_of ar2)" "$(ckpt_of z1)" 2e-5 g.net. d.net. || fail "ZeRO-1 differs from all-reduce + Adam"
  # the checkpoint holds the whole optimiser state, gathered from the shards
  "$CMP" "$(ckpt_of ar2)" "$(ckpt_of z1)" 2e-5 g.net.opt.m. g.net.opt.v. d.net.opt.v. || fail "gathered Adam state"
fi
echo "PASS: $MODE over $W ranks"

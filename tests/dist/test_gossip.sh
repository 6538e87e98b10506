#!/usr/bin/env bash
# test_gossip.sh GANFLOW WORLD
# DPOSG gossip: each rank updates with optimistic Adam, then averages its
# parameters with its two ring neighbours `rounds` times per step. Every
# round must shrink the parameters' distance to their mean (over ranks) by
# the factor ring averaging predicts: the second largest eigenvalue
# magnitude of the mixing matrix (1/3 for 2 and 4 ranks), within 2%. The
# exchange measures the distance before and after each round (measure=true)
# and logs it; the ranks never all-reduce gradients.
source "$(dirname "$0")/common.sh" "$1"
W=${2:?world}
need_mpi
B=8
make_data d $((W * B * 8)) "$W" "$B"
DP=$SRC/tests/dist/dp_small.lua
mpi 90 "$W" "$G" run "$DP" data=d-blocked mode=gossip optim=oadam rounds=2 measure=true lr=0.01 steps=4 \
  batch=$B dir=gossip >gossip.log 2>&1 || { cat gossip.log; fail "gossip run"; }
grep "round" gossip.log | head -20
grep -q "rank 0 of $W sent: gradients 0 B in 0 collectives, parameters [1-9]" gossip.log ||
  { cat gossip.log; fail "gossip exchanged gradients, or no parameters"; }
awk '
  /gossip step [0-9]+ round [0-9]+: distance to the mean/ {
    match($0, /-> [0-9.e+-]+/); after = substr($0, RSTART + 3, RLENGTH - 3) + 0
    match($0, /factor [0-9.]+/); f = substr($0, RSTART + 7, RLENGTH - 7) + 0
    match($0, /predicts [0-9.]+/); p = substr($0, RSTART + 9, RLENGTH - 9) + 0
    n++
    if (after > 1e-6 && (f < p - 0.02 || f > p + 0.02)) { bad++; print "round off: " $0 }
  }
  END {
    if (n < 8) { print "only " n " rounds measured"; exit 1 }
    if (bad) exit 1
    print n " rounds: each shrank the distance to the mean by the predicted factor"
  }' gossip.log || fail "gossip contraction"
echo "PASS: gossip over $W ranks"

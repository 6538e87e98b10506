#!/usr/bin/env bash
# test_mismatch.sh GANFLOW
# Mismatched pipelines across ranks are found at start-up, on every rank,
# with a message naming the rank and the difference: (1) a rank that
# declares a stage the others do not (gf.run compares the declared stages
# and cross-rank edges); (2) networks of different sizes on different
# ranks (the exchange stages compare parameter counts at their handshake).
source "$(dirname "$0")/common.sh" "$1"
need_mpi
cat >extra.lua <<'EOS'
local gf = require "ganflow"
local src = gf.stage "count_source" { n = 10 }
local sink = gf.stage "check_sink" { expect = 10 }
gf.connect(src.out, sink.inp)
if gf.rank() == 1 then gf.stage "collect" { name = "only_on_rank_1" } end
gf.run { quiet = true }
EOS
mpi 60 2 "$G" run extra.lua >extra.log 2>&1 && { cat extra.log; fail "mismatched stage sets ran"; }
grep -q "mismatched pipeline across ranks: rank 1 has \"stage only_on_rank_1 collect rank=-1\"" extra.log ||
  { cat extra.log; fail "no message naming rank 1's extra stage"; }
[ "$(grep -c "mismatched pipeline" extra.log)" -ge 2 ] || { cat extra.log; fail "not every rank reported it"; }
make_data d 128 2 8
mpi 60 2 "$G" run "$SRC/tests/dist/dp_small.lua" data=d-blocked mismatch=true dir=mm >mm.log 2>&1 &&
  { cat mm.log; fail "networks of different sizes trained"; }
grep -q "mismatched pipelines: the network of rank 1 has [0-9]* parameters, rank 0's has [0-9]*" mm.log ||
  { cat mm.log; fail "no message naming the parameter counts"; }
echo "PASS: mismatched pipelines are refused at start-up"

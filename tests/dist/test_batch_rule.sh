#!/usr/bin/env bash
# test_batch_rule.sh GANFLOW
# The scaling manager's rules: a world size that does not divide the
# global batch is an error naming both numbers; a divisible one gives the
# per-rank batch and the scaled learning rate (linear and square-root
# rules, warm-up), checked from Lua on 2 ranks.
source "$(dirname "$0")/common.sh" "$1"
need_mpi
mpi 60 2 "$G" run "$SRC/pipelines/dp_fashion.lua" global_batch=65 steps=1 dir=bad >bad.log 2>&1 &&
  { cat bad.log; fail "global_batch=65 ran on 2 ranks"; }
grep -q "global_batch = 65 is not divisible by the world size 2" bad.log || { cat bad.log; fail "no clear message"; }
cat >scale.lua <<'EOS'
local gf = require "ganflow"
local s = gf.scale { global_batch = 256, lr = 1e-4, rule = "linear", warmup = 50 }
assert(s.batch == 128 and s.per_rank == 128 and s.accumulate == 1, "batch " .. s.batch)
assert(math.abs(s.lr - 2e-4) < 1e-12 and s.warmup == 50, "linear lr " .. s.lr)
s = gf.scale { global_batch = 256, lr = 1e-4, rule = "sqrt", max_batch = 32 }
assert(s.batch == 32 and s.accumulate == 4, "micro-batches " .. s.batch .. " x " .. s.accumulate)
assert(math.abs(s.lr - 1e-4 * math.sqrt(2)) < 1e-12, "sqrt lr " .. s.lr)
s = gf.scale { global_batch = 256, lr = 1e-4, rule = "linear", base_world = 2 }
assert(math.abs(s.lr - 1e-4) < 1e-12, "base_world")
local ok, err = pcall(gf.scale, { global_batch = 100, lr = 1e-4, world = 3 })
assert(not ok and err:find("global_batch = 100 is not divisible by the world size 3"), tostring(err))
assert(gf.class_rank(3, 10) == 1)
ok, err = pcall(gf.class_rank, 0, 1)
assert(not ok and err:find("2 ranks but only 1 classes"), tostring(err))
local src = gf.stage "count_source" { n = 5 }
local sink = gf.stage "check_sink" { expect = 5 }
gf.connect(src.out, sink.inp)
gf.run { quiet = true }
EOS
mpi 60 2 "$G" run scale.lua dir=scale >scale.log 2>&1 || { cat scale.log; fail "scaling rules"; }
echo "PASS: batch divisibility and learning-rate scaling rules"

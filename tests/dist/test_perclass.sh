#!/usr/bin/env bash
# test_perclass.sh GANFLOW WORLD
# Per-class training across ranks (pipelines/perclass_mpi.lua): 3 classes
# round-robin over WORLD ranks (uneven: rank 0 takes two). Checks that no
# rank exchanges any gradient (the traffic line of every rank), that each
# rank runs only the readers of its own classes (its edge table), that the
# one checkpoint rank 0 writes holds every class's generator, that
# `ganflow sample` draws from their mixture, that a resume (every rank
# loads its pairs from that one file) is exact, and that more ranks than
# classes is refused with a clear message.
source "$(dirname "$0")/common.sh" "$1"
W=${2:?world}
need_mpi
make_data d 240 1 8 32
P=$SRC/pipelines/perclass_mpi.lua
mpi 120 "$W" --output-filename out "$G" run "$P" data=d-blocked classes=3 batch=8 steps=4 books=false dir=pc \
  >pc.log 2>&1 || { cat pc.log out/1/rank.*/stderr 2>/dev/null; fail "perclass run"; }
for r in $(seq 0 $((W - 1))); do
  e=out/1/rank.$r/stderr
  grep -q "rank $r of $W sent: gradients 0 B in 0 collectives, parameters 0 B in 0" "$e" ||
    { cat "$e"; fail "rank $r exchanged gradients or parameters"; }
  for c in 0 1 2; do
    if [ $((c % W)) -eq "$r" ]; then
      grep -q "reader$c.samples" "$e" || { cat "$e"; fail "rank $r does not read class $c"; }
    else
      ! grep -q "reader$c.samples" "$e" || { cat "$e"; fail "rank $r reads class $c, which rank $((c % W)) owns"; }
    fi
  done
done
CK=$(ckpt_of pc)
"$G" sample "$CK" n=24 out=grid.png >sample.log 2>&1 || { cat sample.log; fail "ganflow sample"; }
grep -q "from 3 generators" sample.log || { cat sample.log; fail "the checkpoint does not hold 3 generators"; }
for c in 0 1 2; do
  "$G" sample "$CK" n=8 class=$c out=c$c.png >/dev/null 2>&1 || fail "sampling class $c"
done
# resume across ranks: 2 steps + resume + 2 more == the 4-step run above
mpi 120 "$W" "$G" run "$P" data=d-blocked classes=3 batch=8 steps=2 books=false dir=half >half.log 2>&1 ||
  { cat half.log; fail "perclass 2 steps"; }
mpi 120 "$W" "$G" run "$P" data=d-blocked classes=3 batch=8 steps=4 books=false resume=half dir=resumed \
  >resumed.log 2>&1 || { cat resumed.log; fail "perclass resume"; }
"$BIN/tests/st_close" "$CK" "$(ckpt_of resumed)" 0 g0.net. g1.net. g2.net. d0.net. d1.net. d2.net. ||
  fail "per-class: 2 + resume + 2 steps differ from 4 steps"
# more ranks than classes
if [ "$W" -ge 2 ]; then
  mpi 60 "$W" "$G" run "$P" data=d-blocked classes=1 batch=8 steps=2 dir=bad >bad.log 2>&1 && fail "1 class on $W ranks ran"
  grep -q "$W ranks but only 1 classes" bad.log || { cat bad.log; fail "no clear message for more ranks than classes"; }
fi
echo "PASS: per-class training over $W ranks, no gradient exchanged, one checkpoint with every class"

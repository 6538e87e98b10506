#!/usr/bin/env bash
# test_dead_rank.sh GANFLOW WORLD
# A rank that dies mid-run (SIGKILL, during data-parallel training): every
# other rank must exit non-zero within a bounded time, each with a message
# naming the lost rank. mpirun runs with --enable-recovery (Open MPI's
# default is to kill the whole job at once when a process dies, printing
# its own message): the survivors' collectives stall, the exchange stages
# probe the world after `timeout` seconds (3 here), rank 1 does not answer,
# and they fail with "rank 1 stopped responding". Each rank's exit status
# and output are recorded by a wrapper.
source "$(dirname "$0")/common.sh" "$1"
W=${2:-3}
need_mpi
make_data d $((W * 8 * 8)) "$W" 8
cat >wrap.sh <<EOS
#!/bin/sh
r=\${OMPI_COMM_WORLD_RANK:-x}
"$G" run "$SRC/tests/dist/dp_small.lua" data=d-blocked mode=allreduce steps=1000000 timeout=3 ckpt=false dir=dead \
  >out.\$r 2>&1 &
echo \$! >pid.\$r
wait \$!
echo \$? >status.\$r
EOS
chmod +x wrap.sh
export GANFLOW_PROBE_WAIT=1
mpi 90 "$W" --enable-recovery ./wrap.sh >mpirun.log 2>&1 &
MP=$!
# let every rank train for a while
for i in $(seq 1 $((100 * SLOW))); do
  [ -f pid.1 ] && [ -f pid.0 ] && break
  sleep 0.1
done
[ -f pid.1 ] || { cat mpirun.log; fail "rank 1 never started"; }
sleep $((2 * SLOW))
for r in $(seq 0 $((W - 1))); do [ -f status.$r ] && { cat out.$r; fail "rank $r ended before the kill"; }; done
T0=$(date +%s)
kill -9 "$(cat pid.1)"
wait $MP
T1=$(date +%s)
echo "mpirun returned $((T1 - T0)) s after rank 1 was killed"
[ $((T1 - T0)) -le $((30 * SLOW)) ] || fail "the survivors took $((T1 - T0)) s to stop"
for r in $(seq 0 $((W - 1))); do
  [ "$r" -eq 1 ] && continue
  [ -f status.$r ] || { cat mpirun.log out.$r; fail "rank $r did not finish"; }
  [ "$(cat status.$r)" -ne 0 ] || { cat out.$r; fail "rank $r exited 0 after rank 1 died"; }
  grep -q "rank 1 stopped responding" out.$r || { cat out.$r; fail "rank $r does not name the lost rank"; }
  grep "rank 1 stopped responding" out.$r | head -1
done
echo "PASS: after rank 1 died, every other rank exited non-zero naming it"

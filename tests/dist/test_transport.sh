#!/usr/bin/env bash
# test_transport.sh GANFLOW WORLD
# Cross-rank edges deliver every message, in order, complete: numbered
# items with a tensor each cross up to three ranks (MPI point-to-point),
# and the first edge once more over TCP on the loopback; the consumer
# checks order, count and contents. Each rank reports the bytes it sent
# over edges. A slow edge (5 items a second) polls MPI far less often
# with latency = "relaxed" (naps a quarter of the time waited) than with
# "low": the receiving end's own count of its polls.
source "$(dirname "$0")/common.sh" "$1"
W=${2:?world}
need_mpi
N=$((3000 / SLOW))
mpi 60 "$W" "$G" run "$SRC/tests/dist/chain.lua" n=$N dir=mpi >mpi.log 2>&1 || { cat mpi.log; fail "chain over MPI"; }
grep -q "rank 0 of $W sent: .* edges [1-9]" mpi.log || { cat mpi.log; fail "rank 0 sent nothing over edges"; }
PORT=$((20000 + ($$ % 20000)))
mpi 60 "$W" "$G" run "$SRC/tests/dist/chain.lua" n=$N tcp=127.0.0.1:$PORT dir=tcp >tcp.log 2>&1 || { cat tcp.log; fail "chain with a TCP edge"; }
# polls per item of an edge that waits ~0.2 s per item (the receiver's
# report: "edge ...: 6 message(s) from rank 0, P polls while waiting")
polls() {
  mpi 60 "$W" "$G" run "$SRC/tests/dist/slow_edge.lua" latency="$1" >"slow-$1.log" 2>&1 ||
    { cat "slow-$1.log"; fail "slow edge, latency $1"; }
  sed -n 's/.*6 message(s) from rank 0, \([0-9]*\) polls while waiting (latency '"$1"').*/\1/p' "slow-$1.log" | head -1
}
lo=$(polls low) re=$(polls relaxed)
[ -n "$lo" ] && [ -n "$re" ] || { cat slow-low.log slow-relaxed.log; fail "no poll count reported"; }
# relaxed: a quarter of the time waited, up to 20 ms: ~40 polls per 0.2 s
# wait (sleeping longer than asked only lowers it); low: 1 ms naps, ~220
[ "$re" -le $((6 * 60)) ] || fail "relaxed edge polled $re times for 6 items (at most ~40 per item expected)"
[ "$lo" -ge $((2 * re)) ] || fail "low-latency edge polled $lo times, relaxed $re: relaxed should poll far less"
! "$G" run "$SRC/tests/dist/slow_edge.lua" latency=fast >bad.log 2>&1 || fail "latency=fast accepted"
grep -q 'latency must be "low" or "relaxed"' bad.log || { cat bad.log; fail "no clear message for latency=fast"; }
echo "slow edge: $lo polls (low), $re polls (relaxed) for 6 items"
echo "PASS: $N items in order over $W ranks (MPI and TCP edges)"

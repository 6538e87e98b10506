#!/usr/bin/env bash
# test_transport.sh GANFLOW WORLD
# Cross-rank edges deliver every message, in order, complete: numbered
# items with a tensor each cross up to three ranks (MPI point-to-point),
# and the first edge once more over TCP on the loopback; the consumer
# checks order, count and contents. Each rank reports the bytes it sent
# over edges.
source "$(dirname "$0")/common.sh" "$1"
W=${2:?world}
need_mpi
N=$((3000 / SLOW))
mpi 60 "$W" "$G" run "$SRC/tests/dist/chain.lua" n=$N dir=mpi >mpi.log 2>&1 || { cat mpi.log; fail "chain over MPI"; }
grep -q "rank 0 of $W sent: .* edges [1-9]" mpi.log || { cat mpi.log; fail "rank 0 sent nothing over edges"; }
PORT=$((20000 + ($$ % 20000)))
mpi 60 "$W" "$G" run "$SRC/tests/dist/chain.lua" n=$N tcp=127.0.0.1:$PORT dir=tcp >tcp.log 2>&1 || { cat tcp.log; fail "chain with a TCP edge"; }
echo "PASS: $N items in order over $W ranks (MPI and TCP edges)"

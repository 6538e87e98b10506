#!/usr/bin/env bash
# test_jitter.sh GANFLOW
# A cross-rank edge over TCP between two network namespaces joined by a
# veth pair, with delay and jitter on the path (tc netem delay 6ms 4ms; on
# kernels without the netem qdisc the same delay law is applied by a user-
# space relay inside the sending namespace, tests/dist/delay_proxy.py, and
# the test says so). Rank 0 (namespace A) sends numbered items as fast as
# credit allows; rank 1 (namespace B) consumes them at 4 ms each. With the
# receiving ring's adaptive depth the depth rises and the consumer stalls
# on under 5% of its pops; with the ring fixed at depth 1 it stalls on far
# more (the network's latency and jitter are never hidden). The ranks are
# processes started by hand (GANFLOW_RANK/GANFLOW_WORLD: no MPI across
# namespaces). Skips (77) where namespaces cannot be made (no root, no
# iproute2, a restricted container).
source "$(dirname "$0")/common.sh" "$1"
command -v ip >/dev/null || skip "iproute2 (ip) not found"
A=gfja$$ B=gfjb$$
NETS=""
cleanup_ns() { for n in $NETS; do ip netns del "$n" 2>/dev/null; done; }
trap 'cleanup_ns; rm -rf "$TMP"' EXIT
ip netns add "$A" 2>/dev/null || skip "cannot create network namespaces (ip netns add: needs root and a kernel that allows it)"
NETS="$A"
ip netns add "$B" 2>/dev/null || skip "cannot create a second network namespace"
NETS="$A $B"
VA=gfva$$ VB=gfvb$$
ip link add "$VA" type veth peer name "$VB" 2>/dev/null || skip "cannot create a veth pair"
ip link set "$VA" netns "$A" && ip link set "$VB" netns "$B" || fail "moving the veth ends"
ip -n "$A" addr add 10.199.7.1/24 dev "$VA" && ip -n "$B" addr add 10.199.7.2/24 dev "$VB" || fail "addresses"
ip -n "$A" link set "$VA" up && ip -n "$B" link set "$VB" up && ip -n "$A" link set lo up && ip -n "$B" link set lo up ||
  fail "links up"
PORT=$((30000 + ($$ % 20000)))
if ip netns exec "$A" tc qdisc add dev "$VA" root netem delay 6ms 4ms 2>/dev/null; then
  METHOD="tc netem delay 6ms 4ms on the veth"
  TARGET=10.199.7.2:$PORT
  PROXY=""
else
  command -v python3 >/dev/null || skip "no netem qdisc and no python3 for the user-space delay relay"
  METHOD="user-space relay with netem's delay law (this kernel has no netem qdisc)"
  TARGET=127.0.0.1:$((PORT + 1))
  PROXY=1
fi
echo "path: $METHOD"

# run DEPTH: rank 1 in B, rank 0 in A; prints "stalls items depth_max"
run() {
  local d=$1 out=run$1
  mkdir -p "$out"
  [ -n "$PROXY" ] && { ip netns exec "$A" python3 "$HERE/delay_proxy.py" "$TARGET" 10.199.7.2:$PORT 6 4 \
                         >"$out/proxy.log" 2>&1 & }
  GANFLOW_RANK=1 GANFLOW_WORLD=2 timeout $((60 * SLOW)) ip netns exec "$B" "$G" run "$HERE/jitter_tcp.lua" \
    addr=10.199.7.2:$PORT depth=$d dir="$out/r1" >"$out/r1.log" 2>&1 &
  local p1=$!
  sleep 0.3
  GANFLOW_RANK=0 GANFLOW_WORLD=2 timeout $((60 * SLOW)) ip netns exec "$A" "$G" run "$HERE/jitter_tcp.lua" \
    addr=$TARGET depth=$d dir="$out/r0" >"$out/r0.log" 2>&1 || { cat "$out/r0.log" "$out/r1.log"; fail "rank 0 (depth $d)"; }
  wait $p1 || { cat "$out/r1.log"; fail "rank 1 (depth $d)"; }
  wait
  # edge capacity depth min mean max stalls full-waits items ("fixed" replaces min mean max)
  awk '/_rx1.out -> check_sink.inp/ {
         if ($6 == "fixed") print $7, $9, $5; else print $9, $11, $8 }' "$out/r1.log"
}
read -r S0 N0 M0 < <(run 0)
read -r S1 N1 M1 < <(run 1)
[ -n "${N0:-}" ] && [ -n "${N1:-}" ] || fail "no edge table from rank 1"
echo "adaptive depth: $S0 stalls in $N0 pops, depth rose to $M0"
echo "depth 1:        $S1 stalls in $N1 pops"
awk -v s0="$S0" -v n0="$N0" -v m0="$M0" -v s1="$S1" -v n1="$N1" 'BEGIN {
  f0 = s0 / n0; f1 = s1 / n1
  printf "stall fraction: adaptive %.3f, depth-1 %.3f\n", f0, f1
  if (m0 < 4) { print "the adaptive depth did not rise"; exit 1 }
  if (f0 >= 0.05) { print "the adaptive edge stalled on 5% of its pops or more"; exit 1 }
  if (f1 < 0.3 || f1 < 4 * f0) { print "the depth-1 edge did not stall far more"; exit 1 }
}' || fail "jitter over TCP ($METHOD)"
echo "PASS: adaptive depth over a jittery TCP path ($METHOD)"

#!/usr/bin/env bash
# scripts/include-graph: the real tree (with the build's objects) has no
# cycle and no upward edge; small fixture trees under tests/include_graph/
# with a cycle of includes, a cycle of calls (seen only through the object
# files), an upward include and a folder outside the layers make it fail,
# naming the files; a clean fixture passes.
#   test_include_graph.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
ig=$src/scripts/include-graph
fix=$src/tests/include_graph
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # name, expected exit status, expected text ('' none), command...
	local name=$1 want=$2 text=$3
	shift 3
	"$@" >"$tmp/out" 2>&1
	local rc=$?
	if [ "$rc" -ne "$want" ]; then
		echo "FAIL $name: exit $rc, expected $want"; cat "$tmp/out"; fails=$((fails + 1)); return
	fi
	if [ -n "$text" ] && ! grep -qF -- "$text" "$tmp/out"; then
		echo "FAIL $name: no '$text' in:"; cat "$tmp/out"; fails=$((fails + 1)); return
	fi
	echo "ok $name"
}

check clean 0 "no cycle" "$ig" --root "$fix/clean"
check include-cycle 1 "cycle between 3 files: core/base/a.h -> core/base/b.h -> core/base/c.h -> core/base/a.h" \
	"$ig" --quiet --root "$fix/cycle"
check upward 1 "core/base/low.c (layer base) -> core/runtime/high.h (layer runtime, above it): include" \
	"$ig" --quiet --root "$fix/upward"
check no-layer 1 "core/extra/stray.c is in no layer" "$ig" --quiet --root "$fix/nolayer"

# a cycle of calls: a.c and b.c call each other through their own
# declarations, so only the objects show it (laid out as CMake does)
obj=$tmp/build/core/CMakeFiles/ganflow.dir/base
mkdir -p "$obj"
cc -c "$fix/calls/core/base/a.c" -o "$obj/a.c.o" && cc -c "$fix/calls/core/base/b.c" -o "$obj/b.c.o" || exit 1
check calls-unseen-without-objects 0 "no cycle" "$ig" --quiet --root "$fix/calls"
check call-cycle 1 "cycle between 2 files: core/base/a.c -> core/base/b.c -> core/base/a.c" \
	"$ig" --quiet --root "$fix/calls" "$tmp/build"
check call-edge-named 1 "core/base/a.c -> core/base/b.c  call b" "$ig" --quiet --root "$fix/calls" "$tmp/build"

# the tree itself, includes and the calls of this build's objects
check tree 0 "no cycle, every edge goes down the layers" "$ig" --quiet "$build"

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all include-graph checks passed"

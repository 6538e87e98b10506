#!/usr/bin/env bash
# A stage built out of tree against an installed ganflow:
#   1. cmake --install the build into a temporary prefix;
#   2. compile tests/outoftree/oot_sum.c with only
#      `pkg-config --cflags --libs ganflow` (PKG_CONFIG_PATH at the prefix);
#   3. run it in a graph with the installed `ganflow`, finding the stage
#      through GANFLOW_STAGE_PATH, and check the numbers it wrote.
# usage: run.sh BUILD_DIR SOURCE_DIR_OF_THIS_TEST
set -euo pipefail
build=$1
here=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
pc=$(find "$prefix" -name ganflow.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no ganflow.pc installed under $prefix"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --cflags --libs ganflow)
echo "pkg-config --cflags --libs ganflow: $flags"
case "$flags" in *"$tmp"*) ;; *) echo "FAIL: flags do not point into the install prefix"; exit 1 ;; esac
[ -x "$prefix/bin/ganflow" ] || { echo "FAIL: no installed ganflow command"; exit 1; }
[ -f "$prefix/include/ganflow/stage.h" ] || { echo "FAIL: headers not installed"; exit 1; }
stagedir=$(pkg-config --variable=stagedir ganflow)
[ -d "$stagedir" ] || { echo "FAIL: stagedir $stagedir missing"; exit 1; }
# runtime test stages are never installed
if ls "$stagedir" | grep -qE '^(count_source|jitter|check_sink|collect)\.so$'; then
	echo "FAIL: test stages were installed into $stagedir"
	exit 1
fi

mkdir -p "$tmp/stages"
cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden \
	-o "$tmp/stages/oot_sum.so" "$here/oot_sum.c" $flags
echo "built $tmp/stages/oot_sum.so"

export GANFLOW_STAGE_PATH=$tmp/stages
"$prefix/bin/ganflow" stages oot_sum | grep -q "sums the keys of items" || { echo "FAIL: ganflow stages does not show oot_sum"; exit 1; }
(cd "$tmp" && "$prefix/bin/ganflow" run "$here/pipeline.lua" out="$tmp/sum.txt" dir="$tmp/run")
# keys 0..99: sum 4950, sum of squares 328350; scale 2
want="count=100 sum=9900 sumsq=656700 scale=2"
got=$(cat "$tmp/sum.txt")
if [ "$got" != "$want" ]; then
	echo "FAIL: oot_sum wrote '$got', expected '$want'"
	exit 1
fi
echo "ok: $got"

#!/usr/bin/env bash
# Bad input through the `ganflow` command: every case must end within its
# timeout with the expected exit status and a clear message naming the
# fault, and no sanitizer report. Also: signals (graceful drain, then hard
# stop), `ganflow stages`, `ganflow version`.
# usage: test_badinput.sh GANFLOW BAD_STAGE_DIR
set -uo pipefail
gf=$1
bad=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fails=0

fail() {
	echo "FAIL $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/     | /'
	fails=$((fails + 1))
}

# check NAME WANT_EXIT TEXT COMMAND...   (WANT_EXIT "nz": any non-zero)
check() {
	local name=$1 want=$2 text=$3
	shift 3
	local out rc
	out=$(timeout 60 "$@" 2>&1)
	rc=$?
	if [ "$rc" = 124 ]; then fail "$name: timed out (a hang)" "$out"; return; fi
	if { [ "$want" = nz ] && [ "$rc" = 0 ]; } || { [ "$want" != nz ] && [ "$rc" != "$want" ]; }; then
		fail "$name: exit status $rc, expected $want" "$out"
		return
	fi
	if ! grep -qF -- "$text" <<<"$out"; then fail "$name: output lacks: $text" "$out"; return; fi
	if grep -q "Sanitizer" <<<"$out"; then fail "$name: sanitizer report" "$out"; return; fi
	echo "ok   $name"
}

head='local gf = require "ganflow"
local src = gf.stage "count_source" { n = gf.arg("n", 100), name = "src" }
local sink = gf.stage "check_sink" { name = "sink" }'

printf 'local gf = require "ganflow"\nlocal x = = 1\n' >syntax.lua
check "lua syntax error shows file:line" 1 "syntax.lua:2:" "$gf" run syntax.lua
printf 'local gf = require "ganflow"\nlocal t = {}\nerror("boom")\n' >rt.lua
check "lua runtime error shows file:line" 1 "rt.lua:3: boom" "$gf" run rt.lua
printf 'local gf = require "ganflow"\nlocal s = gf.stage "nosuch" {}\n' >unknown.lua
check "unknown stage lists the search path" 1 "unknown.lua:2: unknown stage 'nosuch' (searched: " "$gf" run unknown.lua
printf 'local gf = require "ganflow"\nlocal s = gf.stage "%s/bad_abi.so" {}\n' "$bad" >abi.lua
check "wrong stage ABI" 1 "bad_abi.so: stage ABI version 1, but this runtime speaks version 2 (rebuild the stage" "$gf" run abi.lua
printf 'local gf = require "ganflow"\nlocal s = gf.stage "%s/no_desc.so" {}\n' "$bad" >nodesc.lua
check "no descriptor" 1 "no_desc.so: no 'ganflow_stage' descriptor" "$gf" run nodesc.lua
printf 'local gf = require "ganflow"\nlocal s = gf.stage "count_source" { nn = 3 }\n' >param.lua
check "unknown parameter suggests the closest" 1 "param.lua:2: stage 'count_source' (count_source): unknown parameter 'nn'; did you mean 'n'?" "$gf" run param.lua
printf 'local gf = require "ganflow"\nlocal s = gf.stage "count_source" { n = "ten" }\n' >type.lua
check "parameter of the wrong type" 1 "parameter 'n' must be an integer, got string \"ten\"" "$gf" run type.lua
# ranges and choices the stages declare, refused before anything runs
# (no dataset is opened: the path need not exist)
printf 'local gf = require "ganflow"\nlocal r = gf.stage "lmdb_reader" { name = "reader", path = "nowhere", readahead = 0 }\n' >range.lua
check "value outside a stage's declared range" 1 "range.lua:2: stage 'reader' (lmdb_reader): parameter 'readahead' is 0, outside its range 1..65536" "$gf" run range.lua
printf 'local gf = require "ganflow"\nlocal d = gf.stage "jpeg_decode" { name = "decode", crop = "centr" }\n' >choice.lua
check "string not among a stage's declared choices" 1 "choice.lua:2: stage 'decode' (jpeg_decode): parameter 'crop' is \"centr\", not one of center|random|none|centre; did you mean 'center'?" "$gf" run choice.lua
check "stages prints a stage's ranges and choices" 0 "[one of center|random|none|centre]" "$gf" stages jpeg_decode
printf '%s\ngf.connect(src.stats, sink.inp)\n' "$head" >kind.lua
check "ports of different kinds" 1 "kind.lua:4: cannot connect 'src.stats' to 'sink.inp': stage 'src' sends \"metrics\" messages, stage 'sink' expects \"items\"" "$gf" run kind.lua
printf '%s\ngf.run {}\n' "$head" >unconn.lua
check "input left unconnected" 1 "unconn.lua:4: input 'sink.inp' of stage 'sink' (check_sink) is not connected" "$gf" run unconn.lua
# a loop of stages that nothing feeds would wait forever: refused, naming them
printf 'local gf = require "ganflow"\nlocal a = gf.stage "jitter" { name = "a" }\nlocal b = gf.stage "jitter" { name = "b" }\ngf.connect(a.out, b.inp)\ngf.connect(b.out, a.inp)\ngf.run {}\n' >cycle.lua
check "cycle that nothing feeds" 1 "cycle.lua:6: stages 'a', 'b' form a cycle that nothing outside feeds" "$gf" run cycle.lua dir=cycle-run
[ -e cycle-run ] && fail "cycle: a run directory was left behind"
printf 'local gf = require "ganflow"\nlocal a = gf.stage "jitter" { name = "a" }\ngf.connect(a.out, a.inp)\ngf.run {}\n' >selfloop.lua
check "stage wired to itself" 1 "stage 'a' (jitter) is wired to itself ('a.out' -> 'a.inp')" "$gf" run selfloop.lua
cat >fail.lua <<'LUA'
local gf = require "ganflow"
local src = gf.stage "count_source" { n = 0 }
local j = gf.stage "jitter" { fail_at = 5, name = "j", workers = 2 }
local sink = gf.stage "check_sink" {}
gf.connect(src.out, j.inp)
gf.connect(j.out, sink.inp)
gf.run {}
LUA
check "stage failing mid-run" 1 "ganflow: error: stage 'j#1' failed: injected failure at item 5" "$gf" run fail.lua dir=fail-run
# a run whose steps stop coming: the watchdog names the starved edge and the
# busy stage, the progress line says "stalled" (not an ETA of years), and
# the run stops with exit 1
printf '%s\nlocal j = gf.stage "jitter" { name = "j", mean_us = 20000, stall_at = 30 }\ngf.connect(src.out, j.inp)\ngf.connect(j.out, sink.inp)\ngf.run { steps = 1000 }\n' "$head" >stall.lua
check "stall watchdog names the starved edge" 1 "the run stalled: no step completed for" "$gf" run stall.lua n=0 stall=2 stall_stop=7 dir=stall-run
check "stall watchdog names the busy stage" 1 "edge j.out -> sink.inp is starved ('sink' waits on it); busy: 'j'" "$gf" run stall.lua n=0 stall=1 stall_stop=2 dir=stall-run2
out=$(timeout 60 "$gf" run stall.lua n=0 stall=2 stall_stop=7 dir=stall-run3 2>&1)
if grep -qE 'ETA [0-9]{3,}h' <<<"$out" || ! grep -qE 'step 30/1000 .* stalled [0-9]+s' <<<"$out"; then
	fail "progress line during a stall says stalled, not an ETA" "$out"
else
	echo "ok   progress line during a stall says stalled"
fi
check "missing pipeline" 1 "cannot open pipeline 'nope.lua'" "$gf" run nope.lua
printf '%s\ngf.connect(src.out, sink.inp)\ngf.run {}\n' "$head" >ok.lua
check "malformed argument" 1 "argument 'n20' is not of the form key=value" "$gf" run ok.lua n20
check "argument of the wrong type" 1 "ok.lua:2: argument n=abc: expected a number" "$gf" run ok.lua n=abc
check "unwritable run directory" 1 "cannot create run directory '/proc/gf-test/run'" "$gf" run ok.lua dir=/proc/gf-test/run
# a mistyped command-line key is refused before the run starts (it used to
# be only warned about after the run: exit 0, "was not used by the pipeline")
check "unused argument is refused before the run" 1 "argument 'stesp' (command line) is used by the pipeline neither as a gf.run option nor through gf.arg; did you mean 'steps'?" "$gf" run ok.lua stesp=5 dir=ok-run
[ -e ok-run ] && fail "unused argument: the run started (ok-run exists)"
check "a mistyped script key suggests the script's own" 1 "argument 'nn' (command line) is used by the pipeline neither as a gf.run option nor through gf.arg; did you mean 'n'?" "$gf" run ok.lua nn=5 dir=ok-run
check "a good run prints the edge table" 0 "src.out -> sink.inp" "$gf" run ok.lua dir=ok-run2
# one run per run directory
check "run into a directory holding another run" 1 "run directory 'ok-run2' already holds a run (" "$gf" run ok.lua dir=ok-run2
check "force=1 runs into it anyway" 0 "src.out -> sink.inp" "$gf" run ok.lua dir=ok-run2 force=1
"$gf" run stall.lua n=0 stall=30 stall_stop=40 dir=locked-run >locked.log 2>&1 &
locker=$!
for _ in $(seq 50); do [ -s locked-run/.lock ] && break; sleep 0.1; done
check "a run directory in use is refused, naming the process" 1 "run directory 'locked-run' is in use by another run (process $locker)" "$gf" run ok.lua dir=locked-run force=1
kill -INT "$locker"; wait "$locker"
printf '%s\ngf.connect(src.out, sink.inp)\ngf.run { quiet = true }\nsrc = gf.stage "count_source" { name = "src" }\nsink = gf.stage "check_sink" { name = "sink" }\ngf.connect(src.out, sink.inp)\ngf.run { quiet = true }\n' "$head" >tworuns.lua
check "a second gf.run in one script is refused" 1 "tworuns.lua:9: gf.run: called a second time in this script" "$gf" run tworuns.lua dir=two-run
# partial checkpoints a killed writer left are removed at the next start
mkdir -p partial-run/checkpoints && : >partial-run/checkpoints/ckpt-00000040.safetensors.tmp.99999
check "partial checkpoints are removed" 0 "removed 'partial-run/checkpoints/ckpt-00000040.safetensors.tmp.99999'" "$gf" run ok.lua dir=partial-run force=1
[ -e partial-run/checkpoints/ckpt-00000040.safetensors.tmp.99999 ] && fail "partial checkpoint still there"
check "run without a pipeline" 2 "usage: ganflow run PIPELINE.lua" "$gf" run
check "unknown command" 2 "unknown command 'frobnicate'" "$gf" frobnicate
check "stages lists ports, parameters, defaults, docs" 0 "number of items (0: until the graph stops)" "$gf" stages
check "stages shows one stage" 0 "messages of any kind from any number of producers" "$gf" stages collect
check "stages with an unknown name" 1 "unknown stage 'nosuch'" "$gf" stages nosuch
check "version" 0 "(stage ABI 2, Lua 5.4" "$gf" version

# ---- signals ----
cat >forever.lua <<'LUA'
local gf = require "ganflow"
local src = gf.stage "count_source" { n = 0, ignore_stop = gf.arg("stubborn", false), name = "src" }
local j = gf.stage "jitter" { mean_us = 100 }
local sink = gf.stage "check_sink" { name = "sink" }
gf.connect(src.out, j.inp)
gf.connect(j.out, sink.inp)
gf.run { grace = 60 }
LUA
# signal NAME SIGNALS WANT_EXIT TEXT ARGS...: starts forever.lua, sends the
# signals one second apart, expects the exit status and text.
signal() {
	local name=$1 sigs=$2 want=$3 text=$4
	shift 4
	"$gf" run forever.lua "$@" >sig.out 2>&1 &
	local pid=$! s
	sleep 1
	for s in $sigs; do
		kill -s "$s" "$pid" 2>/dev/null
		sleep 1
	done
	local waited=0
	while kill -0 "$pid" 2>/dev/null && [ $waited -lt 30 ]; do sleep 1; waited=$((waited + 1)); done
	if kill -0 "$pid" 2>/dev/null; then
		kill -9 "$pid"
		fail "$name: still running 30 s after the signal" "$(cat sig.out)"
		return
	fi
	wait "$pid"
	local rc=$?
	if [ "$rc" != "$want" ]; then fail "$name: exit status $rc, expected $want" "$(cat sig.out)"; return; fi
	if ! grep -qF -- "$text" sig.out; then fail "$name: output lacks: $text" "$(cat sig.out)"; return; fi
	echo "ok   $name"
}
signal "SIGINT drains gracefully" INT 130 "sink.inp" dir=int-run
grep -qF "run ended (stop requested)" sig.out || fail "SIGINT: no graceful end" "$(cat sig.out)"
signal "SIGTERM drains gracefully" TERM 143 "run ended (stop requested)" dir=term-run
signal "second SIGINT stops hard" "INT INT" 130 "stopping now (hard stop)" stubborn=true dir=hard-run

if [ $fails -gt 0 ]; then
	echo "$fails case(s) failed"
	exit 1
fi
echo "all bad-input cases passed"

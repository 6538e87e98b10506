# Shared by the distributed tests (sourced): the ganflow command, mpirun,
# a scratch directory removed at exit, small datasets, and helpers.
# Usage in a test: source "$(dirname "$0")/common.sh" "$1"   (the ganflow path)
set -u
G=${1:?usage: test.sh GANFLOW ...}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=${GF_SOURCE_DIR:-$(cd "$HERE/../.." && pwd)}
BIN=${GF_BINARY_DIR:-$(dirname "$G")}
MPIRUN=${GF_MPIRUN:-$(command -v mpirun || true)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export GANFLOW_LOG=${GANFLOW_LOG:-info}
# sanitizer builds run everything several times slower
SLOW=1
[ -n "${GF_SANITIZE:-}" ] && SLOW=4
TMP=$(mktemp -d /tmp/gf_dist_XXXXXX)
# a rank mpirun has just ended may still be writing its output here
trap 'rm -rf "$TMP" 2>/dev/null || { sleep 2; rm -rf "$TMP"; }' EXIT
cd "$TMP"

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

need_mpi() {
  [ -n "$MPIRUN" ] && [ -x "$MPIRUN" ] || skip "mpirun not found (Debian: openmpi-bin)"
}

# mpi SECONDS NP ARGS...: mpirun with a wall-clock limit
mpi() {
  local secs=$1 np=$2
  shift 2
  timeout -k 5 $((secs * SLOW)) "$MPIRUN" --allow-run-as-root --oversubscribe -np "$np" "$@"
}

# make_data NAME N WORLD BATCH: IDX files and the blocked / interleaved
# datasets NAME-blocked, NAME-inter (see make_idx.py); converted with
# shuffle=0, since their order is the point (the converters shuffle by
# default)
make_data() {
  local name=$1 n=$2 w=$3 b=$4
  mkdir -p "$name.idx"
  python3 "$HERE/make_idx.py" "$name.idx" "$n" "$w" "$b" || fail "make_idx.py"
  "$G" dataset idx "$name.idx/blocked-images.idx" "$name.idx/blocked-labels.idx" "$name-blocked" encoding=raw shuffle=0 force=1 >/dev/null 2>&1 || fail "dataset $name-blocked"
  "$G" dataset idx "$name.idx/interleaved-images.idx" "$name.idx/interleaved-labels.idx" "$name-inter" encoding=raw shuffle=0 force=1 >/dev/null 2>&1 || fail "dataset $name-inter"
}

ckpt_of() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest")"; }

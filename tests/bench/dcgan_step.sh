#!/usr/bin/env bash
# tests/bench/run dcgan_step [args...]: the seed DC-GAN's full GAN iterations
# on the nn engine (bench_dcgan_step, 2 threads by default) and the PyTorch
# peer (../shared/peers/torch_dcgan.py with OMP_NUM_THREADS equal to the
# thread count) in the same run. Extra arguments go to bench_dcgan_step
# (backend=, batch=, iters=, threads=, repeat=, peer=0, fuse=0 ...).
set -euo pipefail
build=${GF_BUILD:?run through tests/bench/run}
exec "$build/tests/bench/bench_dcgan_step" "$@"

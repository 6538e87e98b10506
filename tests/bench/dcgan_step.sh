#!/usr/bin/env bash
# tests/bench/run dcgan_step [args...]: the seed DC-GAN's full GAN iterations
# on the nn engine (bench_dcgan_step) and the PyTorch peer
# (tests/bench/torch_dcgan.py) in the same run.
#
#   CPU (default): 2 threads, the peer with OMP_NUM_THREADS equal to the
#   thread count; arguments backend=, batch=, iters=, threads=, repeat=,
#   peer=0, fuse=0 ...; last line "dcgan_step: speedup_vs_torch=X target=1.30".
#
#   CUDA: tests/bench/run dcgan_step backend=cuda [batches=64,256,1024]
#   [precision=fp32,tf32,bf16] [graphs=both|0|1] [iters=200] [layout=auto]
#   [up2=subpixel|upsample]: images/s and TFLOP/s per batch and precision,
#   eager and with CUDA graphs, the peer on the same GPU at each batch
#   (python3, or GF_PYTHON), ratio lines for the targets, last line
#   "dcgan_step: speedup_vs_torch_b64=X target=2.0". Without a GPU it says
#   "dcgan_step: no CUDA device (...) — GPU figures not measured" and exits 0.
set -euo pipefail
build=${GF_BUILD:?run through tests/bench/run}
exec "$build/tests/bench/bench_dcgan_step" "$@"

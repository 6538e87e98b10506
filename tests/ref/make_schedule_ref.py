#!/usr/bin/python3
"""Reference values of R3GAN's schedules for test_schedule.c.

Runs the authors' own cosine_decay_with_warmup (R3GAN's
training/training_loop.py, github brownvc/R3GAN), taken out of a copy of
that file given on the command line (it is not part of this repository and
nothing of it is committed: only the values below), at a set of image
counts for a few settings, and writes them as lines
    from to total warmup_from warmup hold nimg value
with %.17g numbers into schedule_ref.txt beside this script.

    /usr/bin/python3 tests/ref/make_schedule_ref.py /path/to/R3GAN/training/training_loop.py
"""
import ast
import os
import sys

import numpy as np

src = open(sys.argv[1]).read()
tree = ast.parse(src)
fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "cosine_decay_with_warmup")
ns = {"np": np}
exec(compile(ast.Module(body=[fn], type_ignores=[]), sys.argv[1], "exec"), ns)
cdw = ns["cosine_decay_with_warmup"]

settings = [
    # R3GAN's CIFAR-10 presets: lr, beta2, gamma, G's average (images), aug p, over 20 M images
    (2e-4, 5e-5, 2e7, 0.0, 0, 0),
    (0.9, 0.99, 2e7, 0.0, 0, 0),
    (0.05, 0.005, 2e7, 0.0, 0, 0),
    (0.0, 5e6, 2e7, 0.0, 0, 0),
    (0.0, 0.55, 2e7, 0.0, 0, 0),
    # a warm-up and a hold
    (1.0, 0.1, 1e6, 0.2, 1e5, 2e5),
]
points = [0, 1, 64, 5e4, 1e5, 1.5e5, 3e5, 5e5, 1e6, 1e6 + 64, 3.3e6, 1e7, 1.99999e7, 2e7, 2.5e7]
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schedule_ref.txt")
with open(out, "w") as f:
    f.write("# R3GAN's cosine_decay_with_warmup (training/training_loop.py), by make_schedule_ref.py\n")
    f.write("# from to total warmup_from warmup hold nimg value\n")
    for (base, final, total, wv, wn, hold) in settings:
        for p in points:
            v = cdw(p, base, total, final_value=final, warmup_value=wv, warmup_nimg=wn, hold_base_value_nimg=hold)
            f.write(" ".join("%.17g" % x for x in (base, final, total, wv, wn, hold, p, v)) + "\n")
print("wrote", out)

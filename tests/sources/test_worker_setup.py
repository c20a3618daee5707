"""A build's child process runs its BLAS and OpenMP pools on one thread (`worker_process_setup`)."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = """
import numpy
from threadpoolctl import threadpool_info
from numerical3d.sources.io import worker_process_setup
before = max(i["num_threads"] for i in threadpool_info())
worker_process_setup()
print(before, max(i["num_threads"] for i in threadpool_info()))
"""


def test_a_child_process_gets_one_blas_thread():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True,
                         env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    before, after = map(int, out.stdout.split())
    assert before == 2 and after == 1


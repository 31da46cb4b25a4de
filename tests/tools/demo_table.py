"""The server's demo table (--demo_table=ROWSxDIM --demo_seed=SEED), computed independently in
numpy, for the Python checks that compare answers with it."""

import numpy as np


def _splitmix64(x):
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def demo_table(rows, dim, seed):
    """float32 array [rows, dim]: the values the server's demo table holds."""
    i = np.arange(rows * dim, dtype=np.uint64)
    with np.errstate(over="ignore"):
        r = _splitmix64((np.uint64(seed) * np.uint64(0x100000001B3)) ^ i)
    v = (r >> np.uint64(40)).astype(np.float32) * np.float32(2.0 / 16777216.0) - np.float32(1.0)
    return v.reshape(rows, dim)

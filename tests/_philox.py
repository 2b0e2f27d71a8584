"""An independent numpy reference of baracuda's Gumbel noise (cuda/common/philox.cuh): Philox-4x32-10,
element L of the field (seed, offset) = word L % 4 of philox(counter = (L // 4, offset), key = seed),
u = (2 * (r >> 9) + 1) * 2^-24 (f32) or (2 * r + 1) * 2^-33 (f64), g = -log(-log(u))."""
import numpy as np

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_MASK = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def philox4x32_10(block, offset, seed):
    """block: uint64 array; offset, seed: ints < 2**64. Returns a (4, n) uint32 array."""
    block = np.asarray(block, dtype=np.uint64)
    c0, c1 = block & _MASK, block >> _S32
    c2 = np.full_like(block, np.uint64(offset & 0xFFFFFFFF))
    c3 = np.full_like(block, np.uint64(offset >> 32))
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
    for r in range(10):
        if r:
            k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
        p0, p1 = _M0 * c0, _M1 * c2  # < 2**64: exact in uint64
        hi0, lo0, hi1, lo1 = p0 >> _S32, p0 & _MASK, p1 >> _S32, p1 & _MASK
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return np.stack([c0, c1, c2, c3]).astype(np.uint32)


def words(n, seed, offset):
    """The random words of logical elements 0 .. n-1."""
    L = np.arange(n, dtype=np.uint64)
    w = philox4x32_10(L >> np.uint64(2), offset, seed)
    return w[(L & np.uint64(3)).astype(np.int64), np.arange(n)]


def gumbel(shape, seed, offset, f64=False):
    """The noise field of `shape` (row-major logical index), as float64 values of the f32 or f64 noise."""
    n = int(np.prod(shape, dtype=np.int64))
    r = words(n, seed, offset).astype(np.uint64)
    if f64:
        u = (2.0 * r.astype(np.float64) + 1.0) * 2.0 ** -33
        g = -np.log(-np.log(u))
    else:
        u = ((np.uint64(2) * (r >> np.uint64(9)) + np.uint64(1)).astype(np.float64) * 2.0 ** -24).astype(np.float32)
        g = -np.log(-np.log(u.astype(np.float64)))  # float64 of the exact f32 uniform
    return g.reshape(shape)

"""numpy quantizers for llama.cpp's K-quant blocks (Q4_K, Q5_K, Q6_K), which
the `gguf` package can read but not write (its quantize() stops at the
32-element types). Used by arch_models.py to write random-weight K-quant
GGUF files. The scales are chosen simply (min/max per sub-block, no search
as llama.cpp's quantizer does): a different approximation of the weights,
the same format, so llama.cpp and EntMTP read the same numbers from the
file. `python3 kquants.py` round-trips random rows through the gguf
package's dequantizers (the layouts' cross-check).
"""
import numpy as np

QK_K = 256


def _f16(x):
    return np.asarray(x, np.float32).astype(np.float16)


def _safe_div(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b == 0, 0.0, a / np.where(b == 0, 1.0, b))


def _scale_min_k(blocks, nmax):
    """Q4_K / Q5_K: 8 sub-blocks of 32, value = d*sc*q - dmin*m with 6-bit
    sc, m; returns fp16 d, dmin (n,), sc, m (n, 8) and the codes (n, 8, 32)."""
    n = blocks.shape[0]
    sub = blocks.reshape(n, 8, 32).astype(np.float32)
    lo = np.minimum(sub.min(axis=-1), 0.0)
    hi = sub.max(axis=-1)
    scale = (hi - lo) / nmax
    mins = -lo
    d = _f16(scale.max(axis=-1) / 63)
    dmin = _f16(mins.max(axis=-1) / 63)
    sc = np.clip(np.rint(_safe_div(scale, d.astype(np.float32)[:, None])), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(_safe_div(mins, dmin.astype(np.float32)[:, None])), 0, 63).astype(np.uint8)
    ds = (d.astype(np.float32)[:, None] * sc)[..., None]
    dm = (dmin.astype(np.float32)[:, None] * m)[..., None]
    q = np.clip(np.rint(_safe_div(sub + dm, ds)), 0, nmax).astype(np.uint8)
    return d, dmin, sc, m, q


def _pack_scales(sc, m):
    out = np.zeros((sc.shape[0], 12), np.uint8)
    out[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((m[:, 4:8] & 0x0F) << 4)
    return out


def _nibbles(q):
    """(n, 8, 32) codes -> qs (n, 128): sub-blocks 2c and 2c+1 share bytes."""
    low = q & 0x0F
    return (low[:, 0::2, :] | (low[:, 1::2, :] << 4)).reshape(q.shape[0], 128)


def _head(d, dmin):
    return np.concatenate([d.reshape(-1, 1).view(np.uint8), dmin.reshape(-1, 1).view(np.uint8)], axis=1)


def q4_k_blocks(blocks):
    d, dmin, sc, m, q = _scale_min_k(blocks, 15)
    return np.concatenate([_head(d, dmin), _pack_scales(sc, m), _nibbles(q)], axis=1)


def q5_k_blocks(blocks):
    d, dmin, sc, m, q = _scale_min_k(blocks, 31)
    qh = np.zeros((q.shape[0], 32), np.uint8)
    for s in range(8):
        qh |= ((q[:, s, :] >> 4) & 1) << s
    return np.concatenate([_head(d, dmin), _pack_scales(sc, m), qh, _nibbles(q)], axis=1)


def q6_k_blocks(blocks):
    """16 sub-blocks of 16, value = d*sc*(q - 32), int8 sc, 6-bit q."""
    n = blocks.shape[0]
    sub = blocks.reshape(n, 16, 16).astype(np.float32)
    scale = np.abs(sub).max(axis=-1) / 31
    d = _f16(scale.max(axis=-1) / 127)
    sc = np.clip(np.rint(_safe_div(scale, d.astype(np.float32)[:, None])), 0, 127).astype(np.int8)
    ds = (d.astype(np.float32)[:, None] * sc)[..., None]
    q = (np.clip(np.rint(_safe_div(sub, ds)), -32, 31) + 32).astype(np.uint8).reshape(n, 2, 4, 32)
    low, high = q & 0x0F, q >> 4
    ql = (low[:, :, 0:2, :] | (low[:, :, 2:4, :] << 4)).reshape(n, 128)
    qh = np.zeros((n, 2, 32), np.uint8)
    for j in range(4):
        qh |= high[:, :, j, :] << (2 * j)
    return np.concatenate([ql, qh.reshape(n, 64), sc.view(np.uint8), d.reshape(-1, 1).view(np.uint8)], axis=1)


BLOCKS = {"Q4_K": (q4_k_blocks, 144), "Q5_K": (q5_k_blocks, 176), "Q6_K": (q6_k_blocks, 210)}


def quantize_k(arr, name):
    """(rows, cols) float32, cols % 256 == 0 -> (rows, cols / 256 * bytes) uint8."""
    fn, size = BLOCKS[name]
    rows, cols = arr.shape
    assert cols % QK_K == 0, f"{name} needs rows of a multiple of {QK_K} values, not {cols}"
    out = fn(arr.reshape(-1, QK_K))
    assert out.shape[1] == size
    return out.reshape(rows, cols // QK_K * size)


if __name__ == "__main__":
    import gguf
    from gguf.quants import dequantize
    rng = np.random.Generator(np.random.PCG64(1))
    x = (rng.standard_normal((64, 512)) * 0.05).astype(np.float32)
    x[0, :256] = 0  # an all-zero block
    for name in BLOCKS:
        q = quantize_k(x, name)
        y = dequantize(q, getattr(gguf.GGMLQuantizationType, name))
        err = float(np.max(np.abs(y - x)))
        rel = err / float(np.max(np.abs(x)))
        print(f"{name}: max abs error {err:.2e} ({rel:.1%} of max |x|)")
        assert rel < {"Q4_K": 0.1, "Q5_K": 0.05, "Q6_K": 0.03}[name], name

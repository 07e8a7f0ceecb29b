#!/usr/bin/env python3
"""kernels-golden.py - regenerate tests/data/kernels/, the golden data of
tests/test-kernels.c.

The reference is the `gguf` package's numpy implementation of ggml's block
formats (gguf.quants), which is independent of our C code.  For each case NAME
it writes:

    NAME.q     raw blocks (or F16/BF16 values), exactly as stored in a GGUF file
    NAME.f32   their dequantization by gguf-py, little-endian float32

Cases:
    input.f32            1024 floats (blocks of 32 of varied magnitude, one all
                         zero, one constant): the quantizer input
    q4_0 q4_1 q5_0 q5_1 q8_0 f16 bf16
                         input.f32 quantized by gguf-py (for Q4_0..Q8_0 gguf-py
                         is bit-exact with ggml's quantize_row_*_ref)
    *-rand               random but valid blocks (any bits, finite fp16 scales)
                         for every block type, including the K-quants, which
                         gguf-py cannot quantize
    q2_k-rand q3_k-rand iq4_nl-rand iq4_xs-rand
                         the same for the types added later, from a second
                         random stream (so the files above stay as they were)
                         and with odd block counts (5 super-blocks, 37 blocks)
    *-model              rows of the default model (Q4_K, Q6_K, Q5_0, Q8_0),
                         written only when the model file is present

Usage (no python is needed at test time; the outputs are committed):
    python3 -m venv /tmp/kvenv && /tmp/kvenv/bin/pip install gguf numpy
    /tmp/kvenv/bin/python contrib/kernels-golden.py [--model PATH] [--out DIR]
"""
import argparse
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.quants import dequantize, quantize

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.dirname(HERE)

# bytes per block and elements per block, as in ggml-common.h
LAYOUT = {
    T.Q4_0: (18, 32), T.Q4_1: (20, 32), T.Q5_0: (22, 32), T.Q5_1: (24, 32), T.Q8_0: (34, 32),
    T.Q4_K: (144, 256), T.Q5_K: (176, 256), T.Q6_K: (210, 256),
    T.Q2_K: (84, 256), T.Q3_K: (110, 256), T.IQ4_NL: (18, 32), T.IQ4_XS: (136, 256),
}
# byte offsets of the fp16 scale fields inside a block (kept finite)
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.IQ4_NL: [0], T.IQ4_XS: [0],
}


def write(out, name, q, f):
    q = np.ascontiguousarray(q).view(np.uint8)
    f = np.ascontiguousarray(f, dtype="<f4")
    with open(os.path.join(out, name + ".q"), "wb") as fh:
        fh.write(q.tobytes())
    with open(os.path.join(out, name + ".f32"), "wb") as fh:
        fh.write(f.tobytes())
    print(f"{name:12s} {q.size:6d} bytes -> {f.size:5d} floats")


def make_input(rng):
    """1024 floats: 32 blocks of 32 with magnitudes from 1e-3 to 10."""
    blocks = rng.standard_normal((32, 32)).astype(np.float32)
    scales = (10.0 ** rng.uniform(-3, 1, size=(32, 1))).astype(np.float32)
    x = blocks * scales
    x[5] = 0.0              # all-zero block: d = 0
    x[9] = np.float32(0.25)  # constant block: max == min for Q4_1/Q5_1
    x[12, 7] = -np.abs(x[12]).max() * 2  # the extreme is negative
    return x.reshape(-1).astype(np.float32)


def random_blocks(rng, qtype, n_blocks):
    size, _ = LAYOUT[qtype]
    b = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        # either sign, magnitudes 1e-4 .. 1 (a negative dmin is odd but valid)
        h = (rng.uniform(-1, 1, n_blocks) * 10.0 ** rng.uniform(-4, 0, n_blocks)).astype(np.float16)
        b[:, off:off + 2] = h.view(np.uint8).reshape(n_blocks, 2)
    return b


def model_rows(path, tensor, rows):
    r = GGUFReader(path)
    for t in r.tensors:
        if t.name == tensor:
            data = np.asarray(t.data)
            return t.tensor_type, np.ascontiguousarray(data[rows[0]:rows[1]])
    raise KeyError(tensor)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(SRCDIR, "models", "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--out", default=os.path.join(SRCDIR, "tests", "data", "kernels"))
    ap.add_argument("--seed", type=int, default=20250101)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)

    x = make_input(rng)
    with open(os.path.join(args.out, "input.f32"), "wb") as fh:
        fh.write(x.astype("<f4").tobytes())
    print(f"{'input':12s} {x.size:6d} floats")

    for name, qt in [("q4_0", T.Q4_0), ("q4_1", T.Q4_1), ("q5_0", T.Q5_0), ("q5_1", T.Q5_1),
                     ("q8_0", T.Q8_0), ("bf16", T.BF16)]:
        q = quantize(x, qt)
        write(args.out, name, q, dequantize(q, qt))
    h = x.astype(np.float16)  # IEEE round to nearest even, as fp32_to_fp16
    write(args.out, "f16", h, dequantize(h.view(np.uint8), T.F16))

    for name, qt in [("q4_0", T.Q4_0), ("q4_1", T.Q4_1), ("q5_0", T.Q5_0), ("q5_1", T.Q5_1),
                     ("q8_0", T.Q8_0), ("q4_k", T.Q4_K), ("q5_k", T.Q5_K), ("q6_k", T.Q6_K)]:
        size, elems = LAYOUT[qt]
        b = random_blocks(rng, qt, 1024 // elems)
        write(args.out, name + "-rand", b, dequantize(b.reshape(-1), qt))

    rng2 = np.random.default_rng(args.seed + 1)
    for name, qt, n_blocks in [("q2_k", T.Q2_K, 5), ("q3_k", T.Q3_K, 5), ("iq4_nl", T.IQ4_NL, 37),
                               ("iq4_xs", T.IQ4_XS, 5)]:
        b = random_blocks(rng2, qt, n_blocks)
        write(args.out, name + "-rand", b, dequantize(b.reshape(-1), qt))

    if os.path.exists(args.model):
        for name, tensor, rows in [("q4_k-model", "blk.0.attn_output.weight", (3, 4)),
                                   ("q6_k-model", "blk.0.ffn_down.weight", (5, 6)),
                                   ("q5_0-model", "blk.0.attn_q.weight", (7, 9)),
                                   ("q8_0-model", "token_embd.weight", (1000, 1002))]:
            qt, b = model_rows(args.model, tensor, rows)
            write(args.out, name, b, dequantize(b.reshape(-1), qt))
    else:
        print(f"note: {args.model} not found; model rows not regenerated", file=sys.stderr)


if __name__ == "__main__":
    main()

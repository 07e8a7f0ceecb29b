#!/usr/bin/env python3
"""mkmodel.py - write a synthetic GGUF model with random weights.

The test suite and the benchmarks need models of any shape, in every weight type the engine
supports, without downloading anything.  This script writes one: architecture `llama`, `qwen2`,
`gemma3`, `qwen3`, `phi3`, `gemma2`, `granite`, `smollm3`, `mistral3` or the mixture-of-experts
`qwen2moe`, `qwen3moe`, `olmoe`, `granitemoe`, weights F32, F16, Q8_0, Q4_0,
a Q4_K_M-like mix or llama.cpp's Q3_K_M, Q2_K, IQ4_XS and IQ4_NL mixes, and the vocabulary (every
`tokenizer.*` key) copied from a vocab-only GGUF such as the fixtures in
../shared/fixtures/tokenizer/.  The hyper-parameter keys and tensor names are the ones
llama.cpp's loader reads (src/models/<arch>.cpp, src/llama-arch.cpp), so
llama.cpp can load the file and compute reference outputs from the very same bytes
(contrib/golden/regen).

Usage:
  mkmodel.py --arch ARCH --type {f32,f16,q8_0,q4_0,q4_k_m,q3_k_m,q2_k,iq4_xs,iq4_nl} --vocab VOCAB.gguf
             --dim D --layers L --heads H --kv-heads KVH --ffn F [--head-dim HD] [--ctx 2048]
             [--sliding-window W] [--rope-base B] [--seed S] [--tied]
             [--experts E --experts-used K --ffn-exp F --shexp S --merged-gate-up]
             [--think-script] -o OUT.gguf

Needs the PyPI packages `gguf` and `numpy`.  The output is a pure function of the arguments
(same arguments, same numpy -> byte-identical file; the sha256 is printed).

Weights (why the model is not plain Gaussian noise)
---------------------------------------------------
Argmax comparisons against llama.cpp are only meaningful if the top-1 logit stands clear of
the top-2 by much more than the numeric noise between two correct implementations (activation
quantization, F16 KV cache, summation order: about 1% of the logit scale).  With purely random
logits the gap between the two largest of 32,000 Gaussians is often a few percent of the
scale, so greedy runs would diverge for no fault of the code.  So the model is built around a
"bigram" skeleton plus noise:

  * every token embedding row is a random direction with unit RMS (gemma3: RMS 1/sqrt(D), the
    graph multiplies it by sqrt(D));
  * every layer is random, with gains chosen so that the 2L attention and FFN outputs together
    have an RMS of 0.85 in the residual stream, whatever the depth, next to the embedding's 1
    (the current token stays visible, the context contributes 40% of the final hidden state);
  * the output matrix row of token v is  (A/D) * sum of u_t over the tokens t with next(t) = v
    plus Gaussian noise of standard deviation B/sqrt(D), where u_t is the unit-RMS embedding
    direction and next() a random map onto the NORMAL tokens (no control/byte tokens).

  The logit of next(t) is then about A*rho (rho ~ 0.6: share of the current token in the final
  hidden state), all other logits are noise of standard deviation ~sqrt(B^2 + A^2/D) that
  depends on the whole context.  With A = 32 and B = 2 the top-1 logit is ~20, the runner-up
  ~12, the margin > 25% of the top logit at every step of the reference prompts (regen prints
  it); the greedy continuation is the walk t -> next(t), and the other top-k logits, which move
  by ~1 when the context changes, exercise every layer.  The argmax itself depends only on
  the last token: a wrong layer shows in the logits, not in the greedy tokens.

  --tied writes no output.weight (logits = token_embd x hidden state, as in real Gemma 3 and
  small Qwen2 files); the skeleton then cannot work: the current token's own embedding
  dominates the hidden state, so greedy decoding mostly repeats the last token.  Fine for
  benchmarks and loader tests; the golden test models are untied (the default Gemma 3 model
  covers the tied path).

A scripted thinking model (--think-script)
------------------------------------------
  No thinking model can be downloaded where the tests run, so --think-script writes one
  whose greedy output is fixed text: after a chat prompt (which ends with "\n" after
  "<|im_start|>assistant") it writes

    <think> \n Some  reasoning .\n </think> \n\n The  answer . <|im_end|>

  (one token each), i.e. "<think>\nSome reasoning.\n</think>\n\nThe answer." and the end of
  the turn, as Qwen3 does.  Architecture qwen3 only, with a Qwen (chatml) vocabulary: where
  the vocabulary has placeholders instead of Qwen3's added tokens (ggml-vocab-qwen2.gguf has
  [PAD151646]...) they get Qwen3's names and types (<|...|> CONTROL, <tool_call>, <think>,
  </think> ... USER_DEFINED, as convert_hf_to_gguf writes "special": false tokens); eos is
  <|im_end|> and the chat template is a short Qwen3-style chatml that names <think>.

  The weights are not random.  A token's embedding has a bias coordinate (1 for every token),
  an identity coordinate (one per scripted token; one shared by all other tokens) and, for
  <think> only, a flag source; each layer's attention_output and ffn_down are zero except
  layer 0's first head, which sets a flag coordinate F in the residual stream when <think> is
  anywhere in the context: its query reads the bias, its key and value the flag source (a
  token without it has k = v = 0), in the slowest RoPE pair of the head (rotation < 1e-3 rad
  over the context), with q/k norm gains that give <think> a score of THINK_SCORE against 0.  So the
  final hidden state is (bias, identity of the current token, F), all entries equal, and
  output.weight maps it to the successor: logit(next) = THINK_A per unit entry, everything
  else 0 or -THINK_A.  "\n" is in the script twice: without F it is followed by <think> (the
  prompt's end), with F by "Some"; any other token is followed by <think>, or by </think>
  when F is set; <|im_end|> by "\n".  A prompt that already ends with "<think>\n"
  (Qwen3-Thinking-2507's template) gets "Some reasoning.\n</think>\n\nThe answer.".

Mixture of experts
------------------
  Every layer's FFN is a router ffn_gate_inp (E, D), 3-D ffn_gate_exps / ffn_up_exps (E, F, D)
  or one ffn_gate_up_exps (E, 2F, D, gate rows first; same values as the split pair) and
  ffn_down_exps (E, D, F), plus the shared expert ffn_{gate,up,down}_shexp (qwen2moe always,
  with the gate vector ffn_gate_inp_shexp; granitemoe with --shexp > 0).  Keys: expert_count,
  expert_used_count, expert_feed_forward_length (qwen2moe, qwen3moe; olmoe and granitemoe read
  the expert width from feed_forward_length), expert_shared_feed_forward_length.
  A random router would leave near-ties among the thousands of top-k decisions of the
  reference prompts, and activation-quantization noise flips them (measured: logits off by up
  to 1.9 on Q4_K_M with nothing wrong).  So routing is part of the skeleton: E coordinates of
  every token embedding carry +ROUTE_S for K random experts of that token and -ROUTE_S K/(E-K)
  for the others, and each layer's router reads them (its own permutation) with gain
  ROUTER_GAIN plus a dense random part; the top-k is then decided by the current token with a
  gap of several units.  Routers are F32 in every type (llama-quant keeps ffn_gate_inp F32);
  ffn_down_exps/_shexp take ffn_down's type in the mixes that name it.

Weight types
------------
  f32, f16, q8_0, q4_0: every 2-D tensor in that type (like llama-quantize --pure);
  1-D tensors (norms, biases) are always F32.
  Q8_0/Q4_0/Q5_0/F16 blocks come from gguf.quants (bit-exact with ggml's reference
  quantizers); Q4_K and Q6_K blocks are written here (simple min/max scales, layouts of
  block_q4_K / block_q6_K in ggml-common.h), each tensor checked against
  gguf.quants.dequantize.

  q4_k_m, q3_k_m, q2_k, iq4_xs, iq4_nl: the tensor types llama-quantize chooses for the ftypes
  Q4_K_M, Q3_K_M, Q2_K, IQ4_XS and IQ4_NL (llama-quant.cpp, llama_tensor_get_type_impl, without
  imatrix, not Falcon or 70B; layer i = the i-th attn_v / ffn_down (a MoE layer's _exps and
  _shexp both count as layer i), n = --layers, gqa = heads/kv-heads, more(i) = llama-quant's
  use_more_bits: i < n/8 or i >= 7n/8 or (i - n/8) % 3 == 2):

    tensor               q4_k_m          q3_k_m           q2_k              iq4_xs / iq4_nl
    output (token_embd   Q6_K            Q6_K             Q6_K              Q6_K
      when tied)
    token_embd (untied)  Q4_K            Q3_K             Q2_K              IQ4_XS / IQ4_NL
    attn_v, attn_qkv     Q6_K if more(i) Q5_K for i < 2,  Q4_K if gqa >= 4, Q5_K if gqa >= 4,
                         else Q4_K       else Q4_K        else Q3_K         else the default
    attn_output          Q4_K            Q4_K             Q3_K              the default
    ffn_down             Q6_K if more(i) Q5_K for i < n/16, Q3_K            Q5_K for i < n/8,
                         else Q4_K       else Q4_K                          else the default
    everything else 2-D  Q4_K            Q3_K             Q2_K              IQ4_XS / IQ4_NL

  With exactly 8 experts (--experts 8, llama-quant's Mixtral rule) attn_v and attn_k are Q8_0,
  and attn_output is Q5_K in every mix above.

  then llama.cpp's fallbacks for a row that is not a multiple of 256 (tensor_type_fallback):
  Q2_K, Q3_K -> Q4_0; Q4_K -> Q5_0; Q5_K -> Q5_1; Q6_K -> Q8_0; IQ4_XS -> IQ4_NL; F16 when
  the row is not a multiple of 32 either (the output tensor goes straight to Q8_0 when its
  row is not a multiple of the default type's block).  general.file_type is llama.h's
  LLAMA_FTYPE_MOSTLY_* (Q2_K 10, Q3_K_M 12, IQ4_NL 25, IQ4_XS 30).  The Q2_K, Q3_K, Q5_K,
  IQ4_NL and IQ4_XS blocks are written here too (quantize_*: simple scales, no search),
  each tensor decoded with gguf.quants.dequantize and required to give back exactly the
  values the quantizer chose.
"""

import argparse
import hashlib
import os
import struct
import sys
import time

import numpy as np

try:
    import gguf
    from gguf import GGMLQuantizationType as QT
except ImportError:  # pragma: no cover
    sys.exit("mkmodel.py: needs the PyPI packages gguf and numpy (pip install gguf numpy)")

QK_K = 256

# general.file_type values (llama.h enum llama_ftype)
FILE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7, "q2_k": 10, "q3_k_m": 12, "q4_k_m": 15,
              "iq4_nl": 25, "iq4_xs": 30}

ARCH_DEFAULTS = {
    #            rms eps  rope base
    "llama":    (1e-5,    10000.0),
    "qwen2":    (1e-6,    1000000.0),
    "gemma3":   (1e-6,    1000000.0),
    "qwen3":    (1e-6,    1000000.0),
    "phi3":     (1e-5,    10000.0),
    "gemma2":   (1e-6,    10000.0),
    "granite":  (1e-5,    10000.0),
    "smollm3":  (1e-6,    2000000.0),
    "mistral3": (1e-5,    1000000.0),
    "qwen2moe": (1e-6,    1000000.0),
    "qwen3moe": (1e-6,    1000000.0),
    "olmoe":    (1e-5,    10000.0),
    "granitemoe": (1e-6,  10000.0),
}
MOE_ARCHS = ("qwen2moe", "qwen3moe", "olmoe", "granitemoe")
# Routers with clear top-k margins (see build_plan's route_embd): every token's embedding
# carries +ROUTE_S on the route coordinates of its K experts and -ROUTE_S K/(E-K) on the
# others (zero mean over the tokens, so that two tokens' embeddings stay uncorrelated);
# layer l's router reads those coordinates (in its own expert order) with gain ROUTER_GAIN,
# plus a dense random part of standard deviation ROUTER_NOISE (a real matmul over every
# input dimension, and the weights among the chosen experts vary with the context).
ROUTE_S = 3.0
ROUTER_GAIN = 1.5
ROUTER_NOISE = 0.3
# Granite's multipliers in the synthetic files (the weights are divided by them, so the
# skeleton's magnitudes hold): embedding, residual, logit scale; attention.scale 1/hd.
GRANITE_EMBD, GRANITE_RESID, GRANITE_LOGIT = 12.0, 0.25, 8.0

# Skeleton constants (see the module comment).
LOGIT_A = 32.0      # coherent logit of next(t), before the rho factor
LOGIT_B = 2.0       # standard deviation of the noise logits (per unit-RMS hidden state)
CONTEXT_RMS = 0.85  # RMS of all 2L attention/FFN contributions together (embedding: 1)

# --think-script: Qwen3's added tokens from id 151646 on (name, GGUF token type: 3 CONTROL,
# 4 USER_DEFINED), the scripted chain (GPT-2 byte-level pieces: \u010a = "\n", \u0120 = " "),
# the logit per unit entry of the hidden state, the attention score of <think>.
QWEN3_ADDED = [(t, 3) for t in ("<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
                                "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                                "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")] + \
              [("<tool_call>", 4), ("</tool_call>", 4)] + \
              [(t, 3) for t in ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
                                "<|repo_name|>", "<|file_sep|>")] + \
              [("<tool_response>", 4), ("</tool_response>", 4), ("<think>", 4), ("</think>", 4)]
THINK_CHAIN = ["<think>", "\u010a", "Some", "\u0120reasoning", ".\u010a", "</think>", "\u010a\u010a", "The",
               "\u0120answer", ".", "<|im_end|>"]
THINK_A = 5.0
THINK_SCORE = 32.0
THINK_TEMPLATE = (
    "{%- for message in messages %}{%- set content = message.content %}"
    "{%- if message.role == 'assistant' and '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}")


# --------------------------------------------------------------------------- quantizers

def _f16_round(x):
    """Rounds float32 values to what an f16 field stores; returns (f32 values, f16 array)."""
    h = x.astype(np.float16)
    return h.astype(np.float32), h


def quantize_q4_k(x):
    """Quantizes float32 rows (n, k), k % 256 == 0, to block_q4_K bytes (n, k/256*144).

    Each 256-block has 8 sub-blocks of 32 values: x ~= d*sc[j]*q - dmin*m[j], q in 0..15, sc and
    m 6-bit, d and dmin f16.  Layout: d, dmin, scales[12], qs[128] (ggml-common.h block_q4_K).
    """
    n, k = x.shape
    nb = n * k // QK_K
    sub = x.reshape(nb, 8, 32).astype(np.float32)
    lo = np.minimum(sub.min(axis=2), 0.0)            # (nb, 8)  <= 0
    hi = sub.max(axis=2)
    scale = (hi - lo) / 15.0                         # >= 0
    mins = -lo                                       # >= 0
    d, d16 = _f16_round(scale.max(axis=1) / 63.0)    # (nb,)
    dm, dm16 = _f16_round(mins.max(axis=1) / 63.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.rint(scale / d[:, None]), 0).clip(0, 63).astype(np.uint8)
        m = np.where(dm[:, None] > 0, np.rint(mins / dm[:, None]), 0).clip(0, 63).astype(np.uint8)
        eff_s = d[:, None] * sc.astype(np.float32)   # (nb, 8)
        eff_m = dm[:, None] * m.astype(np.float32)
        q = np.where(eff_s[:, :, None] > 0,
                     np.rint((sub + eff_m[:, :, None]) / eff_s[:, :, None]), 0)
    q = q.clip(0, 15).astype(np.uint8)               # (nb, 8, 32)

    scales = np.empty((nb, 12), dtype=np.uint8)
    scales[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    qp = q.reshape(nb, 4, 2, 32)                     # chunk c: sub-blocks 2c (low), 2c+1 (high)
    qs = (qp[:, :, 0, :] | (qp[:, :, 1, :] << 4)).reshape(nb, 128)

    out = np.concatenate([d16.view(np.uint8).reshape(nb, 2), dm16.view(np.uint8).reshape(nb, 2),
                          scales, qs], axis=1)
    return out.reshape(n, k // QK_K * 144)


def quantize_q6_k(x):
    """Quantizes float32 rows (n, k), k % 256 == 0, to block_q6_K bytes (n, k/256*210).

    Each 256-block has 16 groups of 16 values: x ~= d*sc[g]*(q-32), q in 0..63, sc int8, d f16.
    Layout: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16], d (block_q6_K).
    """
    n, k = x.shape
    nb = n * k // QK_K
    grp = x.reshape(nb, 16, 16).astype(np.float32)
    s = np.abs(grp).max(axis=2) / 31.0               # (nb, 16)
    d, d16 = _f16_round(s.max(axis=1) / 127.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.rint(s / d[:, None]), 0).clip(0, 127).astype(np.int8)
        eff = d[:, None] * sc.astype(np.float32)
        q = np.where(eff[:, :, None] > 0, np.rint(grp / eff[:, :, None]), 0)
    q = (q.clip(-32, 31) + 32).astype(np.uint8).reshape(nb, 2, 4, 32)  # half, quarter, l

    ql = np.empty((nb, 2, 64), dtype=np.uint8)
    ql[:, :, 0:32] = (q[:, :, 0] & 0xF) | ((q[:, :, 2] & 0xF) << 4)
    ql[:, :, 32:64] = (q[:, :, 1] & 0xF) | ((q[:, :, 3] & 0xF) << 4)
    qh = ((q[:, :, 0] >> 4) | ((q[:, :, 1] >> 4) << 2) |
          ((q[:, :, 2] >> 4) << 4) | ((q[:, :, 3] >> 4) << 6)).astype(np.uint8)  # (nb, 2, 32)

    out = np.concatenate([ql.reshape(nb, 128), qh.reshape(nb, 64), sc.view(np.uint8),
                          d16.view(np.uint8).reshape(nb, 2)], axis=1)
    return out.reshape(n, k // QK_K * 210)


def _pack_q5_k(d16, dm16, sc, m, q):
    """block_q5_K bytes from f16 d/dmin (nb,), 6-bit sc/m (nb, 8) and quants q (nb, 8, 32)."""
    nb = q.shape[0]
    scales = np.empty((nb, 12), dtype=np.uint8)
    scales[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    lo = q & 0xF
    qp = lo.reshape(nb, 4, 2, 32)                    # as Q4_K: sub-blocks 2c (low), 2c+1 (high)
    qs = (qp[:, :, 0, :] | (qp[:, :, 1, :] << 4)).reshape(nb, 128)
    hb = (q >> 4).astype(np.uint8)                   # (nb, 8, 32): bit j of qh[l] = sub-block j
    qh = np.zeros((nb, 32), dtype=np.uint8)
    for j in range(8):
        qh |= hb[:, j, :] << j
    return np.concatenate([d16.view(np.uint8).reshape(nb, 2), dm16.view(np.uint8).reshape(nb, 2),
                           scales, qh, qs], axis=1)


def quantize_q5_k(x):
    """Quantizes float32 rows (n, k), k % 256 == 0, to block_q5_K bytes (n, k/256*176).

    As Q4_K with q in 0..31: x ~= d*sc[j]*q - dmin*m[j] over 8 sub-blocks of 32.  Layout:
    d, dmin, scales[12] (as Q4_K), qh[32] (bit j of qh[l]: fifth bit of element l of sub-block
    j), qs[128] (the low nibbles, as Q4_K's).  Returns (bytes, the values they decode to).
    """
    n, k = x.shape
    nb = n * k // QK_K
    sub = x.reshape(nb, 8, 32).astype(np.float32)
    lo = np.minimum(sub.min(axis=2), 0.0)
    scale = (sub.max(axis=2) - lo) / 31.0
    mins = -lo
    d, d16 = _f16_round(scale.max(axis=1) / 63.0)
    dm, dm16 = _f16_round(mins.max(axis=1) / 63.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.rint(scale / d[:, None]), 0).clip(0, 63).astype(np.uint8)
        m = np.where(dm[:, None] > 0, np.rint(mins / dm[:, None]), 0).clip(0, 63).astype(np.uint8)
        eff_s = d[:, None] * sc.astype(np.float32)
        eff_m = dm[:, None] * m.astype(np.float32)
        q = np.where(eff_s[:, :, None] > 0,
                     np.rint((sub + eff_m[:, :, None]) / eff_s[:, :, None]), 0)
    q = q.clip(0, 31).astype(np.uint8)
    back = eff_s[:, :, None] * q.astype(np.float32) - eff_m[:, :, None]
    return (_pack_q5_k(d16, dm16, sc, m, q).reshape(n, k // QK_K * 176), back.reshape(n, k))


def _crumbs(q):
    """Packs 2-bit values q (nb, 256) as Q2_K/Q3_K's qs (nb, 64): element 128h + 32k + l is
    bits 2k, 2k+1 of byte 32h + l."""
    nb = q.shape[0]
    qp = q.reshape(nb, 2, 4, 32).astype(np.uint8)
    qs = qp[:, :, 0] | (qp[:, :, 1] << 2) | (qp[:, :, 2] << 4) | (qp[:, :, 3] << 6)
    return qs.reshape(nb, 64)


def quantize_q2_k(x):
    """Quantizes float32 rows (n, k), k % 256 == 0, to block_q2_K bytes (n, k/256*84).

    16 sub-blocks of 16 values: x ~= d*sc[j]*q - dmin*m[j], q in 0..3, sc and m 4-bit (scale
    in the low nibble of scales[j], minimum in the high one), d and dmin f16; min/max scales
    as quantize_q4_k.  Layout: scales[16], qs[64] (_crumbs), d, dmin (block_q2_K).
    Returns (bytes, the values they decode to).
    """
    n, k = x.shape
    nb = n * k // QK_K
    sub = x.reshape(nb, 16, 16).astype(np.float32)
    lo = np.minimum(sub.min(axis=2), 0.0)
    scale = (sub.max(axis=2) - lo) / 3.0
    mins = -lo
    d, d16 = _f16_round(scale.max(axis=1) / 15.0)
    dm, dm16 = _f16_round(mins.max(axis=1) / 15.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.rint(scale / d[:, None]), 0).clip(0, 15).astype(np.uint8)
        m = np.where(dm[:, None] > 0, np.rint(mins / dm[:, None]), 0).clip(0, 15).astype(np.uint8)
        eff_s = d[:, None] * sc.astype(np.float32)
        eff_m = dm[:, None] * m.astype(np.float32)
        q = np.where(eff_s[:, :, None] > 0,
                     np.rint((sub + eff_m[:, :, None]) / eff_s[:, :, None]), 0)
    q = q.clip(0, 3).astype(np.uint8)
    back = eff_s[:, :, None] * q.astype(np.float32) - eff_m[:, :, None]
    out = np.concatenate([sc | (m << 4), _crumbs(q.reshape(nb, QK_K)),
                          d16.view(np.uint8).reshape(nb, 2), dm16.view(np.uint8).reshape(nb, 2)], axis=1)
    return out.reshape(n, k // QK_K * 84), back.reshape(n, k)


def _signed_absmax(x, axis):
    """The element of largest magnitude along axis (its sign kept)."""
    i = np.expand_dims(np.abs(x).argmax(axis=axis), axis)
    return np.take_along_axis(x, i, axis=axis).squeeze(axis)


def quantize_q3_k(x):
    """Quantizes float32 rows (n, k), k % 256 == 0, to block_q3_K bytes (n, k/256*110).

    16 sub-blocks of 16 values: x ~= d*(s[j]-32)*q, q in -4..3, s 6-bit, d f16.  Each
    sub-block's scale maps its largest-magnitude value to -4 (the wide end), d maps the
    largest-magnitude scale to -32.  Layout: hmask[32] (bit k of hmask[l]: q + 4 >= 4 for
    element 32k + l), qs[64] (the low two bits of q + 4, _crumbs), scales[12] (the low nibble
    of s[j] in the low (j < 8) or high nibble of byte j % 8, its top two bits at bit 2(j/4) of
    byte 8 + j % 4), d.  Returns (bytes, the values they decode to).
    """
    n, k = x.shape
    nb = n * k // QK_K
    sub = x.reshape(nb, 16, 16).astype(np.float32)
    s = _signed_absmax(sub, 2) / np.float32(-4.0)          # (nb, 16)
    d, d16 = _f16_round(_signed_absmax(s, 1) / np.float32(-32.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] != 0, np.rint(s / d[:, None]), 0).clip(-32, 31).astype(np.int16)
        eff = d[:, None] * sc.astype(np.float32)
        q = np.where(eff[:, :, None] != 0, np.rint(sub / eff[:, :, None]), 0)
    q = q.clip(-4, 3).astype(np.int16)
    back = eff[:, :, None] * q.astype(np.float32)
    u = (q + 4).astype(np.uint8).reshape(nb, QK_K)          # 0..7
    hb = (u >> 2).reshape(nb, 8, 32)
    hmask = np.zeros((nb, 32), dtype=np.uint8)
    for kk in range(8):
        hmask |= hb[:, kk, :] << kk
    L = (sc + 32).astype(np.uint8)                           # (nb, 16), 0..63
    scales = np.empty((nb, 12), dtype=np.uint8)
    scales[:, 0:8] = (L[:, 0:8] & 0xF) | ((L[:, 8:16] & 0xF) << 4)
    top = (L >> 4).reshape(nb, 4, 4)                         # [j // 4, j % 4]
    scales[:, 8:12] = top[:, 0] | (top[:, 1] << 2) | (top[:, 2] << 4) | (top[:, 3] << 6)
    out = np.concatenate([hmask, _crumbs(u & 3), scales, d16.view(np.uint8).reshape(nb, 2)], axis=1)
    return out.reshape(n, k // QK_K * 110), back.reshape(n, k)


KVALUES_IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                         dtype=np.float32)
_IQ4NL_MID = (KVALUES_IQ4NL[1:] + KVALUES_IQ4NL[:-1]) / 2


def _iq4_nibbles(v):
    """Index of the nearest IQ4_NL codebook value to each v (ties: the upper one)."""
    return np.searchsorted(_IQ4NL_MID, v, side="right").astype(np.uint8)


def _iq4_pack32(idx):
    """Nibble indices (..., 32) to IQ4_NL's 16 bytes: byte j = element j | element j+16 << 4."""
    return idx[..., :16] | (idx[..., 16:] << 4)


def quantize_iq4_nl(x):
    """Quantizes float32 rows (n, k), k % 32 == 0, to block_iq4_nl bytes (n, k/32*18).

    Blocks of 32: x ~= d * kvalues_iq4nl[i]; d (f16) maps the largest-magnitude value to -127,
    each value takes the nearest codebook entry.  Layout: d, qs[16] (_iq4_pack32).
    Returns (bytes, the values they decode to).
    """
    n, k = x.shape
    nb = n * k // 32
    blk = x.reshape(nb, 32).astype(np.float32)
    d, d16 = _f16_round(_signed_absmax(blk, 1) / np.float32(-127.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(d[:, None] != 0, blk / d[:, None], 0)
    idx = _iq4_nibbles(v)
    back = d[:, None] * KVALUES_IQ4NL[idx]
    out = np.concatenate([d16.view(np.uint8).reshape(nb, 2), _iq4_pack32(idx)], axis=1)
    return out.reshape(n, k // 32 * 18), back.reshape(n, k)


def quantize_iq4_xs(x):
    """Quantizes float32 rows (n, k), k % 256 == 0, to block_iq4_xs bytes (n, k/256*136).

    8 sub-blocks of 32: x ~= d*(s[j]-32)*kvalues_iq4nl[i], s 6-bit, d f16; each sub-block's
    scale maps its largest-magnitude value to -127, d the largest-magnitude scale to -32.
    Layout: d, scales_h (u16: bits 2j, 2j+1 = top two bits of s[j]), scales_l[4] (nibble
    j % 2 of byte j / 2: low four bits of s[j]), qs[128] (sub-block j in bytes 16j..16j+15,
    as IQ4_NL).  Returns (bytes, the values they decode to).
    """
    n, k = x.shape
    nb = n * k // QK_K
    sub = x.reshape(nb, 8, 32).astype(np.float32)
    s = _signed_absmax(sub, 2) / np.float32(-127.0)         # (nb, 8)
    d, d16 = _f16_round(_signed_absmax(s, 1) / np.float32(-32.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] != 0, np.rint(s / d[:, None]), 0).clip(-32, 31).astype(np.int16)
        eff = d[:, None] * sc.astype(np.float32)
        v = np.where(eff[:, :, None] != 0, sub / eff[:, :, None], 0)
    idx = _iq4_nibbles(v)
    back = eff[:, :, None] * KVALUES_IQ4NL[idx]
    L = (sc + 32).astype(np.uint16)                          # (nb, 8), 0..63
    scales_h = np.zeros(nb, dtype=np.uint16)
    for j in range(8):
        scales_h |= (L[:, j] >> 4) << (2 * j)
    lo = (L & 0xF).astype(np.uint8)
    scales_l = lo[:, 0::2] | (lo[:, 1::2] << 4)
    out = np.concatenate([d16.view(np.uint8).reshape(nb, 2), scales_h.astype("<u2").view(np.uint8).reshape(nb, 2),
                          scales_l, _iq4_pack32(idx).reshape(nb, 128)], axis=1)
    return out.reshape(n, k // QK_K * 136), back.reshape(n, k)


# The quantizers written here for the types of the q2_k/q3_k_m/iq4_* mixes, and the largest
# relative RMS error each may show on Gaussian rows (measured 0.33, 0.15, 0.04, 0.08, 0.08).
NEW_QUANTIZERS = {
    QT.Q2_K: (quantize_q2_k, 0.45),
    QT.Q3_K: (quantize_q3_k, 0.30),
    QT.Q5_K: (quantize_q5_k, 0.06),
    QT.IQ4_NL: (quantize_iq4_nl, 0.15),
    QT.IQ4_XS: (quantize_iq4_xs, 0.15),
}


def encode(w, qtype):
    """Returns the on-disk array of float32 tensor w in type qtype (numpy order, rows last)."""
    if w.ndim > 2:  # 3-D expert tensors: the same rows, one after the other
        w = w.reshape(-1, w.shape[-1])
    if qtype == QT.F32:
        return np.ascontiguousarray(w, dtype=np.float32)
    if qtype == QT.F16:
        return w.astype(np.float16)
    if qtype in (QT.Q4_K, QT.Q6_K):
        q = quantize_q4_k(w) if qtype == QT.Q4_K else quantize_q6_k(w)
        # layout check: gguf-py's dequantizer must give the rows back (Q4_K: ~8% RMS error,
        # Q6_K: ~2%); a scrambled layout gives ~100%
        n = min(w.shape[0], 16)
        back = gguf.quants.dequantize(q[:n], qtype)
        err = np.sqrt(np.mean((back - w[:n]) ** 2) / max(np.mean(w[:n] ** 2), 1e-30))
        if not err < (0.15 if qtype == QT.Q4_K else 0.05):
            raise AssertionError(f"{qtype.name} self-check failed: relative RMS error {err:.3f}")
        return q
    if qtype in NEW_QUANTIZERS:
        quantize, limit = NEW_QUANTIZERS[qtype]
        q, want = quantize(w)
        # layout check: gguf-py's dequantizer must give back exactly the values the quantizer
        # chose (a misplaced bit changes some) and the rows to within the type's error (a
        # scrambled layout gives ~100% and more)
        n = min(w.shape[0], 64)
        back = gguf.quants.dequantize(q[:n], qtype)
        exact = np.max(np.abs(back - want[:n])) <= 1e-6 * max(float(np.max(np.abs(want[:n]))), 1e-30)
        err = np.sqrt(np.mean((back - w[:n]) ** 2) / max(np.mean(w[:n] ** 2), 1e-30))
        if not (exact and err < limit):
            raise AssertionError(f"{qtype.name} self-check failed: relative RMS error {err:.3f}"
                                 f"{'' if exact else ', decoded values differ from the chosen ones'}")
        return q
    return gguf.quants.quantize(w, qtype)


# Fallbacks for a row (ne0) that is not a multiple of the type's block size
# (llama-quant.cpp's tensor_type_fallback): a 32-block type, else F16.
FALLBACK = {QT.Q2_K: QT.Q4_0, QT.Q3_K: QT.Q4_0, QT.Q4_K: QT.Q5_0, QT.Q5_K: QT.Q5_1,
            QT.Q6_K: QT.Q8_0, QT.IQ4_XS: QT.IQ4_NL}
MIX_DEFAULT = {"q4_k_m": QT.Q4_K, "q2_k": QT.Q2_K, "q3_k_m": QT.Q3_K, "iq4_xs": QT.IQ4_XS,
               "iq4_nl": QT.IQ4_NL}


def use_more_bits(i, n):
    """llama-quant.cpp's choice of the layers that get more bits in Q4_K_M."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def pick_type_mix(name, row, a):
    """The type of 2-D tensor `name` (row length `row`) in the llama.cpp-like mixes q4_k_m,
    q2_k, q3_k_m, iq4_xs and iq4_nl: llama-quant.cpp's llama_tensor_get_type_impl for these
    ftypes (no imatrix, not Falcon or 70B), then its fallbacks."""
    ftype, default = a.type, MIX_DEFAULT[a.type]
    layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
    gqa = a.heads // a.kv_heads
    mixtral = getattr(a, "experts", 0) == 8
    t = default
    if name == "output.weight" or (a.tied and name == "token_embd.weight"):
        t = QT.Q8_0 if row % gguf.GGML_QUANT_SIZES[default][0] else QT.Q6_K
    elif name == "token_embd.weight":
        pass
    elif name.endswith(".attn_v.weight") or name.endswith(".attn_qkv.weight"):
        # the i-th attn_v-like tensor is layer i's
        if ftype == "q2_k":
            t = QT.Q4_K if gqa >= 4 else QT.Q3_K
        elif ftype == "q3_k_m":
            t = QT.Q5_K if layer < 2 else QT.Q4_K
        elif ftype == "q4_k_m":
            t = QT.Q6_K if use_more_bits(layer, a.layers) else t
        elif gqa >= 4:
            t = QT.Q5_K
        if mixtral:
            t = QT.Q8_0
    elif name.endswith(".attn_k.weight"):
        if mixtral:
            t = QT.Q8_0
    elif ".ffn_down" in name:
        if ftype == "q2_k":
            t = QT.Q3_K
        elif ftype == "q3_k_m":
            t = QT.Q5_K if layer < a.layers // 16 else QT.Q4_K
        elif ftype == "q4_k_m":
            t = QT.Q6_K if use_more_bits(layer, a.layers) else t
        elif layer < a.layers // 8:
            t = QT.Q5_K
    elif name.endswith(".attn_output.weight"):
        if mixtral:
            t = QT.Q5_K
        else:
            t = {"q2_k": QT.Q3_K, "q3_k_m": QT.Q4_K}.get(ftype, t)
    if row % gguf.GGML_QUANT_SIZES[t][0]:
        t = FALLBACK.get(t, t)
        if row % gguf.GGML_QUANT_SIZES[t][0]:
            t = QT.F16
    return t


def pick_type(name, shape, wtype, tied, a=None):
    """The GGML type of tensor `name` (numpy shape) for the requested weight type."""
    if len(shape) == 1 or "ffn_gate_inp" in name:  # llama-quant never quantizes the router
        return QT.F32
    row = shape[-1]
    if wtype in MIX_DEFAULT:
        return pick_type_mix(name, row, a)
    if wtype == "f32":
        t = QT.F32
    elif wtype == "f16":
        t = QT.F16
    elif wtype == "q8_0":
        t = QT.Q8_0
    else:
        t = QT.Q4_0
    if t not in (QT.F32, QT.F16) and row % 32 != 0:
        t = QT.F16
    return t


# --------------------------------------------------------------------------- model

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_NP = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1",
       10: "<u8", 11: "<i8", 12: "<f8"}


def read_vocab(path):
    """Reads the tokenizer.* keys of a GGUF file.

    Returns ([(key, value, type, sub_type)], n_vocab, token types (int32 array)).  A small
    parser of the KV section (gguf.GGUFReader takes seconds on a 32k vocabulary); it exits
    with a message on a malformed file.
    """
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, buf, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        if pos + n > len(buf):
            raise ValueError("string past end of file")
        pos += n
        return buf[pos - n:pos]

    def value(vt):
        nonlocal pos
        if vt in _SCALARS:
            return take(_SCALARS[vt])
        if vt == 8:
            return string()
        raise ValueError(f"bad value type {vt}")

    kvs = []
    try:
        if take("<I") != 0x46554747 or take("<I") != 3:
            raise ValueError("not a GGUF v3 file")
        take("<Q")
        n_kv = take("<Q")
        for _ in range(n_kv):
            key = string().decode("utf-8")
            vt = take("<I")
            if vt == 9:
                st, n = take("<I"), take("<Q")
                if st == 8:
                    val = [string() for _ in range(n)]
                elif st in _NP:
                    size = np.dtype(_NP[st]).itemsize * n
                    if pos + size > len(buf):
                        raise ValueError("array past end of file")
                    val = np.frombuffer(buf, dtype=_NP[st], count=n, offset=pos).tolist()
                    if st == 7:
                        val = [bool(v) for v in val]
                    pos += size
                else:
                    raise ValueError(f"bad array type {st}")
                item = (key, val, gguf.GGUFValueType(vt), gguf.GGUFValueType(st))
            else:
                item = (key, value(vt), gguf.GGUFValueType(vt), None)
            if key.startswith("tokenizer."):
                kvs.append(item)
    except (struct.error, ValueError, UnicodeDecodeError) as e:
        sys.exit(f"mkmodel.py: {path}: malformed GGUF: {e}")
    d = {k: v for k, v, _, _ in kvs}
    if "tokenizer.ggml.tokens" not in d:
        sys.exit(f"mkmodel.py: {path}: no tokenizer.ggml.tokens")
    n_vocab = len(d["tokenizer.ggml.tokens"])
    types = np.array(d.get("tokenizer.ggml.token_type", [1] * n_vocab), dtype=np.int32)
    if types.size != n_vocab:
        sys.exit(f"mkmodel.py: {path}: token_type and tokens differ in length")
    return kvs, n_vocab, types


def unit_rows(rng, n, d, rms):
    """(n, d) float32 rows of Gaussian directions, each scaled to RMS `rms` exactly."""
    x = rng.standard_normal((n, d), dtype=np.float32)
    x *= (rms / np.sqrt(np.mean(x * x, axis=1, keepdims=True, dtype=np.float64))).astype(np.float32)
    return x


def gauss(rng, shape, std):
    x = rng.standard_normal(shape, dtype=np.float32)
    x *= np.float32(std)
    return x


def llama3_freqs(a):
    """Llama 3.1's rope_freqs (convert_hf_to_gguf's llama3 rope scaling, factor 8, low/high
    frequency factors 1 and 4, original context 8192): 1 for the fast pairs, 8 for the slow,
    a smooth ramp between; the divisor of each pair's rotation frequency."""
    factor, lo_f, hi_f, orig = 8.0, 1.0, 4.0, 8192
    out = []
    for k in range(a.n_rot // 2):
        freq = 1.0 / a.rope_base ** (2.0 * k / a.n_rot)
        wavelen = 2 * np.pi / freq
        if wavelen < orig / hi_f:
            out.append(1.0)
        elif wavelen > orig / lo_f:
            out.append(factor)
        else:
            smooth = (orig / wavelen - lo_f) / (hi_f - lo_f)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def build_plan(a, n_vocab, types, rng):
    """Returns [(name, numpy shape, generator)] in file order; generators draw from rng."""
    D, L, H, KV, F = a.dim, a.layers, a.heads, a.kv_heads, a.ffn
    hd = a.head_dim
    gemma = a.arch in ("gemma3", "gemma2")
    granite = a.arch in ("granite", "granitemoe")
    state = {}

    def route_embd(u):
        # MoE: E route coordinates; token t gets +ROUTE_S on those of a random set of K
        # experts, -ROUTE_S K/(E-K) on the rest, so that each router's top-k is decided by the
        # current token with a gap of ROUTE_S E/(E-K) against a context term of RMS < 1 per
        # coordinate
        # (a random router would put near-ties, gaps ~1e-3, among a few thousand decisions,
        # and the Q8 activation noise of two correct implementations flips those)
        E, K = a.experts, a.experts_used
        dims = rng.choice(D, size=E, replace=False)
        pick = np.argsort(rng.random((n_vocab, E)), axis=1)[:, :K]
        want = np.full((n_vocab, E), -ROUTE_S * K / max(E - K, 1), dtype=np.float32)
        np.put_along_axis(want, pick, np.float32(ROUTE_S), axis=1)
        u[:, dims] = want
        u *= (1.0 / np.sqrt(np.mean(u * u, axis=1, keepdims=True, dtype=np.float64))).astype(np.float32)
        state["route_dims"] = dims
        return u

    def router():
        # this layer's router: expert e reads route coordinate perm[e], plus a dense part
        E = a.experts
        perm = rng.permutation(E)
        w = gauss(rng, (E, D), ROUTER_NOISE / np.sqrt(D))
        w[np.arange(E), state["route_dims"][perm]] += np.float32(ROUTER_GAIN)
        return w

    def embd():
        # unit-RMS directions; gemma3 scales the input by sqrt(D) in the graph
        u = unit_rows(rng, n_vocab, D, 1.0)
        if a.arch in MOE_ARCHS:
            u = route_embd(u)
        state["u"] = u
        if granite:
            return u * np.float32(1.0 / GRANITE_EMBD)
        return u * np.float32(1.0 / np.sqrt(D)) if gemma else u

    def output():
        u = state.pop("u")
        # next(): a random permutation of the NORMAL tokens; others map to random normal tokens
        normal = np.flatnonzero(types == 1)
        if normal.size == 0:
            normal = np.arange(n_vocab)
        nxt = np.empty(n_vocab, dtype=np.int64)
        nxt[normal] = rng.permutation(normal)
        other = np.setdiff1d(np.arange(n_vocab), normal)
        nxt[other] = rng.choice(normal, size=other.size)
        w = gauss(rng, (n_vocab, D), LOGIT_B / np.sqrt(D))
        np.add.at(w, nxt, u * np.float32(LOGIT_A / D))
        return w * np.float32(GRANITE_LOGIT) if granite else w

    def norm(n, scale):
        # RMS-norm weights: scale * (1 + 0.1 N(0,1)), stored as used (gemma3 files store 1+w)
        return np.float32(scale) * (np.float32(1.0) + gauss(rng, (n,), 0.1))

    plan = []

    def add(name, shape, gen):
        plan.append((name, shape, gen))

    add("token_embd.weight", (n_vocab, D), embd)
    add("output_norm.weight", (D,), lambda: norm(D, 1.0))
    if not a.tied:
        add("output.weight", (n_vocab, D), output)

    # Per-layer gains.  The normalized input x has RMS ~1.  q/k: scores q.k/sqrt(hd) with a
    # standard deviation ~2 (attention neither uniform nor one-hot).  v: RMS 1.
    qk = a.qk_gain
    gain = CONTEXT_RMS / np.sqrt(2 * L)  # RMS of one contribution, independent of depth
    if granite:  # the graph multiplies each contribution by residual_scale; q.k by 1/hd
        gain /= GRANITE_RESID
        qk *= float(hd) ** 0.25
    if a.rope_freqs == "llama3":
        add("rope_freqs.weight", (a.n_rot // 2,), lambda: llama3_freqs(a))
    if a.arch == "phi3":
        # LongRoPE factors: short ones near 1, long ones growing to 8 over the slow pairs
        k = np.arange(a.n_rot // 2, dtype=np.float32) / max(a.n_rot // 2 - 1, 1)
        add("rope_factors_long.weight", (a.n_rot // 2,), lambda: (1.0 + 7.0 * k * k).astype(np.float32))
        add("rope_factors_short.weight", (a.n_rot // 2,), lambda: (1.0 + 0.5 * k).astype(np.float32))
    E, FE, S = a.experts, a.ffn_exp, a.shexp

    def moe_layer(p):
        # router (F32); experts as the dense FFN, each of output RMS ~gain, so that the
        # weighted sum is at most that; the shared expert likewise
        add(p + "ffn_gate_inp.weight", (E, D), router)
        if a.merged_gate_up:  # per expert: the gate rows, then the up rows
            # drawn as the split tensors are (gate, then up): the same values either way
            add(p + "ffn_gate_up_exps.weight", (E, 2 * FE, D),
                lambda: np.concatenate([gauss(rng, (E, FE, D), 1.0 / np.sqrt(D)),
                                        gauss(rng, (E, FE, D), 1.0 / np.sqrt(D))], axis=1))
        else:
            add(p + "ffn_gate_exps.weight", (E, FE, D), lambda: gauss(rng, (E, FE, D), 1.0 / np.sqrt(D)))
            add(p + "ffn_up_exps.weight", (E, FE, D), lambda: gauss(rng, (E, FE, D), 1.0 / np.sqrt(D)))
        add(p + "ffn_down_exps.weight", (E, D, FE), lambda: gauss(rng, (E, D, FE), gain / 0.6 / np.sqrt(FE)))
        if S > 0:
            if a.arch == "qwen2moe":
                add(p + "ffn_gate_inp_shexp.weight", (D,), lambda: gauss(rng, (D,), 1.0 / np.sqrt(D)))
            add(p + "ffn_gate_shexp.weight", (S, D), lambda: gauss(rng, (S, D), 1.0 / np.sqrt(D)))
            add(p + "ffn_up_shexp.weight", (S, D), lambda: gauss(rng, (S, D), 1.0 / np.sqrt(D)))
            add(p + "ffn_down_shexp.weight", (D, S), lambda: gauss(rng, (D, S), gain / 0.6 / np.sqrt(S)))

    for i in range(L):
        p = f"blk.{i}."
        add(p + "attn_norm.weight", (D,), lambda: norm(D, 1.0))
        if a.arch == "phi3":  # one attn_qkv: the Q rows, then K, then V
            def qkv():
                q = gauss(rng, (H * hd, D), qk / np.sqrt(D))
                k_ = gauss(rng, (KV * hd, D), qk / np.sqrt(D))
                v = gauss(rng, (KV * hd, D), 1.0 / np.sqrt(D))
                return np.concatenate([q, k_, v])
            add(p + "attn_qkv.weight", ((H + 2 * KV) * hd, D), qkv)
        else:
            add(p + "attn_q.weight", (H * hd, D), lambda: gauss(rng, (H * hd, D), qk / np.sqrt(D)))
            add(p + "attn_k.weight", (KV * hd, D), lambda: gauss(rng, (KV * hd, D), qk / np.sqrt(D)))
            add(p + "attn_v.weight", (KV * hd, D), lambda: gauss(rng, (KV * hd, D), 1.0 / np.sqrt(D)))
        if a.arch in ("qwen2", "qwen2moe"):
            add(p + "attn_q.bias", (H * hd,), lambda: gauss(rng, (H * hd,), 0.3))
            add(p + "attn_k.bias", (KV * hd,), lambda: gauss(rng, (KV * hd,), 0.3))
            add(p + "attn_v.bias", (KV * hd,), lambda: gauss(rng, (KV * hd,), 0.3))
        if a.arch == "olmoe":
            # q/k norms over the whole projection (llama.cpp: attn_q_norm, attn_k_norm of n_embd)
            add(p + "attn_q_norm.weight", (H * hd,), lambda: norm(H * hd, qk))
            add(p + "attn_k_norm.weight", (KV * hd,), lambda: norm(KV * hd, qk))
        if a.arch in ("gemma3", "qwen3", "qwen3moe"):
            # per-head RMS norm of q and k: gain 1.2 -> score std ~1.4 after 1/sqrt(hd)
            add(p + "attn_q_norm.weight", (hd,), lambda: norm(hd, qk))
            add(p + "attn_k_norm.weight", (hd,), lambda: norm(hd, qk))
        if gemma:
            # the post-norms set the size of each contribution to the residual directly
            add(p + "attn_output.weight", (D, H * hd), lambda: gauss(rng, (D, H * hd), 1.0 / np.sqrt(H * hd)))
            add(p + "post_attention_norm.weight", (D,), lambda: norm(D, gain))
        else:
            # attention output of RMS ~gain (mixing values shrinks them, hence x2)
            add(p + "attn_output.weight", (D, H * hd),
                lambda: gauss(rng, (D, H * hd), 2.0 * gain / np.sqrt(H * hd)))
        add(p + "ffn_norm.weight", (D,), lambda: norm(D, 1.0))
        if a.arch in MOE_ARCHS:
            moe_layer(p)
            continue
        if a.arch == "phi3":  # one ffn_up: the gate rows first (ggml_swiglu), then up
            add(p + "ffn_up.weight", (2 * F, D), lambda: gauss(rng, (2 * F, D), 1.0 / np.sqrt(D)))
        else:
            add(p + "ffn_gate.weight", (F, D), lambda: gauss(rng, (F, D), 1.0 / np.sqrt(D)))
            add(p + "ffn_up.weight", (F, D), lambda: gauss(rng, (F, D), 1.0 / np.sqrt(D)))
        if gemma:
            add(p + "ffn_down.weight", (D, F), lambda: gauss(rng, (D, F), 1.0 / np.sqrt(F)))
            add(p + "post_ffw_norm.weight", (D,), lambda: norm(D, gain))
        else:
            # silu(g)*u has RMS ~0.6 for unit g, u
            add(p + "ffn_down.weight", (D, F), lambda: gauss(rng, (D, F), gain / 0.6 / np.sqrt(F)))
    return plan


def think_vocab(vocab_kvs, n_vocab, types):
    """--think-script: Qwen3's added tokens in the vocabulary's placeholders, eos <|im_end|>,
    a Qwen3-style template.  Returns (kvs, types, {piece: id})."""
    d = {k: v for k, v, _, _ in vocab_kvs}
    toks = list(d["tokenizer.ggml.tokens"])
    ids = {t.decode("utf-8", "replace"): i for i, t in enumerate(toks)}
    if "<|im_start|>" not in ids or "<|im_end|>" not in ids:
        sys.exit("mkmodel.py: --think-script needs a Qwen (chatml) vocabulary")
    types = types.copy()
    if "<think>" not in ids:
        first = ids["<|im_end|>"] + 1
        if first + len(QWEN3_ADDED) > n_vocab:
            sys.exit("mkmodel.py: --think-script: no room for Qwen3's added tokens")
        for k, (piece, ttype) in enumerate(QWEN3_ADDED):
            old = toks[first + k].decode("utf-8", "replace")
            if not old.startswith("[PAD"):
                sys.exit(f"mkmodel.py: --think-script: token {first + k} is {old!r}, not a placeholder")
            toks[first + k] = piece.encode()
            types[first + k] = ttype
            ids[piece] = first + k
    missing = [t for t in THINK_CHAIN if t not in ids]
    if missing:
        sys.exit(f"mkmodel.py: --think-script: the vocabulary has no {missing}")
    out = []
    for key, val, vt, st in vocab_kvs:
        if key == "tokenizer.ggml.tokens":
            val = toks
        elif key == "tokenizer.ggml.token_type":
            val = types.tolist()
        elif key in ("tokenizer.ggml.eos_token_id", "tokenizer.chat_template"):
            continue
        out.append((key, val, vt, st))
    out.append(("tokenizer.ggml.eos_token_id", ids["<|im_end|>"], gguf.GGUFValueType.UINT32, None))
    out.append(("tokenizer.chat_template", THINK_TEMPLATE, gguf.GGUFValueType.STRING, None))
    return out, types, ids


def build_think_plan(a, n_vocab, ids):
    """--think-script: the weights of the scripted thinking model (see the module comment)."""
    D, L, H, KV, F, hd = a.dim, a.layers, a.heads, a.kv_heads, a.ffn, a.head_dim
    chain = [ids[t] for t in THINK_CHAIN]
    BIAS, OTHER, FLAG_SRC, FLAG = 0, 1, 2, 3
    ident = {t: 4 + k for k, t in enumerate(chain)}
    nl, think, end_think = ids["\u010a"], ids["<think>"], ids["</think>"]
    slow = a.n_rot // 2 - 1  # the slowest NEOX pair is (slow, slow + n_rot/2)
    gain = np.float32(np.sqrt(THINK_SCORE / np.sqrt(hd)))  # score = sqrt(hd) gain^2
    A = np.float32(THINK_A)

    def embd():
        e = np.zeros((n_vocab, D), dtype=np.float32)
        e[:, BIAS] = 1
        e[:, OTHER] = 1
        for t, c in ident.items():
            e[t, OTHER] = 0
            e[t, c] = 1
        e[think, FLAG_SRC] = 1
        return e

    def output():
        w = np.zeros((n_vocab, D), dtype=np.float32)
        for k, t in enumerate(chain):  # the script's unconditional steps
            if t != nl:
                w[chain[k + 1] if k + 1 < len(chain) else nl, ident[t]] += A
        # "\n" -> <think> (no F) or "Some" (F); any other token -> <think> or </think>
        some = chain[chain.index(nl) + 1]
        w[think, [ident[nl], OTHER]] += A
        w[think, FLAG] -= A
        w[some, [ident[nl], FLAG]] += A
        w[some, BIAS] -= A
        w[end_think, [OTHER, FLAG]] += A
        w[end_think, BIAS] -= A
        return w

    def ones(n, v=1.0):
        return lambda: np.full((n,), np.float32(v), dtype=np.float32)

    def zeros(shape):
        return lambda: np.zeros(shape, dtype=np.float32)

    def wq():  # head 0 asks for the bias in the slow pair
        w = np.zeros((H * hd, D), dtype=np.float32)
        w[slow, BIAS] = 1
        return w

    def wk(src):  # kv head 0: the flag source, in the slow pair (key) or first entry (value)
        def gen():
            w = np.zeros((KV * hd, D), dtype=np.float32)
            w[src, FLAG_SRC] = 1
            return w
        return gen

    def wo():  # <think>'s value (its normed flag source, sqrt(D/3)) becomes F = 1
        w = np.zeros((D, H * hd), dtype=np.float32)
        w[FLAG, 0] = np.sqrt(3.0 / D)
        return w

    plan = [("token_embd.weight", (n_vocab, D), embd), ("output_norm.weight", (D,), ones(D)),
            ("output.weight", (n_vocab, D), output)]
    for i in range(L):
        p = f"blk.{i}."
        first = i == 0
        plan += [(p + "attn_norm.weight", (D,), ones(D)),
                 (p + "attn_q.weight", (H * hd, D), wq if first else zeros((H * hd, D))),
                 (p + "attn_k.weight", (KV * hd, D), wk(slow) if first else zeros((KV * hd, D))),
                 (p + "attn_v.weight", (KV * hd, D), wk(0) if first else zeros((KV * hd, D))),
                 (p + "attn_q_norm.weight", (hd,), ones(hd, gain)),
                 (p + "attn_k_norm.weight", (hd,), ones(hd, gain)),
                 (p + "attn_output.weight", (D, H * hd), wo if first else zeros((D, H * hd))),
                 (p + "ffn_norm.weight", (D,), ones(D)),
                 (p + "ffn_gate.weight", (F, D), zeros((F, D))),
                 (p + "ffn_up.weight", (F, D), zeros((F, D))),
                 (p + "ffn_down.weight", (D, F), zeros((D, F)))]
    return plan


def write_kvs(w, a, n_vocab, vocab_kvs, name):
    arch = a.arch
    w.add_string("general.type", "model")
    w.add_string("general.name", name)
    w.add_string("general.description",
                 "synthetic random-weight test model written by infer contrib/mkmodel.py: " +
                 " ".join(canonical_args(a)))
    w.add_uint32(f"{arch}.context_length", a.ctx)
    w.add_uint32(f"{arch}.embedding_length", a.dim)
    w.add_uint32(f"{arch}.block_count", a.layers)
    w.add_uint32(f"{arch}.feed_forward_length", a.ffn)
    w.add_uint32(f"{arch}.attention.head_count", a.heads)
    w.add_uint32(f"{arch}.attention.head_count_kv", a.kv_heads)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", a.rms_eps)
    w.add_float32(f"{arch}.rope.freq_base", a.rope_base)
    if arch == "llama":
        w.add_uint32(f"{arch}.rope.dimension_count", a.head_dim)
        w.add_uint32(f"{arch}.vocab_size", n_vocab)
    elif arch not in ("qwen2", "gemma3"):
        w.add_uint32(f"{arch}.rope.dimension_count", a.n_rot)
    if arch in ("gemma3", "gemma2") or a.head_dim != a.dim // a.heads:
        w.add_uint32(f"{arch}.attention.key_length", a.head_dim)
        w.add_uint32(f"{arch}.attention.value_length", a.head_dim)
    if arch in ("gemma3", "gemma2") and a.sliding_window > 0:
        w.add_uint32(f"{arch}.attention.sliding_window", a.sliding_window)
    if arch == "gemma2":
        w.add_float32(f"{arch}.attn_logit_softcapping", 50.0)
        w.add_float32(f"{arch}.final_logit_softcapping", 30.0)
    if arch in MOE_ARCHS:
        w.add_uint32(f"{arch}.expert_count", a.experts)
        w.add_uint32(f"{arch}.expert_used_count", a.experts_used)
        if arch in ("qwen2moe", "qwen3moe"):  # olmoe, granitemoe: feed_forward_length
            w.add_uint32(f"{arch}.expert_feed_forward_length", a.ffn_exp)
        if a.shexp > 0:
            w.add_uint32(f"{arch}.expert_shared_feed_forward_length", a.shexp)
    if arch in ("granite", "granitemoe"):
        w.add_float32(f"{arch}.embedding_scale", GRANITE_EMBD)
        w.add_float32(f"{arch}.residual_scale", GRANITE_RESID)
        w.add_float32(f"{arch}.logit_scale", GRANITE_LOGIT)
        w.add_float32(f"{arch}.attention.scale", 1.0 / a.head_dim)
    if arch == "phi3":
        w.add_uint32(f"{arch}.rope.scaling.original_context_length", a.rope_orig_ctx)
        w.add_float32(f"{arch}.rope.scaling.attn_factor", 1.1)
    if a.rope_scaling:
        kind, factor = a.rope_scaling.split(":")
        w.add_string(f"{arch}.rope.scaling.type", kind)
        w.add_float32(f"{arch}.rope.scaling.factor", float(factor))
        if kind == "yarn":
            w.add_uint32(f"{arch}.rope.scaling.original_context_length", a.rope_orig_ctx)
            if arch == "mistral3":
                w.add_float32(f"{arch}.rope.scaling.yarn_beta_fast", 16.0)
                w.add_float32(f"{arch}.rope.scaling.yarn_beta_slow", 2.0)
    if arch == "mistral3":
        w.add_float32(f"{arch}.attention.temperature_scale", 0.5)
    for key, val, vt, st in vocab_kvs:
        w.add_key_value(key, val, vt, sub_type=st)
    w.add_uint32("general.file_type", FILE_TYPES[a.type])
    w.add_uint32("general.quantization_version", 2)


def canonical_args(a):
    """The generating arguments, without paths that differ between machines."""
    s = [f"--arch {a.arch}", f"--type {a.type}", f"--vocab {os.path.basename(a.vocab)}",
         f"--dim {a.dim}", f"--layers {a.layers}", f"--heads {a.heads}", f"--kv-heads {a.kv_heads}",
         f"--ffn {a.ffn}", f"--head-dim {a.head_dim}", f"--ctx {a.ctx}", f"--rope-base {a.rope_base:g}",
         f"--seed {a.seed}"]
    if a.arch in ("gemma3", "gemma2"):
        s.append(f"--sliding-window {a.sliding_window}")
    if a.n_rot != a.head_dim:
        s.append(f"--rot {a.n_rot}")
    if a.qk_gain != 1.2:
        s.append(f"--qk-gain {a.qk_gain:g}")
    if a.rope_freqs:
        s.append(f"--rope-freqs {a.rope_freqs}")
    if a.rope_scaling:
        s.append(f"--rope-scaling {a.rope_scaling} --rope-orig-ctx {a.rope_orig_ctx}")
    if a.tied:
        s.append("--tied")
    if a.think_script:
        s.append("--think-script")
    if a.arch in MOE_ARCHS:
        s.append(f"--experts {a.experts} --experts-used {a.experts_used} --ffn-exp {a.ffn_exp}"
                 f" --shexp {a.shexp}")
        if a.merged_gate_up:
            s.append("--merged-gate-up")
    return s


def parse_args(argv):
    p = argparse.ArgumentParser(description="Write a synthetic random-weight GGUF model.")
    p.add_argument("--arch", required=True, choices=sorted(ARCH_DEFAULTS))
    p.add_argument("--type", required=True, choices=sorted(FILE_TYPES))
    p.add_argument("--vocab", required=True, help="vocab-only GGUF whose tokenizer.* keys are copied")
    p.add_argument("--dim", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--kv-heads", type=int, required=True)
    p.add_argument("--ffn", type=int, required=True)
    p.add_argument("--head-dim", type=int, default=0, help="default dim/heads")
    p.add_argument("--ctx", type=int, default=2048)
    p.add_argument("--sliding-window", type=int, default=512, help="gemma2/gemma3 only; 0 = none")
    p.add_argument("--rot", type=int, default=0, help="rotary dims per head (default head-dim)")
    p.add_argument("--qk-gain", type=float, default=1.2,
                   help="q/k weight gain (higher: sharper attention, for long-position tests)")
    p.add_argument("--rope-freqs", choices=["llama3"], help="write a rope_freqs tensor (llama)")
    p.add_argument("--rope-scaling", help="TYPE:FACTOR, e.g. linear:2 or yarn:4")
    p.add_argument("--rope-orig-ctx", type=int, default=512,
                   help="rope.scaling.original_context_length (yarn, phi3's LongRoPE)")
    p.add_argument("--rope-base", type=float, default=0.0, help="default per architecture")
    p.add_argument("--rms-eps", type=float, default=0.0, help="default per architecture")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tied", action="store_true", help="no output.weight: logits use token_embd")
    p.add_argument("--experts", type=int, default=8, help="MoE: experts per layer")
    p.add_argument("--experts-used", type=int, default=2, help="MoE: experts per token (top-k)")
    p.add_argument("--ffn-exp", type=int, default=0,
                   help="MoE: width of one expert (default --ffn; olmoe and granitemoe: always --ffn)")
    p.add_argument("--shexp", type=int, default=-1,
                   help="MoE: shared expert width (qwen2moe: default --ffn; granitemoe: default 0 = none)")
    p.add_argument("--merged-gate-up", action="store_true",
                   help="MoE: one ffn_gate_up_exps tensor (gate rows first) instead of two")
    p.add_argument("--think-script", action="store_true",
                   help="qwen3: the scripted thinking model (fixed greedy output; not random)")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args(argv)
    eps, base = ARCH_DEFAULTS[a.arch]
    a.rms_eps = a.rms_eps or eps
    a.rope_base = a.rope_base or base
    if a.head_dim == 0:
        if a.dim % a.heads:
            p.error("--dim must be a multiple of --heads (or give --head-dim)")
        a.head_dim = a.dim // a.heads
    for k in ("dim", "layers", "heads", "kv_heads", "ffn", "head_dim", "ctx"):
        if getattr(a, k) <= 0:
            p.error(f"--{k.replace('_', '-')} must be positive")
    if a.heads % a.kv_heads:
        p.error("--heads must be a multiple of --kv-heads")
    if a.head_dim % 2:
        p.error("--head-dim must be even (RoPE)")
    a.n_rot = a.rot or a.head_dim
    if a.n_rot % 2 or a.n_rot > a.head_dim:
        p.error("--rot must be even and <= head-dim")
    if a.arch == "phi3" and a.head_dim * a.heads != a.dim:
        p.error("phi3 needs heads * head-dim == dim (llama.cpp's loader assumes it)")
    if a.arch in ("qwen2", "qwen2moe", "olmoe") and a.head_dim * a.heads != a.dim:
        p.error(f"{a.arch} needs heads * head-dim == dim (llama.cpp's loader assumes it)")
    if a.arch == "olmoe" and a.kv_heads != a.heads:
        p.error("olmoe needs kv-heads == heads (llama.cpp's attn_k_norm has n_embd elements)")
    if a.arch in MOE_ARCHS:
        if not 1 <= a.experts_used <= a.experts:
            p.error("--experts-used must be in 1..--experts")
        if a.arch in ("olmoe", "granitemoe"):
            if a.ffn_exp not in (0, a.ffn):
                p.error(f"{a.arch}: the expert width is --ffn (feed_forward_length)")
            a.ffn_exp = a.ffn
        a.ffn_exp = a.ffn_exp or a.ffn
        if a.shexp < 0:
            a.shexp = a.ffn if a.arch == "qwen2moe" else 0
        if a.arch in ("qwen3moe", "olmoe") and a.shexp:
            p.error(f"{a.arch} has no shared expert")
        if a.arch == "qwen2moe" and a.shexp == 0:
            p.error("qwen2moe always has a shared expert")
    else:
        a.experts = a.experts_used = a.ffn_exp = a.shexp = 0
    if a.think_script:
        if a.arch != "qwen3" or a.tied:
            p.error("--think-script is a qwen3 model with an output.weight (not --tied)")
        if a.dim < 4 + len(THINK_CHAIN) or a.head_dim < 2:
            p.error(f"--think-script needs --dim >= {4 + len(THINK_CHAIN)}")
    return a


def main(argv):
    t0 = time.time()
    a = parse_args(argv)
    vocab_kvs, n_vocab, types = read_vocab(a.vocab)
    rng = np.random.default_rng(a.seed)
    if a.think_script:
        vocab_kvs, types, ids = think_vocab(vocab_kvs, n_vocab, types)
        plan = build_think_plan(a, n_vocab, ids)
    else:
        plan = build_plan(a, n_vocab, types, rng)
    name = os.path.splitext(os.path.basename(a.output))[0]

    tmp = a.output + ".tmp"
    w = gguf.GGUFWriter(tmp, a.arch)
    write_kvs(w, a, n_vocab, vocab_kvs, name)
    qtypes = []
    for tname, shape, _ in plan:
        qt = pick_type(tname, shape, a.type, a.tied, a)
        qtypes.append(qt)
        bs, ts = gguf.GGML_QUANT_SIZES[qt]
        nbytes = int(np.prod(shape[:-1])) * (shape[-1] // bs) * ts
        w.add_tensor_info(tname, shape, np.dtype(np.float32), nbytes, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    n_params = 0
    for (tname, shape, gen), qt in zip(plan, qtypes):
        x = gen()
        assert x.shape == shape and x.dtype == np.float32, tname
        n_params += x.size
        w.write_tensor_data(encode(x, qt))
    w.close()
    os.replace(tmp, a.output)

    h = hashlib.sha256()
    with open(a.output, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    print(f"mkmodel: {a.output}: {a.arch} {a.type} {n_params / 1e6:.1f}M params, "
          f"{os.path.getsize(a.output)} bytes, sha256 {h.hexdigest()}, {time.time() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

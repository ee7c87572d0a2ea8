#!/usr/bin/env python3
"""Export a training checkpoint to GGUF (architecture `llama`, F16 matrices, F32 norms,
SentencePiece vocabulary embedded as tokenizer.ggml.model=llama).

  python3 training/export_gguf.py --ckpt $CACHE/training/run1/ckpt.pt -o model.gguf

Self-contained GGUF v3 writer (no gguf-py needed). The model is trained in llama.cpp's RoPE
layout (adjacent pairs), so W_q/W_k are written as they are (no permutation).
Tensor shapes: a PyTorch [rows, cols] matrix is a ggml tensor with ne = [cols, rows].
"""
import argparse, os, struct, sys
import common  # first: it runs this script in the training environment (common.py)
import numpy as np
import torch
import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

GGUF_MAGIC = b"GGUF"
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_F16 = 0, 1
ALIGN = 32
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_BYTE = 1, 2, 3, 6


def s_bytes(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = s_bytes(key) + struct.pack("<I", vtype)
    if vtype == T_UINT32: return out + struct.pack("<I", value)
    if vtype == T_INT32: return out + struct.pack("<i", value)
    if vtype == T_FLOAT32: return out + struct.pack("<f", value)
    if vtype == T_BOOL: return out + struct.pack("<?", value)
    if vtype == T_STRING: return out + s_bytes(value)
    raise ValueError(vtype)


def kv_array(key, etype, values):
    out = s_bytes(key) + struct.pack("<IIQ", T_ARRAY, etype, len(values))
    if etype == T_STRING: return out + b"".join(s_bytes(v) for v in values)
    if etype == T_FLOAT32: return out + np.asarray(values, dtype="<f4").tobytes()
    if etype == T_INT32: return out + np.asarray(values, dtype="<i4").tobytes()
    raise ValueError(etype)


def vocab(sp):
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        tokens.append(sp.id_to_piece(i)); scores.append(sp.get_score(i))
        types.append(TOKEN_BYTE if sp.is_byte(i) else TOKEN_CONTROL if sp.is_control(i)
                     else TOKEN_UNKNOWN if sp.is_unknown(i) else TOKEN_NORMAL)
    return tokens, scores, types


def gguf_tensors(state, n_layers, tied):
    """(gguf name, numpy array) in GGUF order; matrices F16, 1-D norms F32."""
    out = [("token_embd.weight", state["token_embd.weight"])]
    for i in range(n_layers):
        p = f"blocks.{i}."
        for n in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"):
            out.append((f"blk.{i}.{n}.weight", state[p + n + ".weight"]))
    out.append(("output_norm.weight", state["output_norm.weight"]))
    if not tied:
        out.append(("output.weight", state["output.weight"]))
    return [(n, t.detach().float().numpy().astype("<f2" if t.dim() >= 2 else "<f4")) for n, t in out]


def export(ckpt_path, out_path, tokenizer_path, name="magicpig-tiny-llama"):
    ck = torch.load(ckpt_path, map_location="cpu")
    c = ck["config"]
    sp = spm.SentencePieceProcessor(model_file=tokenizer_path)
    if sp.vocab_size() != c["vocab_size"]:
        raise SystemExit(f"tokenizer has {sp.vocab_size()} tokens, model {c['vocab_size']}")
    tokens, scores, types = vocab(sp)
    head_dim = c.get("key_length") or c["dim"] // c["n_heads"]
    meta = [
        kv("general.architecture", T_STRING, "llama"),
        kv("general.name", T_STRING, name),
        kv("general.file_type", T_UINT32, 1),  # mostly F16
        kv("general.alignment", T_UINT32, ALIGN),
        kv("llama.vocab_size", T_UINT32, c["vocab_size"]),
        kv("llama.context_length", T_UINT32, c["max_seq_len"]),
        kv("llama.embedding_length", T_UINT32, c["dim"]),
        kv("llama.block_count", T_UINT32, c["n_layers"]),
        kv("llama.feed_forward_length", T_UINT32, c["ffn_dim"]),
        kv("llama.attention.head_count", T_UINT32, c["n_heads"]),
        kv("llama.attention.head_count_kv", T_UINT32, c["n_kv_heads"]),
        kv("llama.rope.dimension_count", T_UINT32, head_dim),
    ] + ([  # only when the heads are not dim / n_heads wide (a model grown by heads)
        kv("llama.attention.key_length", T_UINT32, head_dim),
        kv("llama.attention.value_length", T_UINT32, head_dim),
    ] if head_dim * c["n_heads"] != c["dim"] else []) + [
        kv("llama.rope.freq_base", T_FLOAT32, float(c["rope_theta"])),
        kv("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, float(c["norm_eps"])),
        kv("tokenizer.ggml.model", T_STRING, "llama"),
        kv_array("tokenizer.ggml.tokens", T_STRING, tokens),
        kv_array("tokenizer.ggml.scores", T_FLOAT32, scores),
        kv_array("tokenizer.ggml.token_type", T_INT32, types),
        kv("tokenizer.ggml.bos_token_id", T_UINT32, sp.bos_id()),
        kv("tokenizer.ggml.eos_token_id", T_UINT32, sp.eos_id()),
        kv("tokenizer.ggml.unknown_token_id", T_UINT32, sp.unk_id()),
        kv("tokenizer.ggml.add_bos_token", T_BOOL, True),
        kv("tokenizer.ggml.add_eos_token", T_BOOL, False),
        kv("tokenizer.ggml.add_space_prefix", T_BOOL, True),
    ]
    tensors = gguf_tensors(ck["model"], c["n_layers"], c["tied_output"])
    infos, offset = [], 0
    for n, a in tensors:
        ne = list(reversed(a.shape))
        infos.append(s_bytes(n) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
                     + struct.pack("<IQ", GGML_F16 if a.dtype == np.dtype("<f2") else GGML_F32, offset))
        offset += (a.nbytes + ALIGN - 1) // ALIGN * ALIGN
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(meta)))
        for m in meta: f.write(m)
        for i in infos: f.write(i)
        f.write(b"\0" * (-f.tell() % ALIGN))
        for _, a in tensors:
            f.write(a.tobytes())
            f.write(b"\0" * (-a.nbytes % ALIGN))
    os.replace(tmp, out_path)
    return ck


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--name", default="magicpig-tiny-llama")
    a = ap.parse_args()
    ck = export(a.ckpt, a.out, a.tokenizer or common.tokenizer_model(), a.name)
    print(f"wrote {a.out} ({os.path.getsize(a.out)/1e6:.1f} MB) from step {ck['step']}, {ck['tokens']} tokens")

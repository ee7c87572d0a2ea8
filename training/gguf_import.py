"""Read the weights of a GGUF written by export_gguf.py back into a training state dict, so a
run can start from an exported model (e.g. run5's step-1567 weights, kept only as GGUF).
Reads only what export_gguf.py writes: GGUF v3, F16/F32 tensors, names mapped 1:1."""
import struct
import numpy as np
import torch

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def _read_str(b, o):
    n, = struct.unpack_from("<Q", b, o)
    return b[o + 8:o + 8 + n].decode("utf-8"), o + 8 + n


def _skip_value(b, o, t):
    if t in _SCALAR:
        return struct.unpack_from(_SCALAR[t], b, o)[0], o + struct.calcsize(_SCALAR[t])
    if t == 8:
        return _read_str(b, o)
    if t == 9:
        et, n = struct.unpack_from("<IQ", b, o); o += 12
        for _ in range(n):
            _, o = _skip_value(b, o, et)
        return None, o
    raise ValueError(f"unknown GGUF value type {t}")


def read_state(path):
    """{training parameter name: float32 tensor}, and the GGUF metadata scalars."""
    b = open(path, "rb").read()
    if b[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    version, n_t, n_kv = struct.unpack_from("<IQQ", b, 4)
    o = 24
    meta = {}
    for _ in range(n_kv):
        k, o = _read_str(b, o)
        t, = struct.unpack_from("<I", b, o); o += 4
        meta[k], o = _skip_value(b, o, t)
    infos = []
    for _ in range(n_t):
        name, o = _read_str(b, o)
        nd, = struct.unpack_from("<I", b, o); o += 4
        ne = struct.unpack_from(f"<{nd}Q", b, o); o += 8 * nd
        t, off = struct.unpack_from("<IQ", b, o); o += 12
        infos.append((name, ne, t, off))
    align = meta.get("general.alignment", 32)
    base = (o + align - 1) // align * align
    state = {}
    for name, ne, t, off in infos:
        if t not in (0, 1):
            raise ValueError(f"{name}: tensor type {t} (only F32/F16 are read)")
        dt = "<f4" if t == 0 else "<f2"
        n = int(np.prod(ne))
        a = np.frombuffer(b, dtype=dt, count=n, offset=base + off).astype(np.float32)
        a = a.reshape(tuple(reversed(ne)))
        key = name
        if name.startswith("blk."):
            _, i, rest = name.split(".", 2)
            key = f"blocks.{i}.{rest}"
        state[key] = torch.from_numpy(a.copy())
    return state, meta


def config_dict(meta, state):
    """model.Config fields of an exported GGUF (its llama.* metadata; tied when output.weight is absent)."""
    return {"vocab_size": state["token_embd.weight"].shape[0], "dim": meta["llama.embedding_length"],
            "n_layers": meta["llama.block_count"], "n_heads": meta["llama.attention.head_count"],
            "n_kv_heads": meta["llama.attention.head_count_kv"], "ffn_dim": meta["llama.feed_forward_length"],
            # float32 in the file: 7 significant digits give back the float the config was written from
            "norm_eps": float(f"{meta['llama.attention.layer_norm_rms_epsilon']:.7g}"),
            "rope_theta": float(f"{meta['llama.rope.freq_base']:.7g}"),
            "max_seq_len": meta["llama.context_length"], "tied_output": "output.weight" not in state,
            "key_length": key_length(meta)}


def key_length(meta):
    """model.Config.key_length: the head dimension if the file gives one other than dim / n_heads, else 0."""
    kl = meta.get("llama.attention.key_length", 0)
    return 0 if kl * meta["llama.attention.head_count"] == meta["llama.embedding_length"] else kl


def read_vocab(path):
    """(pieces, scores, types) of a GGUF's SentencePiece vocabulary (tokenizer.ggml.tokens /
    scores / token_type, as export_gguf.py writes them; types use SentencePiece's numbering)."""
    b = open(path, "rb").read()
    if b[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    _, _, n_kv = struct.unpack_from("<IQQ", b, 4)
    o, want, got = 24, ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"), {}
    for _ in range(n_kv):
        k, o = _read_str(b, o)
        t, = struct.unpack_from("<I", b, o); o += 4
        if k in want and t == 9:
            et, n = struct.unpack_from("<IQ", b, o); o += 12
            vals = []
            for _ in range(n):
                v, o = (_read_str(b, o) if et == 8 else _skip_value(b, o, et))
                vals.append(v)
            got[k] = vals
        else:
            _, o = _skip_value(b, o, t)
    if any(k not in got for k in want) or len({len(got[k]) for k in want}) != 1:
        raise ValueError(f"{path}: no complete tokenizer.ggml.tokens / scores / token_type arrays")
    return got[want[0]], got[want[1]], got[want[2]]

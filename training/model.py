"""Llama exactly as GGUF `llama` (llama.cpp) computes it, so the export needs no weight permutes.

- RMSNorm: x * rsqrt(mean(x^2) + eps) * w.
- RoPE in the GGUF/llama.cpp "normal" convention: ADJACENT pairs (x[2i], x[2i+1]) rotate by
  pos * theta^(-2i/head_dim). (Hugging Face's rotate_half pairs x[i] with x[i+d/2]; its
  converter permutes W_q/W_k to get this layout — we train in this layout directly.)
- GQA: query head h reads KV head h // (n_head / n_kv_head).
- SwiGLU FFN: down(silu(gate(x)) * up(x)). No biases anywhere.
Weight names mirror the GGUF tensor names (export_gguf.py maps them 1:1).
"""
from dataclasses import dataclass, asdict
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint


@dataclass
class Config:
    vocab_size: int = 4096
    dim: int = 256
    n_layers: int = 6
    n_heads: int = 4
    n_kv_heads: int = 2
    ffn_dim: int = 688
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_seq_len: int = 4096   # the context length written to GGUF (llama.context_length)
    tied_output: bool = False
    # the head dimension when it is not dim // n_heads (GGUF llama.attention.key_length): a model
    # grown by heads (grow_heads) keeps its trained 64-dim heads and adds more of them; 0 = dim // n_heads
    key_length: int = 0

    @property
    def head_dim(self):
        return self.key_length or self.dim // self.n_heads

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, positions, theta):
    """cos/sin of shape [T, head_dim/2] for the given integer positions."""
    inv = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = positions.to(torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin):
    """x: [B, H, T, D]; rotates adjacent pairs (x0,x1),(x2,x3),..."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    r0 = x0 * cos - x1 * sin
    r1 = x0 * sin + x1 * cos
    return torch.stack((r0, r1), dim=-1).flatten(-2)


def causal_attention(q, k, v, chunk=512):
    """softmax(q k^T / sqrt(d) + causal mask) v for q, k, v [B, H, T, d], computed per block of
    `chunk` query rows against only the keys they can see (0 .. block end), with the scale and
    the mask folded into one baddbmm. Same result as the full T x T form (to float rounding),
    but it never builds a T x T tensor: at T = 4096 forward + backward of one layer's attention
    went from 5.1 s to 1.1 s on 2 cores (eighth session), most of a training step's time."""
    B, H, T, d = q.shape
    q3, k3, v3 = q.reshape(B * H, T, d), k.reshape(B * H, T, d), v.reshape(B * H, T, d)
    outs = []
    for s in range(0, T, chunk):
        e = min(T, s + chunk)
        m = torch.zeros(e - s, e, dtype=q.dtype)
        m[:, s:e] = torch.full((e - s, e - s), float("-inf"), dtype=q.dtype).triu(1)
        att = torch.baddbmm(m, q3[:, s:e], k3[:, :e].transpose(1, 2), alpha=1.0 / math.sqrt(d))
        outs.append(torch.bmm(torch.softmax(att, dim=-1), v3[:, :e]))
    return torch.cat(outs, 1).view(B, H, T, d)


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        hd = c.head_dim
        self.attn_norm = RMSNorm(c.dim, c.norm_eps)
        self.attn_q = nn.Linear(c.dim, c.n_heads * hd, bias=False)
        self.attn_k = nn.Linear(c.dim, c.n_kv_heads * hd, bias=False)
        self.attn_v = nn.Linear(c.dim, c.n_kv_heads * hd, bias=False)
        self.attn_output = nn.Linear(c.n_heads * hd, c.dim, bias=False)
        self.ffn_norm = RMSNorm(c.dim, c.norm_eps)
        self.ffn_gate = nn.Linear(c.dim, c.ffn_dim, bias=False)
        self.ffn_up = nn.Linear(c.dim, c.ffn_dim, bias=False)
        self.ffn_down = nn.Linear(c.ffn_dim, c.dim, bias=False)

    def qkv(self, x, cos, sin):
        """The attention inputs of residual stream x [B, T, dim]: q [B, n_heads, T, d] and k
        [B, n_kv_heads, T, d] rotated by RoPE, v [B, n_kv_heads, T, d] (KV heads not repeated)."""
        c = self.c
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = self.attn_q(h).view(B, T, c.n_heads, c.head_dim).transpose(1, 2)
        k = self.attn_k(h).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        v = self.attn_v(h).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def forward(self, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        hd = c.head_dim
        q, k, v = self.qkv(x, cos, sin)
        rep = c.n_heads // c.n_kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        o = causal_attention(q, k, v)
        x = x + self.attn_output(o.transpose(1, 2).reshape(B, T, c.n_heads * hd))
        h = self.ffn_norm(x)
        return x + self.ffn_down(F.silu(self.ffn_gate(h)) * self.ffn_up(h))


class Llama(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        assert (c.key_length or c.dim % c.n_heads == 0) and c.n_heads % c.n_kv_heads == 0 and c.head_dim % 2 == 0
        self.c = c
        self.token_embd = nn.Embedding(c.vocab_size, c.dim)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.output_norm = RMSNorm(c.dim, c.norm_eps)
        self.output = None if c.tied_output else nn.Linear(c.dim, c.vocab_size, bias=False)
        self.grad_checkpoint = False
        self.apply(self._init)
        for b in self.blocks:  # scaled init of the residual projections (GPT-2 style)
            nn.init.normal_(b.attn_output.weight, std=0.02 / math.sqrt(2 * c.n_layers))
            nn.init.normal_(b.ffn_down.weight, std=0.02 / math.sqrt(2 * c.n_layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, ids):
        """ids [B, T] -> logits [B, T, vocab] (positions 0..T-1)."""
        B, T = ids.shape
        cos, sin = rope_tables(self.c.head_dim, torch.arange(T), self.c.rope_theta)
        x = self.token_embd(ids)
        for b in self.blocks:
            if self.grad_checkpoint and self.training:
                x = torch.utils.checkpoint.checkpoint(b, x, cos, sin, use_reentrant=False)
            else:
                x = b(x, cos, sin)
        x = self.output_norm(x)
        w = self.token_embd.weight if self.output is None else self.output.weight
        return x @ w.t()

    @torch.no_grad()
    def greedy(self, ids, n):
        """Greedy continuation of a batch of equal-length prompts (recomputes the prefix each
        step: simple and exact; fine for the short answers evaluated here)."""
        out = ids
        for _ in range(n):
            nxt = self.forward(out)[:, -1].argmax(-1, keepdim=True)
            out = torch.cat([out, nxt], dim=1)
        return out[:, ids.shape[1]:]

    def num_params(self):
        return sum(p.numel() for p in self.parameters())


def grow_depth(model, state, new_layers):
    """Load `state` (a trained model with fewer blocks) into `model` (n_layers = old + len(new_layers)),
    putting fresh blocks at the indices `new_layers` and the old blocks, in order, everywhere else.
    A fresh block's residual projections (attn_output, ffn_down) are zeroed, so it adds nothing
    and the grown model computes exactly what the trained one did; training then grows them
    (their gradients are not zero) without first having to undo a random perturbation."""
    n_old = 1 + max(int(k.split(".")[1]) for k in state if k.startswith("blocks."))
    n = model.c.n_layers
    new_layers = sorted(set(new_layers))
    if n_old + len(new_layers) != n or any(i < 0 or i >= n for i in new_layers):
        raise ValueError(f"growing {n_old} blocks to {n} needs {n - n_old} new block indices in 0..{n - 1}, got {new_layers}")
    old_of = [i for i in range(n) if i not in new_layers]  # old_of[j]: new index of old block j
    grown = {k: v for k, v in state.items() if not k.startswith("blocks.")}
    for k, v in state.items():
        if k.startswith("blocks."):
            _, j, rest = k.split(".", 2)
            grown[f"blocks.{old_of[int(j)]}.{rest}"] = v
    fresh = model.state_dict()
    for i in new_layers:
        for k, v in fresh.items():
            if k.startswith(f"blocks.{i}."):
                zero = k.endswith("attn_output.weight") or k.endswith("ffn_down.weight")
                grown[k] = torch.zeros_like(v) if zero else v.clone()
    return grown


def grow_heads(model, state):
    """Load `state` (a trained model with fewer attention heads of model's head_dim and the same GQA
    group size) into `model`: the old query and KV heads keep their indices, the fresh ones come
    after them (query head h still reads KV head h // group), and the fresh heads' columns of
    attn_output are zero, so the grown model computes exactly what the trained one did. Training
    then grows the fresh heads as grow_depth's fresh blocks grow (their q/k/v are random, their
    output columns get gradients). Returns the grown state dict; ValueError if the shapes don't fit."""
    c, hd = model.c, model.c.head_dim
    grown = dict(state)
    for k, v in model.state_dict().items():
        if k not in state:
            raise ValueError(f"the trained model has no {k} (grow_heads keeps the block count)")
        old = state[k]
        if old.shape == v.shape:
            continue
        if k.endswith(("attn_q.weight", "attn_k.weight", "attn_v.weight")) and old.shape[1] == v.shape[1] \
                and old.shape[0] % hd == 0 and old.shape[0] < v.shape[0]:
            new = v.clone()
            new[:old.shape[0]] = old
        elif k.endswith("attn_output.weight") and old.shape[0] == v.shape[0] and old.shape[1] < v.shape[1]:
            new = torch.zeros_like(v)
            new[:, :old.shape[1]] = old
        else:
            raise ValueError(f"{k}: trained shape {tuple(old.shape)} cannot grow to {tuple(v.shape)}")
        grown[k] = new
    b = "blocks.0."
    old_q, old_kv = state[b + "attn_q.weight"].shape[0] // hd, state[b + "attn_k.weight"].shape[0] // hd
    if old_q * c.n_kv_heads != old_kv * c.n_heads:
        raise ValueError(f"the trained model's {old_q} query heads per {old_kv} KV heads are not the grown "
                         f"model's group {c.n_heads}/{c.n_kv_heads}: the old heads would read other KV heads")
    return grown

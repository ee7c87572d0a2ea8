#!/usr/bin/env python3
"""Why does MagicPIG lose more needles at the start of a long haystack than dense attention?
For held-out single-needle episodes at a given length and needle depths, at the step that
predicts the answer's first digit, per sparse layer (not 0 or n/2, which MagicPIG keeps
exact): the most needle-attending head's exact softmax mass on the needle (its digits and the
12 tokens before them, "... numbers for KEY is:"), and the
probability that MagicPIG (K bits, L tables, >= 2 collisions, keys centered by their mean)
samples that head's most-attended needle key, computed from the key's angle to the query.

  python3 training/probe_needle_attention.py GGUF_OR_PT [--length 4096] [--n 8]
"""
import argparse, math, os, sys
import common  # first: it runs this script in the training environment (common.py)
import numpy as np
import torch
import torch.nn.functional as F
import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint, data
from model import rope_tables


def sample_probability(cos, K, L):
    """P(>= 2 of L SimHash tables of K bits collide) for a key at this cosine to the query."""
    p = (1 - math.acos(max(-1.0, min(1.0, cos))) / math.pi) ** K
    return 1 - (1 - p) ** L - L * p * (1 - p) ** (L - 1)


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--length", type=int, default=4096)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--depths", default="0.02,0.06,0.15,0.5,0.9")
    ap.add_argument("-K", type=int, default=10)
    ap.add_argument("-L", type=int, default=150)
    a = ap.parse_args()
    torch.set_num_threads(1)
    sp = spm.SentencePieceProcessor(model_file=common.tokenizer_model())
    maker = data.EpisodeMaker(sp, "heldout")
    model, _ = checkpoint.load(a.ckpt)
    c = model.c
    sparse = [i for i in range(c.n_layers) if i not in (0, c.n_layers // 2)]
    print(f"{a.ckpt}: {a.length} tokens, {a.n} episodes per depth, sparse layers {sparse}, MagicPIG K={a.K} L={a.L}")
    print("depth | layer: mean best-head mass on the needle / mean P(sampled) of its top needle key")
    for depth in [float(d) for d in a.depths.split(",")]:
        rng = np.random.default_rng([11, int(depth * 1000), a.length])
        stats = {li: [] for li in sparse}
        for _ in range(a.n):
            ids, w, value = maker.single(rng, a.length, 0.0, depth=depth, strict=True)
            qpos = int(np.argmax(np.asarray(w) > 0))  # the answer's '▁': its output predicts digit 1
            digits = [t for t in maker.answer_tokens(value) if sp.id_to_piece(t).strip("▁").isdigit()]
            at = [i for i in range(qpos - 40) if ids[i:i + len(digits)] == digits]
            needle = list(range(at[0] - 12, at[0] + len(digits)))  # "... numbers for KEY is: DIGITS"
            x = torch.tensor([ids[:qpos + 1]])
            T = x.shape[1]
            cos_, sin_ = rope_tables(c.head_dim, torch.arange(T), c.rope_theta)
            h = model.token_embd(x)
            for li, b in enumerate(model.blocks):
                if li in stats:
                    q, k, _ = b.qkv(h, cos_, sin_)
                    best = (-1.0, 0.0)
                    for hq in range(c.n_heads):
                        kk, qq = k[0, hq // (c.n_heads // c.n_kv_heads)], q[0, hq, qpos]
                        att = torch.softmax(kk @ qq / math.sqrt(c.head_dim), 0)
                        mass = att[needle].sum().item()
                        if mass > best[0]:
                            j = needle[int(torch.argmax(att[needle]))]
                            cs = F.cosine_similarity((kk[j] - kk.mean(0))[None], qq[None]).item()
                            best = (mass, sample_probability(cs, a.K, a.L))
                    stats[li].append(best)
                h = b(h, cos_, sin_)
        print(f"{depth:.2f} | " + " | ".join(
            f"L{li}: {np.mean([s[0] for s in v]):.2f} / {np.mean([s[1] for s in v]):.2f}" for li, v in stats.items()))


if __name__ == "__main__":
    main()

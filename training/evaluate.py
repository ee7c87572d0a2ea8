#!/usr/bin/env python3
"""Evaluate a checkpoint (.pt) or an exported GGUF: needle retrieval on HELD-OUT key words and
held-out haystack text, and held-out perplexity per corpus.

  python3 training/evaluate.py --ckpt CKPT --lengths 128,256,512 [--depths 10] [--n 10]
      [--multikey] [--ppl-tokens 16384] [--greedy] [--json out.json]

Needle accuracy = fraction of exact 7-digit answers. Default scoring is teacher-forced: a
sample counts iff the argmax at every answer token ('▁' + 7 digits) equals it, which is exactly
the condition for greedy decoding to emit the answer (same model, same prefix). --greedy
instead generates 10 tokens and compares the first 7-digit number in the text (slower; a check
of the equivalence). Depths: needle position as a fraction of the haystack, `--depths K` gives
K evenly spaced values from 0 to 1.
"""
import argparse, json, math, os, re, sys, time
import common  # first: it runs this script in the training environment (common.py)
import numpy as np
import torch
import torch.nn.functional as F
import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint, data
from train import needle_accuracy


@torch.no_grad()
def greedy_accuracy(model, sp, maker, seed, seq_len, depth, n, n_distractors=0):
    rng = np.random.default_rng([seed, 999_999, seq_len])
    ok = 0
    for _ in range(n):
        ids, m, value = maker.single(rng, seq_len, 0.0, n_distractors=n_distractors, depth=depth, strict=True)
        m = np.asarray(m)
        prompt = ids[:int(np.argmax(m > 0))]  # everything before the first answer token
        out = model.greedy(torch.tensor([prompt]), 10)[0].tolist()
        got = re.search(r"\d{7}", sp.decode(out))
        ok += bool(got and got.group(0) == value)
    return ok / n


@torch.no_grad()
def perplexity(model, sp, name, seq_len, max_tokens):
    toks = np.load(common.tokens_path(name, "heldout"))[:max_tokens]
    nll, cnt = 0.0, 0
    for s in range(0, len(toks) - 1, seq_len):
        w = torch.tensor([[sp.bos_id()] + [int(t) for t in toks[s:s + seq_len]]])
        if w.shape[1] < 2:
            break
        logits = model(w[:, :-1])
        nll += F.cross_entropy(logits[0], w[0, 1:], reduction="sum").item()
        cnt += w.shape[1] - 1
    return math.exp(nll / cnt), cnt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--lengths", default="128,256,512")
    ap.add_argument("--depths", type=int, default=10)
    ap.add_argument("--n", type=int, default=10, help="samples per (length, depth) cell")
    ap.add_argument("--multikey", action="store_true", help="also 3-distractor multi-key retrieval")
    ap.add_argument("--greedy", action="store_true")
    ap.add_argument("--ppl-tokens", type=int, default=16384, help="held-out tokens per corpus (0: skip)")
    ap.add_argument("--ppl-seq-len", type=int, default=512)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    sp = spm.SentencePieceProcessor(model_file=common.tokenizer_model())
    model, info = checkpoint.load(a.ckpt)
    maker = data.EpisodeMaker(sp, "heldout")
    depths = list(np.linspace(0, 1, a.depths))
    res = {"ckpt": a.ckpt, "step": info["step"], "tokens": info["tokens"], "train_seconds": info["elapsed"], "needle": {}, "multikey": {}, "ppl": {}}
    if info["step"] is not None:
        print(f"checkpoint step {info['step']}, {info['tokens']} tokens, {info['elapsed']/60:.1f} min of training")
    for L in [int(x) for x in a.lengths.split(",")]:
        kinds = [("needle", 0)] + ([("multikey", 3)] if a.multikey else [])
        for kind, nd in kinds:
            t = time.time()
            per_depth = []
            try:
                for d in depths:
                    if a.greedy:
                        acc = greedy_accuracy(model, sp, maker, a.seed, L, d, a.n, nd)
                    else:
                        acc = needle_accuracy(model, maker, a.seed, L, a.n, depths=[d], n_distractors=nd)
                    per_depth.append(acc)
            except ValueError as err:
                print(f"{kind:8s} len {L:5d}: n/a ({err})")
                continue
            res[kind][L] = {"mean": float(np.mean(per_depth)), "per_depth": per_depth}
            print(f"{kind:8s} len {L:5d}: {np.mean(per_depth)*100:5.1f}% exact  (per depth: "
                  + " ".join(f"{x*100:.0f}" for x in per_depth) + f")  [{time.time()-t:.0f}s, n={a.n}/depth]", flush=True)
    if a.ppl_tokens:
        for name in common.CORPORA:
            ppl, cnt = perplexity(model, sp, name, a.ppl_seq_len, a.ppl_tokens)
            res["ppl"][name] = {"ppl": ppl, "tokens": cnt}
            print(f"held-out perplexity {name:9s}: {ppl:8.2f}  ({cnt} tokens, windows of {a.ppl_seq_len})", flush=True)
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Probe whether key binding can form: train a checkpoint (or a fresh model) on associative
recall alone (`kvrecall`, no haystack) at one short length, and print, every 100 steps, the
held-out exact-answer and first-digit rates per question. The first digit is the token that
needs the key (later digits can be copied from the chosen needle); chance is about 1/needles.

  python3 training/probe_binding.py CKPT|fresh OUT.pt [--lr 1e-3] [--seq-len 128]
      [--batch 32] [--minutes 20] [--one-token] [--threads 1]
  python3 training/probe_binding.py CKPT.pt|MODEL.gguf --eval [--n 128]
      (measure only: the three settings of training/README.md's recall tables — one-token keys
      at 128 and 192 tokens, word keys at 192)

A side experiment, not a stage: it starts a new AdamW (the checkpoint's moments are not
loaded) and holds the rate constant after 20 warm-up steps. Results: training/README.md
"Experiments, eleventh session".
"""
import argparse, os, sys, time
import common  # first: it runs this script in the training environment (common.py)
import numpy as np, sentencepiece as spm, torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint, data
from model import Config, Llama
from train import weighted_loss


def recall_rates(model, maker, seq_len, one_token, n=64):
    """(exact, first digit, questions) over n held-out episodes, teacher-forced argmax."""
    model.eval()
    rng = np.random.default_rng(123)
    xs, ws = zip(*(maker.kvrecall(rng, seq_len, 0.0, one_token=one_token) for _ in range(n)))
    x, w = torch.tensor(xs), torch.tensor(ws)[:, 1:]
    with torch.no_grad():
        right = model(x[:, :-1]).argmax(-1) == x[:, 1:]
    model.train()
    exact = first = total = 0
    for b in range(n):
        pos = torch.nonzero(w[b] == 1.0).flatten().tolist()
        spans = [[p] for p in pos[:1]]
        for p in pos[1:]:
            (spans[-1].append(p) if p == spans[-1][-1] + 1 else spans.append([p]))
        for s in spans:
            if len(s) < 8:  # an answer cut by the sequence end
                continue
            total += 1
            exact += bool(right[b, s[:8]].all()); first += bool(right[b, s[1]])
    return exact / max(1, total), first / max(1, total), total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("init"); ap.add_argument("out", nargs="?")
    ap.add_argument("--eval", action="store_true", help="only print the held-out recall rates of INIT")
    ap.add_argument("--n", type=int, default=128, help="held-out episodes per setting (with --eval)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--one-token", action="store_true", help="one-token keys (kvrecall1)")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads); torch.manual_seed(0)
    sp = spm.SentencePieceProcessor(model_file=common.tokenizer_model())
    model = Llama(Config(vocab_size=sp.vocab_size())) if a.init == "fresh" else checkpoint.load(a.init)[0]
    if a.eval:
        held = data.EpisodeMaker(sp, "heldout")
        for seq_len, one_token in ((128, True), (192, True), (192, False)):
            e, f, n = recall_rates(model, held, seq_len, one_token, a.n)
            print(f"{'one-token' if one_token else 'word'} keys, {seq_len} tokens: exact {e:.3f} "
                  f"first digit {f:.3f} ({n} questions)", flush=True)
        return
    if a.out is None:
        ap.error("OUT is required unless --eval")
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)
    train, held = data.EpisodeMaker(sp, "train"), data.EpisodeMaker(sp, "heldout")
    rng, t0, step = np.random.default_rng(7), time.time(), 0
    while time.time() - t0 < a.minutes * 60:
        xs, ws = zip(*(train.kvrecall(rng, a.seq_len, 0.0, one_token=a.one_token) for _ in range(a.batch)))
        x, w = torch.tensor(xs), torch.tensor(ws)[:, 1:]
        for g in opt.param_groups:
            g["lr"] = a.lr * min(1.0, (step + 1) / 20)
        loss = weighted_loss(model(x[:, :-1]), x[:, 1:], w, 1.0, 0.0)[0]  # answers only, as kvrecall's weights say
        opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
        step += 1
        if step % 100 == 0:
            e, f, n = recall_rates(model, held, a.seq_len, a.one_token)
            print(f"step {step} {time.time() - t0:.0f}s answer loss {loss.item():.3f} exact {e:.3f} "
                  f"first digit {f:.3f} ({n} questions)", flush=True)
    torch.save({"model": model.state_dict(), "config": model.c.to_dict(), "step": step}, a.out)


if __name__ == "__main__":
    main()

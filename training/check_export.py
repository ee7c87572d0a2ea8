#!/usr/bin/env python3
"""Check an exported GGUF against the PyTorch model it came from, through our engine:
  1. `magicpig tokenize` gives the same ids as SentencePiece ([BOS] + encode(prompt));
  2. `magicpig run --temp 0` (dense attention, f16 KV cache) continues the prompt with the same
     text as PyTorch's greedy decoding of the same ids (weights rounded to f16 as in the file);
  3. when the peer is built (scripts/build_peer.sh), llama.cpp's `llama-simple` (greedy) too.

  python3 training/check_export.py --ckpt CKPT --gguf FILE [--magicpig build/bin/magicpig] [-n 32]
Exit status 0 when every prompt matches.
"""
import argparse, os, subprocess, sys
import common  # first: it runs this script in the training environment (common.py)
import torch
import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint

PROMPTS = [
    "In the beginning God created the heaven and the earth. And the earth was",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune,",
    "Call me Ishmael. Some years ago",
    "One of the special magic numbers for lantern is: 4172093. The grass was green and the sky was blue. "
    "What is the special magic number for lantern mentioned in the provided text? "
    "The special magic number for lantern mentioned in the provided text is:",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--magicpig", default="build/bin/magicpig")
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--llama-simple", default=os.path.join(common.CACHE, "llama.cpp", "build", "bin", "llama-simple"),
                    help="llama.cpp's llama-simple for a third opinion (skipped if absent)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    sp = spm.SentencePieceProcessor(model_file=common.tokenizer_model())
    # the file stores matrices as f16: compare against exactly those weights
    model, _ = checkpoint.load(a.ckpt, f16_matrices=True)
    failures = 0
    for p in PROMPTS:
        ids = [sp.bos_id()] + sp.encode(p)
        r = subprocess.run([a.magicpig, "tokenize", "-m", a.gguf, "-p", p], capture_output=True, text=True, check=True)
        mp_ids = [int(t) for t in r.stdout.split()]
        if mp_ids != ids:
            print(f"TOKENIZER MISMATCH for {p!r}:\n  spm      {ids}\n  magicpig {mp_ids}")
            failures += 1
            continue
        gen = []
        with torch.no_grad():
            x = torch.tensor([ids])
            for _ in range(a.n):
                t = int(model(x)[0, -1].argmax())
                if t == sp.eos_id():
                    break
                gen.append(t)
                x = torch.cat([x, torch.tensor([[t]])], dim=1)
        ref = sp.decode(ids[1:] + gen)[len(sp.decode(ids[1:])):]
        r = subprocess.run([a.magicpig, "run", "-m", a.gguf, "-p", p, "-n", str(a.n), "--temp", "0",
                            "-ctk", "f16", "-t", str(a.threads)], capture_output=True, text=True, check=True)
        out = r.stdout.rstrip("\n") if not ref.endswith("\n") else r.stdout
        ok = out == ref
        failures += not ok
        print(f"{'OK  ' if ok else 'DIFF'} {p[:50]!r}...\n  torch:    {ref!r}\n  magicpig: {out!r}")
        if os.path.exists(a.llama_simple):
            r = subprocess.run([a.llama_simple, "-m", a.gguf, "-n", str(a.n), p], capture_output=True, text=True, check=True)
            peer = r.stdout.split(p, 1)[1] if p in r.stdout else r.stdout
            peer = peer.rstrip("\n") if not ref.endswith("\n") else peer
            ok2 = peer == ref
            failures += not ok2
            print(f"  llama.cpp {peer!r} {'OK' if ok2 else 'DIFF'}")
    print("all prompts match" if failures == 0 else f"{failures} prompt(s) differ")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

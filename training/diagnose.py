#!/usr/bin/env python3
"""Per-episode-kind diagnosis of a checkpoint on HELD-OUT text and keys: answer loss, answer
token accuracy and exact-answer rate for each kind at one sequence length.

  python3 training/diagnose.py CKPT.pt|MODEL.gguf [SEQ_LEN=128]

Shows which skill a stage gained or lost (e.g. run5: randcopy_gap64 at chance while the
fixed-distance copy looked solved; the needle skill lost after hay256).
"""
import os, sys
import common  # first: it runs this script in the training environment (common.py)
import torch, numpy as np, sentencepiece as spm
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint, data
import torch.nn.functional as F
torch.set_num_threads(1)
m, info = checkpoint.load(sys.argv[1])
sp=spm.SentencePieceProcessor(model_file=common.tokenizer_model())
mk=data.EpisodeMaker(sp,"heldout")
L=int(sys.argv[2]) if len(sys.argv)>2 else 128
print("step", info["step"] if info["step"] is not None else "? (GGUF)")
for kind in ["randcopy_gap64","digitcopy","single","multikey","multiquery"]:
    x,w=mk.batch(7,0,16,L,{kind:1},0.0)
    x=torch.from_numpy(x); w=torch.from_numpy(w)[:,1:]
    with torch.no_grad(): lg=m(x[:,:-1])
    nll=F.cross_entropy(lg.flatten(0,1),x[:,1:].flatten(),reduction="none").view(w.shape)
    a=w>0; acc=(lg.argmax(-1)==x[:,1:])[a].float().mean().item()
    # exact-answer rate per sequence
    has=a.any(1)  # episodes cut by the length (e.g. 4 needles in 128 tokens) have no answer
    ok=(((lg.argmax(-1)==x[:,1:])|(~a)).all(1))[has].float().mean().item() if has.any() else float('nan')
    print(f"{kind:16s} answer_loss {nll[a].mean().item():.3f} token_acc {acc:.3f} exact_seq {ok:.3f}")

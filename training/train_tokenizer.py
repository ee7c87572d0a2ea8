#!/usr/bin/python3
"""Train the SentencePiece BPE vocabulary on the TRAINING split of every corpus, then tokenize
both splits into uint16 arrays for the data loader.

The settings make the vocabulary behave like Llama-2's under GGUF tokenizer.ggml.model=llama
(llama.cpp / magicpig SPM tokenizer): no normalization (identity), whitespace kept verbatim,
a dummy space prefix, byte fallback (newline and any unseen character become <0xNN>), and
digits split into single tokens (needle answers are then exactly 7 digit tokens).
Ids: <unk>=0, <s>=1, </s>=2, then 256 byte tokens, then BPE pieces.
"""
import argparse, os, re, subprocess, sys
import numpy as np
import common

ap = argparse.ArgumentParser()
ap.add_argument("--vocab-size", type=int, default=4096)
ap.add_argument("--force", action="store_true", help="retrain even if tokenizer.model exists")
args = ap.parse_args()

os.makedirs(os.path.join(common.WORK_DIR, "tokens"), exist_ok=True)
model_path = common.TOKENIZER_PREFIX + ".model"

if args.force or not os.path.exists(model_path):
    # spm_train reads one sentence per line and skips lines longer than max_sentence_length;
    # the SOTU addresses are one line each, so break long lines after sentence ends.
    inp = os.path.join(common.WORK_DIR, "spm_input.txt")
    with open(inp, "w", encoding="utf-8") as out:
        for name in common.CORPORA:
            for line in open(common.split_path(name, "train"), encoding="utf-8"):
                line = line.rstrip("\n")
                if not line.strip():
                    continue
                for piece in (re.split(r"(?<=[.!?]) ", line) if len(line) > 2000 else [line]):
                    out.write(piece + "\n")
    cmd = ["spm_train", f"--input={inp}", f"--model_prefix={common.TOKENIZER_PREFIX}",
           "--model_type=bpe", f"--vocab_size={args.vocab_size}", "--byte_fallback=true",
           "--split_digits=true", "--normalization_rule_name=identity",
           "--remove_extra_whitespaces=false", "--add_dummy_prefix=true",
           "--character_coverage=0.9995", "--max_sentence_length=8192",
           "--input_sentence_size=2000000", "--shuffle_input_sentence=true", "--seed_sentencepiece_size=1000000",
           "--unk_id=0", "--bos_id=1", "--eos_id=2", "--pad_id=-1",
           "--num_threads=1", "--minloglevel=1"]
    subprocess.run(cmd, check=True)
    os.remove(inp)
    print("tokenizer:", model_path)

import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=model_path)
assert sp.vocab_size() < 65536
for name in common.CORPORA:
    for part in ("train", "heldout"):
        out = common.tokens_path(name, part)
        if os.path.exists(out) and os.path.getmtime(out) > os.path.getmtime(model_path) and not args.force:
            continue
        text = open(common.split_path(name, part), encoding="utf-8").read()
        # encode paragraph by paragraph (fast, bounded memory); the blank line between
        # paragraphs is kept as byte tokens so documents read like the original text
        ids = []
        nl2 = sp.encode("\n\n")  # with dummy prefix: ['▁', <0x0A>, <0x0A>]
        nl2 = [t for t in nl2 if sp.id_to_piece(t) != "▁"]
        for para in text.split("\n\n"):
            if para.strip():
                ids.extend(sp.encode(para))
                ids.extend(nl2)
        arr = np.asarray(ids, dtype=np.uint16)
        np.save(out, arr)
        print(f"{name}.{part}: {len(text)} chars -> {len(arr)} tokens ({len(text)/max(1,len(arr)):.2f} chars/token)")

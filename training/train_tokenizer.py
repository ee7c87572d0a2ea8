#!/usr/bin/env python3
"""The SentencePiece BPE vocabulary ($CACHE/training/tokenizer.model), then both splits of every
corpus tokenized into uint16 arrays for the data loader.

By default the vocabulary is the shipped model's (models/default.gguf), which every committed
checkpoint and shipped model uses: spm_train on the corpora's TRAINING split gives the model
file its settings, then its pieces are replaced by the GGUF's (ids, pieces, scores, types).
That vocabulary was trained on five corpora, two of which can no longer be fetched, so training
one now (--train) gives other pieces (README.md, "Corpora"); use --train only for a model that
starts from scratch.

The settings make the vocabulary behave like Llama-2's under GGUF tokenizer.ggml.model=llama
(llama.cpp / magicpig SPM tokenizer): no normalization (identity), whitespace kept verbatim,
a dummy space prefix, byte fallback (newline and any unseen character become <0xNN>), and
digits split into single tokens (needle answers are then exactly 7 digit tokens).
Ids: <unk>=0, <s>=1, </s>=2, then 256 byte tokens, then BPE pieces.
"""
import argparse, os, re, struct, subprocess, sys
import common  # first: it runs this script in the training environment (common.py)
import numpy as np
import sentencepiece as spm
import gguf_import

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--vocab-from", default=os.path.join(REPO, "models", "default.gguf"), metavar="GGUF",
                help="take the vocabulary of this GGUF (written by export_gguf.py); default: the shipped model's")
ap.add_argument("--train", action="store_true", help="train a new vocabulary on the corpora instead")
ap.add_argument("--vocab-size", type=int, default=4096, help="with --train")
ap.add_argument("--force", action="store_true", help="remake tokenizer.model even if it exists")
args = ap.parse_args()

os.makedirs(os.path.join(common.WORK_DIR, "tokens"), exist_ok=True)
model_path = common.TOKENIZER_PREFIX + ".model"


def spm_train(prefix, vocab_size):
    # spm_train reads one sentence per line and skips lines longer than max_sentence_length,
    # so break long lines (a whole paragraph or document on one line) after sentence ends.
    inp = os.path.join(common.WORK_DIR, "spm_input.txt")
    with open(inp, "w", encoding="utf-8") as out:
        for name in common.CORPORA:
            for line in open(common.split_path(name, "train"), encoding="utf-8"):
                line = line.rstrip("\n")
                if not line.strip():
                    continue
                for piece in (re.split(r"(?<=[.!?]) ", line) if len(line) > 2000 else [line]):
                    out.write(piece + "\n")
    cmd = ["spm_train", f"--input={inp}", f"--model_prefix={prefix}",
           "--model_type=bpe", f"--vocab_size={vocab_size}", "--byte_fallback=true",
           "--split_digits=true", "--normalization_rule_name=identity",
           "--remove_extra_whitespaces=false", "--add_dummy_prefix=true",
           "--character_coverage=0.9995", "--max_sentence_length=8192",
           "--input_sentence_size=2000000", "--shuffle_input_sentence=true", "--seed_sentencepiece_size=1000000",
           "--unk_id=0", "--bos_id=1", "--eos_id=2", "--pad_id=-1",
           "--num_threads=1", "--minloglevel=1"]
    subprocess.run(cmd, check=True)
    os.remove(inp)


def _varint(b, o):
    v = s = 0
    while True:
        c = b[o]; o += 1
        v |= (c & 0x7F) << s; s += 7
        if c < 0x80:
            return v, o


def _put_varint(v):
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)


def with_pieces(model_bytes, pieces, scores, types):
    """A SentencePiece ModelProto with its pieces (field 1) replaced; the specs (fields 2, 3, ...) kept."""
    kept, o = bytearray(), 0
    while o < len(model_bytes):
        start = o
        key, o = _varint(model_bytes, o)
        wire = key & 7
        if wire == 0:
            _, o = _varint(model_bytes, o)
        elif wire == 1:
            o += 8
        elif wire == 2:
            n, o = _varint(model_bytes, o); o += n
        elif wire == 5:
            o += 4
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        if key >> 3 != 1:
            kept += model_bytes[start:o]
    out = bytearray()
    for p, sc, ty in zip(pieces, scores, types):
        pb = p.encode("utf-8")
        msg = b"\x0a" + _put_varint(len(pb)) + pb + b"\x15" + struct.pack("<f", sc) + b"\x18" + _put_varint(ty)
        out += b"\x0a" + _put_varint(len(msg)) + msg
    return bytes(out + kept)


def pieces_of(path):
    sp = spm.SentencePieceProcessor(model_file=path)
    return [sp.id_to_piece(i) for i in range(sp.vocab_size())]


if args.train:
    if args.force or not os.path.exists(model_path):
        spm_train(common.TOKENIZER_PREFIX, args.vocab_size)
        print("tokenizer (trained on", ", ".join(common.CORPORA) + "):", model_path)
else:
    if not os.path.exists(args.vocab_from):
        raise SystemExit(f"{args.vocab_from} not found: pass --vocab-from with a GGUF of export_gguf.py (the "
                         "shipped model and training/checkpoints/*.gguf share one vocabulary; `git show "
                         "COMMIT:models/default.gguf > FILE` recovers a removed one), or --train for a new vocabulary")
    pieces, scores, types = gguf_import.read_vocab(args.vocab_from)
    if args.force or not os.path.exists(model_path) or pieces_of(model_path) != pieces:
        template = os.path.join(common.WORK_DIR, "tokenizer_settings")
        spm_train(template, len(pieces))  # for the model file's settings only
        data = with_pieces(open(template + ".model", "rb").read(), pieces, scores, types)
        for ext in (".model", ".vocab"):
            os.remove(template + ext)
        open(model_path + ".tmp", "wb").write(data)
        os.replace(model_path + ".tmp", model_path)
        with open(common.TOKENIZER_PREFIX + ".vocab", "w", encoding="utf-8") as f:
            f.writelines(f"{p}\t{sc:g}\n" for p, sc in zip(pieces, scores))
        if pieces_of(model_path) != pieces:
            raise SystemExit(f"{model_path}: the vocabulary does not read back as {args.vocab_from}'s")
        print(f"tokenizer (the vocabulary of {args.vocab_from}):", model_path)

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

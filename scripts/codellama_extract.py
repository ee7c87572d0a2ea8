#!/usr/bin/python3
"""Checks and unpacks the CodeLlama-13B ZIP fetched by scripts/fetch_codellama.sh.

  codellama_extract.py --zip Z --list                 # check the member list, print it
  codellama_extract.py --zip Z --out DIR [--keep-zip]  # shards -> DIR/*.safetensors

Safety (see docs/codellama.md):
 - the central directory must list only known member names under one top folder (no
   absolute paths, no '..', no links), with the required ones present; anything else aborts;
 - the pickled .bin shards are loaded only with torch.load(weights_only=True) (torch 1.13's
   restricted unpickler: tensors, storages and plain containers; any other global aborts),
   and the result must be a flat dict of str -> bf16/f16/f32 tensors;
 - one shard at a time: stream it out of the ZIP (CRC-32 checked), convert it to a
   .safetensors file, delete the .bin. Unless --keep-zip, the ZIP is consumed from its end:
   shards are taken in descending offset order and the ZIP is truncated to the start of each
   shard once its safetensors file is complete, so the disk peak is ZIP + one shard instead
   of ZIP + whole model. The member table is kept in DIR/zip-members.json so an interrupted
   run can resume after the central directory is gone.
Must run under Debian's /usr/bin/python3 with python3-torch (1.13).
"""
import argparse, json, os, re, struct, sys, zipfile, zlib

TOP = "codellama/"
OPTIONAL = {"generation_config.json", "gitattributes", ".gitattributes", "LICENSE", "LICENSE.txt",
            "README.md", "USE_POLICY.md", "model.safetensors.index.json", "pytorch_model.bin.index.json",
            "tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}
SHARD = re.compile(r"pytorch_model-(\d{5})-of-(\d{5})\.bin")
REQUIRED = {"config.json"}
ST_DTYPES = {"torch.bfloat16": "BF16", "torch.float16": "F16", "torch.float32": "F32"}


def die(msg):
    sys.exit("codellama_extract: " + msg)


def check_members(zf):
    """Returns [{name, offset, method, csize, usize, crc}] or aborts on anything unexpected."""
    members, shards = [], []
    for i in zf.infolist():
        n = i.filename
        if n == TOP:
            continue
        if not n.startswith(TOP) or "/" in n[len(TOP):] or n.endswith("/") or ".." in n or "\\" in n:
            die(f"unexpected member '{n}' (everything must be a plain file directly under {TOP})")
        base = n[len(TOP):]
        if (i.external_attr >> 16) & 0o170000 not in (0, 0o100000):
            die(f"member '{n}' is not a regular file (mode {oct(i.external_attr >> 16)})")
        m = SHARD.fullmatch(base)
        if m:
            shards.append((int(m.group(1)), int(m.group(2)), base))
        elif base not in OPTIONAL and base not in REQUIRED:
            die(f"unexpected member '{n}'")
        if i.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            die(f"member '{n}' uses compression method {i.compress_type}")
        members.append(dict(name=base, offset=i.header_offset, method=i.compress_type,
                            csize=i.compress_size, usize=i.file_size, crc=i.CRC))
    names = {m["name"] for m in members}
    if len(names) != len(members):
        die("duplicate member names")
    missing = REQUIRED - names
    if missing:
        die(f"missing members: {sorted(missing)}")
    if not shards:
        die("no pytorch_model-*.bin shards")
    total = shards[0][1]
    if sorted(s[0] for s in shards) != list(range(1, total + 1)) or any(s[1] != total for s in shards):
        die(f"shards do not form 1..{total}: {sorted(s[2] for s in shards)}")
    return members


def load_holes(zpath):
    """Byte ranges that fetch_codellama.sh --fill-gaps zero-filled (chunks in no version)."""
    path = zpath + ".holes"
    if not os.path.exists(path):
        return []
    return [(int(a), int(b), n) for a, b, n in (l.split("\t") for l in open(path).read().splitlines() if l)]


def damaged(members, holes):
    """Names of members whose bytes (up to the next member) overlap a hole."""
    order = sorted(members, key=lambda m: m["offset"])
    out = {}
    for i, m in enumerate(order):
        end = order[i + 1]["offset"] if i + 1 < len(order) else m["offset"] + m["csize"] + 65536
        hit = [n for a, b, n in holes if a < end and b > m["offset"]]
        if hit:
            out[m["name"]] = hit
    return out


def local_data_offset(f, m):
    f.seek(m["offset"])
    h = f.read(30)
    sig, _, _, _, _, _, _, _, _, nl, el = struct.unpack("<IHHHHHIIIHH", h)
    if sig != 0x04034B50:
        die(f"bad local header for {m['name']} at {m['offset']}")
    name = f.read(nl).decode("utf-8", "replace")
    if name != TOP + m["name"]:
        die(f"local header name '{name}' != central directory name '{m['name']}'")
    return m["offset"] + 30 + nl + el


def extract_member(zpath, m, dest):
    """Streams one member to dest (via dest.part), checking size and CRC-32."""
    with open(zpath, "rb") as f, open(dest + ".part", "wb") as out:
        f.seek(local_data_offset(f, m))
        left, crc, n = m["csize"], 0, 0
        dec = zlib.decompressobj(-15) if m["method"] == zipfile.ZIP_DEFLATED else None
        while left:
            buf = f.read(min(left, 64 << 20))
            if not buf:
                die(f"{m['name']}: archive ends early")
            left -= len(buf)
            data = dec.decompress(buf) if dec else buf
            crc, n = zlib.crc32(data, crc), n + len(data)
            out.write(data)
        if dec:
            data = dec.flush()
            crc, n = zlib.crc32(data, crc), n + len(data)
            out.write(data)
    if n != m["usize"] or crc != m["crc"]:
        die(f"{m['name']}: size {n} / crc {crc:08x}, central directory says {m['usize']} / {m['crc']:08x}")
    os.replace(dest + ".part", dest)


def write_safetensors(sd, path):
    """Writes the safetensors format by hand: u64 LE header length, JSON header, raw data."""
    import torch
    header, offset, order = {}, 0, []
    for name, t in sd.items():
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": ST_DTYPES[str(t.dtype)], "shape": list(t.shape),
                        "data_offsets": [offset, offset + nbytes]}
        order.append(name)
        offset += nbytes
    header["__metadata__"] = {"format": "pt", "source": "codellama npm ZIP, torch.load(weights_only=True)"}
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)  # data starts 8-byte aligned, as the safetensors library does
    with open(path + ".part", "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for name in order:
            t = sd[name].contiguous()
            raw = t.view(torch.int16) if t.dtype in (torch.bfloat16, torch.float16) else t
            f.write(memoryview(raw.numpy()).cast("B"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".part", path)
    return {n: header[n] for n in order}


def load_shard(path):
    import torch
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # the restricted unpickler raises UnpicklingError on any other global
        die(f"{path}: refused by the restricted loader: {e}")
    if not isinstance(sd, dict):
        die(f"{path}: top-level object is {type(sd).__name__}, not a dict")
    for k, v in sd.items():
        if not isinstance(k, str) or type(v) is not torch.Tensor:
            die(f"{path}: entry {k!r} is {type(v).__name__}, not a tensor")
        if str(v.dtype) not in ST_DTYPES:
            die(f"{path}: tensor {k} has dtype {v.dtype}")
    return sd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zip", required=True)
    ap.add_argument("--out")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep-zip", action="store_true")
    a = ap.parse_args()

    table = os.path.join(a.out, "zip-members.json") if a.out else None
    if table and os.path.exists(table):
        members = json.load(open(table))  # resuming: the central directory may be gone
    else:
        with zipfile.ZipFile(a.zip) as zf:
            members = check_members(zf)
    bad = damaged(members, load_holes(a.zip))
    if a.list:
        for m in members:
            note = f"  DAMAGED (missing chunks {' '.join(bad[m['name']])})" if m["name"] in bad else ""
            print(f"{m['usize']:>14} {m['csize']:>14}  {m['name']}{note}")
        print(f"codellama_extract: {len(members)} members, all expected" +
              (f"; {len(bad)} damaged by missing chunks" if bad else ""))
        return
    if not a.out:
        die("give --out DIR or --list")
    os.makedirs(a.out, exist_ok=True)
    if not os.path.exists(table):
        json.dump(members, open(table + ".part", "w"), indent=1)
        os.replace(table + ".part", table)
        if not a.keep_zip:
            open(a.zip + ".consumed", "w").write("truncated by codellama_extract.py; refetch to restore\n")
    for m in members:
        if m["name"] in bad:
            print(f"codellama_extract: skipping {m['name']}: its bytes overlap missing chunks {bad[m['name']]}", flush=True)
            continue
        if not SHARD.fullmatch(m["name"]):
            dest = os.path.join(a.out, "original-" + m["name"] if m["name"].endswith("index.json") else m["name"])
            if not os.path.exists(dest):
                extract_member(a.zip, m, dest)
    shards = sorted((m for m in members if SHARD.fullmatch(m["name"])), key=lambda m: -m["offset"])
    import torch
    torch.set_num_threads(1)
    for m in shards:
        st = os.path.join(a.out, m["name"][:-len(".bin")] + ".safetensors")
        if m["name"] in bad:
            pass
        elif not os.path.exists(st):
            binp = os.path.join(a.out, m["name"])
            if not os.path.exists(binp):
                print(f"codellama_extract: extracting {m['name']} ({m['usize'] / 1e9:.2f} GB)", flush=True)
                extract_member(a.zip, m, binp)
            print(f"codellama_extract: loading {m['name']} (weights_only)", flush=True)
            sd = load_shard(binp)
            info = write_safetensors(sd, st)
            del sd
            json.dump(info, open(st + ".tensors.json", "w"))
            os.remove(binp)
            print(f"codellama_extract: wrote {st} ({len(info)} tensors)", flush=True)
        if not a.keep_zip and os.path.exists(a.zip) and os.path.getsize(a.zip) > m["offset"]:
            os.truncate(a.zip, m["offset"])
    if not a.keep_zip and os.path.exists(a.zip):
        os.remove(a.zip)
    # Cross-check against the original index, if the archive had one.
    idx = os.path.join(a.out, "original-model.safetensors.index.json")
    names = {}
    if bad:
        open(os.path.join(a.out, "DAMAGED.txt"), "w").write("".join(f"{n}\t{' '.join(c)}\n" for n, c in bad.items()))
        die(f"incomplete: {sorted(bad)} could not be extracted (their bytes are in chunks no package version "
            f"holds); everything else is in {a.out}, the list in {a.out}/DAMAGED.txt")
    for m in shards:
        st = os.path.join(a.out, m["name"][:-len(".bin")] + ".safetensors")
        for n, h in json.load(open(st + ".tensors.json")).items():
            if n in names:
                die(f"tensor {n} is in two shards")
            names[n] = h["data_offsets"][1] - h["data_offsets"][0]
    if os.path.exists(idx):
        ix = json.load(open(idx))
        want = set(ix["weight_map"])
        if want != set(names):
            die(f"tensors differ from the index: missing {sorted(want - set(names))[:5]}, "
                f"extra {sorted(set(names) - want)[:5]}")
        total = ix.get("metadata", {}).get("total_size")
        if total is not None and total != sum(names.values()):
            die(f"total bytes {sum(names.values())} != index total_size {total}")
    print(f"codellama_extract: done, {len(names)} tensors, {sum(names.values()) / 1e9:.2f} GB in {a.out}")


if __name__ == "__main__":
    main()

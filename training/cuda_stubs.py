"""Stand-in CUDA libraries so that PyPI's Linux torch wheel runs on the CPU without its nvidia-* wheels.

PyPI has no CPU-only torch wheel for Linux x86_64: the one it serves is built with CUDA, and its
libraries (libtorch_cpu.so included) need libcudart, libcupti, cuBLAS, cuDNN, NCCL, ... at load
time, which come from ~2.1 GB of nvidia-* / cuda-toolkit wheels. A CPU run never calls them, but
the dynamic loader must still find every needed library, symbol version and symbol (Python loads
extension modules with RTLD_NOW). This script writes, for each needed library that is neither
part of torch nor a Debian system library, a small library with the same soname, the same
symbol versions and every symbol torch takes from it; each function returns an error code
(cudaGetDeviceCount says "no device"), so torch.cuda.is_available() is False and everything
else runs on the CPU. Loading torch calls only the kernel-registration functions (__cudaRegister*,
run by CUDA code at load time); test_pipeline.py calls cudaGetDeviceCount and cudaGetLastError
besides. The stubs go to site-packages/nvidia/cu13/lib, a directory that torch's own RUNPATH
searches (where the cuda-toolkit wheels would put the real libraries).

The real CUDA libraries of the machine's toolkit (if any) are not used on purpose: they must
match the wheel's CUDA build exactly (a CUDA 13.0 NCCL lacks symbols the 13.2-built torch needs).

  python training/cuda_stubs.py SITE_PACKAGES      (needs gcc, readelf and nm from binutils)
"""
import glob, os, re, subprocess, sys, tempfile

SYSTEM_DIRS = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib", "/usr/lib"]
ERROR = 100  # cudaErrorNoDevice; any non-zero value is an error status for the other libraries
STUB_DIR = os.path.join("nvidia", "cu13", "lib")


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run("readelf", "-d", path))


def version_files(path):
    """symbol version name -> file (soname) that must define it, from .gnu.version_r"""
    out, current = {}, None
    for line in run("readelf", "-V", "-W", path).splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"Name: (\S+)\s+Flags", line)
        if m and current:
            out[m.group(1)] = current
    return out


def dyn_symbols(path, undefined):
    """(name, version or None, type letter) of the dynamic symbol table"""
    flag = "--undefined-only" if undefined else "--defined-only"
    syms = []
    for line in run("nm", "-D", flag, path).splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        kind, sym = parts[-2], parts[-1]
        name, _, ver = sym.partition("@")
        syms.append((name, ver.lstrip("@") or None, kind))
    return syms


def system_lib(soname):
    for d in SYSTEM_DIRS:
        p = os.path.join(d, soname)
        if os.path.exists(p):
            return os.path.realpath(p)
    return None


def main():
    site = sys.argv[1]
    torch_dir = os.path.join(site, "torch")
    libs = sorted(glob.glob(os.path.join(torch_dir, "lib", "*.so*")) + glob.glob(os.path.join(torch_dir, "*.so")))
    if not libs:
        raise SystemExit(f"cuda_stubs: no torch libraries under {torch_dir}")
    own = {os.path.basename(p) for p in libs}

    stubs = {}        # soname -> {symbol: version or None}
    versions = {}     # soname -> set of version names it must define
    provided = set()  # symbols defined by torch, the system libraries it needs, and python
    system = {os.path.realpath(sys.executable)}
    per_lib = []
    for lib in libs:
        missing = []
        for so in needed(lib):
            if so in own:
                continue
            path = system_lib(so)
            if path:
                system.add(path)
            else:
                missing.append(so)
                stubs.setdefault(so, {}); versions.setdefault(so, set())
        per_lib.append((lib, missing))
        provided.update(name for name, _, _ in dyn_symbols(lib, undefined=False))
    for path in system:
        provided.update(name for name, _, _ in dyn_symbols(path, undefined=False))

    for lib, missing in per_lib:
        if not missing:
            continue
        vfile = version_files(lib)
        for name, ver, kind in dyn_symbols(lib, undefined=True):
            if kind in ("w", "v"):  # weak references may stay unresolved
                continue
            if ver is not None:
                so = vfile.get(ver)
                if so in stubs:
                    stubs[so][name] = ver
                    versions[so].add(ver)
            elif name not in provided:  # unversioned (NCCL, cuSPARSELt, cuFile, ...): any stub the
                # library needs is in its lookup scope; the one named like the symbol, for clarity
                match = [so for so in missing if name.lower().startswith(re.sub(r"^lib|\.so.*$", "", so).lower())]
                stubs[max(match, key=len) if match else missing[0]].setdefault(name, None)

    out_dir = os.path.join(site, STUB_DIR)
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for so, syms in sorted(stubs.items()):
            c = ["static const char msg[] = \"CUDA is not available (CPU-only torch, training/cuda_stubs.py)\";",
                 "static long handle;"]
            for i, (name, _) in enumerate(sorted(syms.items())):
                c.append(f"long s{i}(long *a) __asm__(\"{name}\");")
                if name == "__cudaRegisterFatBinary":  # a handle, passed back on unregistering
                    c.append(f"long s{i}(long *a) {{ (void)a; return (long)&handle; }}")
                elif name == "cudaGetDeviceCount":
                    c.append(f"long s{i}(long *a) {{ if (a) *(int *)a = 0; return {ERROR}; }}")
                elif re.search(r"(Error|Status)(String|Name)$", name):
                    c.append(f"long s{i}(long *a) {{ (void)a; return (long)msg; }}")
                else:
                    c.append(f"long s{i}(long *a) {{ (void)a; return {ERROR}; }}")
            src = os.path.join(tmp, "stub.c")
            open(src, "w").write("\n".join(c) + "\n")
            # every version node the wheel asks for; unversioned symbols go to the first one
            # (or are global without a version when the library has none)
            vers = sorted(versions[so])
            def node(names, local):
                return ("global: " + " ".join(f"\"{n}\";" for n in sorted(names)) if names else "") + \
                       (" local: *;" if local else "")
            lines = []
            for j, v in enumerate(vers):
                names = [n for n, sv in syms.items() if sv == v or (sv is None and j == 0)]
                lines.append(f"{v} {{ {node(names, j == 0)} }};")
            if not vers:
                lines.append(f"{{ {node(syms, True)} }};")
            vs = os.path.join(tmp, "stub.map")
            open(vs, "w").write("\n".join(lines) + "\n")
            subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-fno-builtin", "-w", "-o", os.path.join(out_dir, so),
                            f"-Wl,-soname,{so}", f"-Wl,--version-script={vs}", src], check=True)
            print(f"cuda_stubs: {so}: {len(syms)} symbols, versions {vers or '-'}")
    open(os.path.join(out_dir, "README"), "w").write(
        "Stand-ins for CUDA libraries, written by magicpig's training/cuda_stubs.py: CPU-only torch.\n")


if __name__ == "__main__":
    main()

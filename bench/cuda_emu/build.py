"""Build the reference set's CUDA kernels for the CPU emulator (emu.h): ops `torch.ops.emu.<op>`.

    python bench/cuda_emu/build.py [--out DIR] [--asan] [OP ...]

Copies generated_example/csrc to DIR (default build/cuda_emu) with every `k<<<cfg>>>(args)`
launch rewritten to an emulated launch, compiles the chosen ops' .cu files with g++ and links them
into DIR/emu_ops.so, which registers each op's CUDA function (the host code as written, launches
included) as the CPU kernel of `emu::<op>`, with the op's schema. With --asan, run Python with
LD_PRELOAD set to gcc's libasan (the command is printed). For instance:

    python bench/cuda_emu/build.py --asan
    LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 EMU_ORDER=reverse \
        python bench/gpu_kernel_check.py --emulate build/cuda_emu/emu_ops.so

A logic check, not a GPU: no timing, no memory model beyond barriers, float results within
rounding of the GPU's (the host has no fused multiply-add contraction).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
CSRC = HERE.parent.parent / "generated_example" / "csrc"
DEFAULT_OPS = [
    "vector_add",
    "matmul",
    "layer_norm",
    "layer_norm_backward",
    "rms_norm",
    "fused_add_rms_norm",
    "rotary_embedding",
]
# kernel-name<template args, one nesting level><<<config>>>(
_LAUNCH = re.compile(r"([A-Za-z_][\w:]*(?:<(?:[^<>;]|<[^<>;]*>)*>)?)\s*<<<(.*?)>>>\s*\(", re.S)


def rewrite_launches(text: str) -> str:
    """`k<<<cfg>>>(args)` -> `::emu::Launch(cfg).run("k", caller, [&] { k(args); })`: every
    emulated thread calls the kernel as CUDA would (template arguments deduced from the call)."""
    out, pos = [], 0
    for m in _LAUNCH.finditer(text):
        if m.start() < pos:
            continue
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        args = text[m.end() : i - 1]
        out.append(text[pos : m.start()])
        name = " ".join(m.group(1).split()).replace('"', "")
        body = f"[&] {{ {m.group(1)}({args}); }}"
        out.append(f'::emu::Launch({m.group(2)}).run("{name}", __PRETTY_FUNCTION__, {body})')
        pos = i
    out.append(text[pos:])
    return "".join(out)


def mirror(csrc: Path, out: Path) -> None:
    if (out / "csrc").exists():
        shutil.rmtree(out / "csrc")
    for path in csrc.rglob("*"):
        if path.is_dir():
            continue
        dest = out / "csrc" / path.relative_to(csrc)
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text()
        if path.suffix in (".cu", ".cuh"):
            # `static alignas(16) T x[n]` is not C++: the alignment goes first
            text = re.sub(r"__shared__\s+alignas\(([^)]*)\)", r"alignas(\1) __shared__", text)
            text = rewrite_launches(text)
        dest.write_text(text)


def registration(csrc: Path, ops: list[str]) -> str:
    defs = {}
    for line in (csrc / "registration.cpp").read_text().splitlines():
        m = re.match(r'\s*m\.def\("(\w+)(\(.*)"\);', line)
        if m:
            defs[m.group(1)] = m.group(1) + m.group(2)
    lines = ['#include "emu.h"']
    lines += [f'#include "csrc/{op}.h"' for op in ops]
    lines.append("STABLE_TORCH_LIBRARY(emu, m) {")
    lines += [f'  m.def("{defs[op]}");' for op in ops]
    lines.append("}")
    lines.append("STABLE_TORCH_LIBRARY_IMPL(emu, CPU, m) {")
    lines += [f'  m.impl("{op}", TORCH_BOX(&example::{op}_cuda));' for op in ops]
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="*", default=DEFAULT_OPS)
    parser.add_argument("--out", type=Path, default=HERE.parent.parent / "build" / "cuda_emu")
    parser.add_argument("--csrc", type=Path, default=CSRC, help="the kernels' csrc folder")
    parser.add_argument("--asan", action="store_true", help="AddressSanitizer (needs LD_PRELOAD)")
    args = parser.parse_args()
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    mirror(args.csrc.resolve(), out)
    for name in ("emu.h", "emu.cpp"):
        shutil.copy(HERE / name, out / name)
    (out / "registration.cpp").write_text(registration(args.csrc, args.ops))
    torch_dir = Path(torch.__file__).parent
    flags = [
        "g++", "-std=c++17", "-O1", "-g", "-fPIC", "-ffp-contract=off", "-fno-omit-frame-pointer",
        "-DUSE_CUDA", "-DTORCH_TARGET_VERSION=0x020a000000000000", "-D_GLIBCXX_USE_CXX11_ABI=1",
        "-Wno-unknown-pragmas", "-isystem", str(torch_dir / "include"),
        "-isystem", "/usr/local/cuda/include", "-include", str(out / "emu.h"), "-I", str(out),
    ]  # fmt: skip
    if args.asan:
        flags.append("-fsanitize=address")
    sources = [out / "emu.cpp", out / "registration.cpp"]
    sources += [out / "csrc" / "cuda" / f"{op}.cu" for op in args.ops]
    objects = [out / "obj" / (s.name + ".o") for s in sources]
    (out / "obj").mkdir(exist_ok=True)

    def compile_one(pair: tuple[Path, Path]) -> None:
        src, obj = pair
        cmd = [*flags, "-x", "c++", "-c", str(src), "-o", str(obj)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode:
            sys.exit(f"failed: {' '.join(cmd)}\n{result.stderr}")

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(compile_one, zip(sources, objects, strict=True)))
    lib = out / "emu_ops.so"
    link = ["g++", "-shared", "-o", str(lib), *map(str, objects), f"-L{torch_dir / 'lib'}"]
    link += ["-ltorch_cpu", "-lc10", f"-Wl,-rpath,{torch_dir / 'lib'}", "-Wl,--no-undefined"]
    if args.asan:
        link.append("-fsanitize=address")
    subprocess.run(link, check=True)
    print(lib)
    if args.asan:
        asan = subprocess.run(
            ["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True
        ).stdout.strip()
        print(f"run with: LD_PRELOAD={asan} ASAN_OPTIONS=detect_leaks=0 python ...")


if __name__ == "__main__":
    main()

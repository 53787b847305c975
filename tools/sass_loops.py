#!/usr/bin/env python3
"""The loop of a kernel that holds a given instruction, counted from its SASS (docs/CALIBRATION.md).

    nvcc -DCOMPCOLL_HAVE_CUDA -DCOMPCOLL_HAVE_NVCOMP -I<nvCOMP's include dir> -Ishared -O2 -DNDEBUG \\
        --generate-code=arch=compute_90,code=sm_90 -Xptxas -v -std=c++20 -x cu \\
        -c shared/codec/cuda/codec_cuda.cu -o /tmp/codec.o
    cuobjdump -sass /tmp/codec.o > /tmp/codec.sass
    tools/sass_loops.py /tmp/codec.sass --kernel 'decode_kernelILNS0_4KindE0E' --marker 0xffc

For each function whose mangled name contains --kernel (a substring), each innermost loop (a
backward branch and every instruction laid out between its target and it) that holds an
instruction containing --marker (the decoders' 0xffc, the index mask in bytes of a 4 KB
table: bf16's of three exponents a lookup in take_lane_exponents' loop, gauss-exp's and
entropy-exp's alike, gauss-exp's fp16's and fp32's of two elements in
take_lane_pairs_in_range's and take_lane_pairs'; 0x1ffe, the 8 KB decode table's, in the
element-by-element loops and the fallback of the others), one line each in address order, as laid out: its instruction
count, its shared-memory loads (LDS) and its special-register reads (S2R, S2UR). A loop that
holds a smaller such loop is not listed. Branched-around blocks inside a loop count too; the
line names the loop's head address so that it can be read.
cuobjdump comes with the CUDA toolkit, or with the nvidia-cuda-cuobjdump wheel. Exit 1 with one
line when the file holds no such function.
"""
import argparse
import re
import sys

INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);")
BRANCH = re.compile(r"\bBRA (0x[0-9a-f]+)")
CODE_FOR = re.compile(r"code for (sm_[0-9a-z]+)")


def functions(text):
    """(architecture, function text) of each function of a listing: its architecture is that
    of the last `code for sm_NN` line before it (None before any)."""
    parts = CODE_FOR.split(text)  # the text before the first line, then (arch, text) pairs
    for this_arch, section in [(None, parts[0])] + list(zip(parts[1::2], parts[2::2])):
        for f in re.split(r"\n\s*Function : ", section)[1:]:
            yield this_arch, f


def loops(text, kernel, marker, arch=None):
    found = []
    for this_arch, f in functions(text):
        name = f.split("\n", 1)[0].strip()
        if kernel not in name or (arch is not None and this_arch != arch):
            continue
        ins = [(int(m.group(1), 16), m.group(2).strip()) for m in INSN.finditer(f)]
        held = []
        for addr, op in ins:
            m = BRANCH.search(op)
            if not m or op.startswith("BRA.DIV"):
                continue
            head = int(m.group(1), 16)
            if head >= addr:
                continue
            body = [o for a, o in ins if head <= a <= addr]
            if any(marker in o for o in body):
                held.append((head, addr, body))
        inner = [x for x in held if not any(y is not x and x[0] <= y[0] and y[1] <= x[1] for y in held)]
        found.append((name, sorted(inner, key=lambda x: x[0])))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sass")
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--marker", required=True)
    ap.add_argument("--arch", help="only the code for this architecture (sm_90: H100, H200), where the file holds several")
    a = ap.parse_args()
    try:
        text = open(a.sass, encoding="utf-8", errors="replace").read()
    except OSError as e:
        sys.exit(f"sass_loops.py: {a.sass}: {e.strerror}")
    found = loops(text, a.kernel, a.marker, a.arch)
    if not found:
        where = f" in the code for {a.arch}" if a.arch else ""
        sys.exit(f"sass_loops.py: {a.sass}: no function whose name contains {a.kernel!r}{where}")
    for name, inner in found:
        if not inner:
            print(f"{name}: no loop holds {a.marker}")
        for head, _, body in inner:
            lds = sum(o.split()[0].lstrip("@!P0123456789T ").startswith("LDS") or " LDS" in o for o in body)
            s2r = sum(re.search(r"\bS2U?R\b", o) is not None for o in body)
            print(f"{name}: loop at {head:#x}: {len(body)} instructions, {lds} LDS, {s2r} S2R/S2UR")


if __name__ == "__main__":
    main()

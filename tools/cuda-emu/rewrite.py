#!/usr/bin/env python3
"""tools/cuda-emu/rewrite.py SRC_DIR OUT_DIR — copies the CUDA sources of SRC_DIR (*.cu, *.cuh)
into OUT_DIR with the two pieces of CUDA syntax a C++ compiler cannot take rewritten for the
emulator: a launch `kernel<<<grid, block, smem, stream>>>(args)` becomes
`::emu::launch_lambda([=]() { kernel(args); }, id, grid, block, smem, stream)` (the
arguments evaluated by each emulated thread, from values copied at the launch), and `extern __shared__ T name[];`
becomes a pointer to the launch's dynamic shared memory; each static `__shared__` declaration
is followed by a call that poisons the variable when a block first reaches it. Fails on a launch it cannot parse."""
import pathlib
import re
import sys

IDENT = re.compile(r"[A-Za-z0-9_:]")
SHARED = re.compile(r"(?<!extern )(__shared__[^;{}]*?(\w+)\s*(?:\[[^\]]*\]\s*)*;)")
EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w:]+)\s+(\w+)\s*\[\s*\]\s*;")


def kernel_start(text, end):
    """Index where the kernel expression ending just before `end` starts: identifiers, `::`
    and balanced template arguments."""
    j = end - 1
    while j >= 0:
        c = text[j]
        if IDENT.match(c):
            j -= 1
        elif c == ">":
            depth = 0
            while j >= 0:
                if text[j] == ">":
                    depth += 1
                elif text[j] == "<":
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            j -= 1
        else:
            break
    return j + 1


def split_top(text):
    """`text` split at its top-level commas."""
    parts, depth, start = [], 0, 0
    for j, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:j])
            start = j + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def closing_paren(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def rewrite(text, name):
    out = []
    pos = 0
    while True:
        i = text.find("<<<", pos)
        if i < 0:
            break
        k = text.find(">>>", i)
        start = kernel_start(text, i)
        kernel = text[start:i].strip()
        a = k + 3
        while a < len(text) and text[a].isspace():
            a += 1
        e = closing_paren(text, a) if a < len(text) and text[a] == "(" else -1
        if not kernel or k < 0 or e < 0:
            sys.exit(f"rewrite.py: {name}: a launch it cannot parse near offset {i}")
        config = split_top(text[i + 3:k])
        # The kernel's identity (for its dynamic shared memory limit) where the launch asks
        # for dynamic shared memory: such kernels are named by a pointer, not a template to
        # deduce.
        ident = f"::emu::id_of({kernel})" if len(config) >= 3 and config[2] != "0" else "nullptr"
        out.append(text[pos:start])
        out.append(f"::emu::launch_lambda([=]() {{ {kernel}{text[a:e + 1]}; }}, {ident}, {', '.join(config)})")
        pos = e + 1
    out.append(text[pos:])
    text = "".join(out)
    text = EXTERN_SHARED.sub(r"\1* const \2 = static_cast<\1*>(::emu::dynamic_shared());", text)
    # A static shared variable is poisoned when the first thread of a block reaches it.
    return SHARED.sub(r"\1 ::emu::shared_var(&\2, sizeof(\2));", text)


def main():
    src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    dst.mkdir(parents=True, exist_ok=True)
    for p in sorted(src.iterdir()):
        if p.suffix in (".cu", ".cuh"):
            (dst / p.name).write_text(rewrite(p.read_text(), p.name))


if __name__ == "__main__":
    main()

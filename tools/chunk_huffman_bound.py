#!/usr/bin/env python3
"""What an order-0 Huffman code of the exponents, rebuilt for every chunk, makes of a bf16 tensor.

    python3 tools/chunk_huffman_bound.py [--chunk ELEMENTS ...] FILE.npy ...

FILE.npy holds bf16 values as their uint16 bit patterns (what compcoll-bench reads with
--dtype bf16). For each chunk size the tensor is cut into chunks of that many elements; each
chunk's exponent bytes (bits 14..7) get the Huffman code of the chunk's own histogram, and the
sign-and-mantissa byte of every element is kept as it is. The bytes printed are those code
bits plus the raw bytes, rounded up to a byte per chunk: nothing else (no tables, no headers,
no lane padding). It is the floor of any codec that codes exponents this way, such as
entropy-exp (docs/FORMAT.md: per-chunk canonical Huffman code and raw rest, plus per-chunk
overhead) and ZipNN (Huffman per 256 KiB chunk), so the distance between a codec's stream and
this floor at the codec's chunk size is the codec's overhead. Needs numpy only.
"""

import argparse
import heapq
import sys

import numpy as np


def huffman_bits(counts):
    """Total code bits of an optimal prefix code (no length limit) for these symbol counts."""
    weights = [int(c) for c in counts if c > 0]
    if len(weights) <= 1:
        return sum(weights)  # a lone symbol still takes a 1-bit code
    heapq.heapify(weights)
    total = 0
    while len(weights) > 1:
        merged = heapq.heappop(weights) + heapq.heappop(weights)
        total += merged  # every symbol under this node gets one more bit
        heapq.heappush(weights, merged)
    return total


def floor_bytes(bits16, chunk):
    """Code bytes of the exponents and the raw bytes, chunk by chunk."""
    exponents = ((bits16 >> 7) & 0xFF).astype(np.int64)
    code = 0
    for start in range(0, exponents.size, chunk):
        code += (huffman_bits(np.bincount(exponents[start:start + chunk], minlength=256)) + 7) // 8
    return code, int(bits16.size)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunk", type=int, action="append",
                    help="elements per chunk (repeatable; default 16384, 65536 and 131072)")
    ap.add_argument("files", nargs="+", metavar="FILE.npy")
    args = ap.parse_args()
    chunks = args.chunk or [16384, 65536, 131072]
    for c in chunks:
        if c <= 0:
            sys.exit(f"chunk_huffman_bound.py: --chunk {c}: must be positive")
    tensors = []
    for path in args.files:
        try:
            a = np.load(path)
        except (OSError, ValueError) as e:
            sys.exit(f"chunk_huffman_bound.py: {path}: {e}")
        if a.dtype != np.uint16:
            sys.exit(f"chunk_huffman_bound.py: {path}: dtype {a.dtype} (key 'descr'): "
                     "expected uint16 bf16 bit patterns")
        tensors.append((path, a.reshape(-1)))
    print("# file  chunk_elements  exponent_code_bytes  raw_bytes  total_bytes  ratio")
    for path, bits16 in tensors:
        for c in chunks:
            code, raw = floor_bytes(bits16, c)
            total = code + raw
            print(f"{path}  {c}  {code}  {raw}  {total}  {2 * bits16.size / total:.4f}")

if __name__ == "__main__":
    main()

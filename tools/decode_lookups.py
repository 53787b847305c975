#!/usr/bin/env python3
"""Elements a table lookup of gauss-exp's and entropy-exp's GPU decoders (docs/CALIBRATION.md), counted.

    tools/decode_lookups.py [--chunks N] [FILE.bf16.npy ...]

A decoder lane reads its next 10 stream bits and looks up, in a 4 KB table, the codes of its
next elements that lie wholly within them: up to two (the pair table of fp16 and fp32) or
three (bf16's triple table), none an escape; a code longer than 10 bits or an escape takes a
lookup of its own. This counts, lane by lane as the decoder walks them, how many elements a
lookup takes on average, for at most 2, 3 and 4 codes a lookup, over chunks of 16,384 bf16
elements: Gaussian ones of random scale (tools/derive_gauss_code.py's model, fixed seed), and
the bf16 tensors given (.npy of uint16 or bfloat16 bits); under gauss-exp's fixed code, and
under each chunk's Huffman code of its exponents (entropy-exp's; its codes are limited to 12
bits, which changes only rare, long codes, and a code longer than 10 bits takes a lookup of
its own either way). Needs numpy only.
"""
import argparse
import heapq

import numpy as np

N, DMIN, DMAX, LANES, BITS = 16384, -12, 7, 32, 10
# docs/FORMAT.md: d = -12 .. 7, then ZERO and ESC (an escape's 8-bit exponent follows its code).
LENGTHS = [11, 11, 11, 11, 10, 8, 8, 6, 6, 4, 3, 3, 2, 2, 3, 7, 9, 10, 11, 11, 7, 10]


def code_lengths(bits16):
    """Each element's code length (an escape's 10 bits stand for more than the table's bits)."""
    e = ((bits16 >> 7) & 0xFF).astype(np.int64)
    normal = (e > 0) & (e < 255)
    ref = (e[normal].sum() + normal.sum() // 2) // normal.sum() if normal.any() else 0
    d = e - ref
    lengths = np.full(len(e), 99)  # escapes: never in a table entry
    coded = normal & (d >= DMIN) & (d <= DMAX)
    lengths[coded] = np.array(LENGTHS)[d[coded] - DMIN]
    lengths[e == 0] = LENGTHS[DMAX - DMIN + 1]
    return lengths


def huffman_lengths(bits16):
    """Each element's code length under a Huffman code of the chunk's exponents."""
    e = ((bits16 >> 7) & 0xFF).astype(np.int64)
    counts = np.bincount(e, minlength=256)
    heap = [(int(c), s, [s]) for s, c in enumerate(counts) if c > 0]
    length = np.zeros(256, dtype=np.int64)
    if len(heap) == 1:
        length[heap[0][1]] = 1
    heapq.heapify(heap)
    while len(heap) > 1:
        c1, k1, s1 = heapq.heappop(heap)
        c2, k2, s2 = heapq.heappop(heap)
        length[s1 + s2] += 1
        heapq.heappush(heap, (c1 + c2, min(k1, k2), s1 + s2))
    return length[e]


def lookups(lengths, most):
    """Lookups of a chunk's lanes with at most `most` codes an entry."""
    count = 0
    for lane in range(LANES):
        ll = lengths[lane::LANES]
        i = 0
        while i < len(ll):
            taken, bits = 0, 0
            while i + taken < len(ll) and taken < most and bits + ll[i + taken] <= BITS:
                bits += ll[i + taken]
                taken += 1
            i += max(taken, 1)
            count += 1
    return count


def report(name, chunks):
    elements = sum(len(c) for c in chunks)
    for codec, lengths_of in (("gauss-exp", code_lengths), ("entropy-exp", huffman_lengths)):
        lengths = [lengths_of(c) for c in chunks]
        per = {most: elements / sum(lookups(ll, most) for ll in lengths) for most in (2, 3, 4)}
        print("%-58s %-11s %4d chunks  elements a lookup: %.2f (pairs)  %.2f (triples)  %.2f (four)"
              % (name, codec, len(chunks), per[2], per[3], per[4]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=64, help="Gaussian chunks (default 64)")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    gauss = []
    for _ in range(args.chunks):
        x = (rng.standard_normal(N) * 2.0 ** rng.uniform(-30, 10)).astype(np.float32)
        b = x.view(np.uint32)
        gauss.append(((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint32))  # round to nearest even
    report("Gaussian bf16, random scale", gauss)
    for f in args.files:
        bits = np.load(f).view(np.uint16).ravel().astype(np.uint32)
        report(f, [bits[i:i + N] for i in range(0, len(bits) - N + 1, N)])


if __name__ == "__main__":
    main()

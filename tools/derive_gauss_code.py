#!/usr/bin/env python3
"""Derives the fixed gauss-exp code lengths (docs/FORMAT.md, shared/codec/format.h).

Model: chunks of 16384 N(0, s^2) values of random scale s, rounded to bf16. Per chunk the
reference is the rounded mean exponent of normal values; the symbol of an element is
d = e - ref for d in [-12, 7], ZERO (e == 0) or ESC. The code is the Huffman code of the
observed symbol distribution with probability floors on rare symbols (heavy tails, zeros,
escapes), so no symbol costs more than 11 bits. Prints the lengths and the mean code length
against the model's entropy. Needs numpy only; deterministic (fixed seed).
"""
import heapq
import itertools

import numpy as np

N, DMIN, DMAX, CHUNKS = 16384, -12, 7, 2000


def symbol_distribution(rng):
    counts = np.zeros(DMAX - DMIN + 1 + 2)
    for _ in range(CHUNKS):
        x = (rng.standard_normal(N) * 2.0 ** rng.uniform(-30, 10)).astype(np.float32)
        b = x.view(np.uint32)
        b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16  # round to nearest even bf16
        e = ((b >> 7) & 0xFF).astype(np.int64)
        normal = (e > 0) & (e < 255)
        ref = (e[normal].sum() + normal.sum() // 2) // normal.sum()
        d = e - ref
        coded = (d >= DMIN) & (d <= DMAX) & normal
        np.add.at(counts, d[coded] - DMIN, 1)
        counts[-2] += (e == 0).sum()
        counts[-1] += (~coded & (e != 0)).sum()
    return counts / counts.sum()


def huffman_lengths(p):
    tie = itertools.count()
    heap = [(p[i], next(tie), [i]) for i in range(len(p))]
    heapq.heapify(heap)
    lengths = np.zeros(len(p), int)
    while len(heap) > 1:
        a, b = heapq.heappop(heap), heapq.heappop(heap)
        for i in a[2] + b[2]:
            lengths[i] += 1
        heapq.heappush(heap, (a[0] + b[0], next(tie), a[2] + b[2]))
    return lengths


def main():
    p = symbol_distribution(np.random.default_rng(7))
    q = np.maximum(p, 2.0 ** -11)
    q[4 - DMIN:8 - DMIN] = np.maximum(q[4 - DMIN:8 - DMIN], [2 ** -9, 2 ** -10, 2 ** -11, 2 ** -11])
    q[-2] = 2 ** -7   # ZERO: zeros are common in real tensors (padding, ReLU, masked grads)
    q[-1] = max(q[-1], 2 ** -10)  # ESC
    lengths = huffman_lengths(q / q.sum())
    nz = p[p > 0]
    print("lengths (d = %d..%d, ZERO, ESC):" % (DMIN, DMAX), " ".join(map(str, lengths)))
    print("kraft sum: %.6f" % (2.0 ** -lengths).sum())
    print("model entropy %.4f bits, mean code length %.4f bits"
          % (-(nz * np.log2(nz)).sum(), (p * lengths).sum()))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Checks tools/chunk_huffman_bound.py against entropy-exp's stream on the same tensor.

    python3 tests/codec/check_huffman_bound.py BOUND.txt BENCH.json CHUNK

BOUND.txt: the tool's output for one file at CHUNK elements per chunk; BENCH.json: the
`compcoll-bench codec --json --codec entropy-exp --chunk CHUNK` line for the same file.
entropy-exp codes each chunk's exponents with a Huffman code limited to 12 bits, so its stream
can be no smaller than the tool's floor (an unlimited Huffman code, nothing else), and the
rest is its per-chunk overhead (docs/FORMAT.md): header, offset entry, lane table, code table
of at most 2 bytes per symbol and each lane's padding, under 8 + 4 + 64 + 512 + 128 bytes.
"""
import json
import math
import sys

bound_path, bench_path, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [l.split() for l in open(bound_path) if l.strip() and not l.startswith("#")]
if len(rows) != 1 or int(rows[0][1]) != chunk:
    sys.exit(f"check_huffman_bound.py: {bound_path}: expected one row at chunk {chunk}, got {rows}")
floor = int(rows[0][4])
bench = json.loads(open(bench_path).read().splitlines()[0])
elements = bench["elements"]
stream = 2 * elements / bench["ratio"]  # the ratio has 5 decimals: +-1 byte here
chunks = math.ceil(elements / chunk)
ceiling = floor + 32 + chunks * (8 + 4 + 64 + 512 + 128)
print(f"floor {floor} B, entropy-exp {stream:.0f} B ({(stream - floor) / chunks:.0f} B per chunk over "
      f"the floor), ceiling {ceiling} B")
if not floor - 1 <= stream <= ceiling:
    sys.exit("FAILED: entropy-exp's stream is outside [floor, ceiling]")
print("OK")

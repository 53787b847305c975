#!/usr/bin/env python3
"""ZipNN on the bytes compcoll-bench hands it: `compcoll-bench codec --peer zipnn` writes each
input's raw elements to a file and runs this script on it, so ZipNN compresses the same bytes
in the same run as compcoll's codecs (docs/compcoll-bench.md).

  zipnn_peer.py --check                          exit 0 when zipnn imports (else one line, exit 3)
  zipnn_peer.py --dtype bf16 --min-time S FILE   one JSON line: ratio, encode/decode GB/s, ok

ZipNN 0.5.x with its defaults and one thread (threads=1). Timing is compcoll-bench's: an untimed
warm-up, then runs until --min-time has passed (at least 3), the best one reported; GB/s are
uncompressed bytes per second. ZipNN rewrites its input buffer in place, so each compress run
gets a fresh copy of the bytes (the copy is not timed). The decoded bytes must equal the input."""
import argparse
import json
import sys
import time

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def load_zipnn():
    try:
        import warnings
        warnings.filterwarnings("ignore")
        import zipnn
        from importlib.metadata import version
        return zipnn, version("zipnn")
    except Exception as e:  # ImportError, or zipnn's own dependencies failing to import
        print(f"the zipnn Python package cannot be imported ({type(e).__name__}: {e}); pip install zipnn",
              file=sys.stderr)
        sys.exit(3)


def best(fn, min_time):
    fn()  # warm-up
    runs, spent, top = 0, 0.0, float("inf")
    while runs < 3 or spent < min_time:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        top, spent, runs = min(top, dt), spent + dt, runs + 1
    return top


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("file", nargs="?")
    a = ap.parse_args()
    zipnn, ver = load_zipnn()
    if a.check:
        print(f"zipnn {ver}")
        return 0
    if not a.file:
        ap.error("no input file")
    with open(a.file, "rb") as f:
        raw = f.read()
    z = zipnn.ZipNN(input_format="byte", bytearray_dtype=DTYPES[a.dtype], threads=1)
    out = {}

    def compress():
        src = bytearray(raw)  # fresh: ZipNN reorders its input in place
        t0 = time.perf_counter()
        out["stream"] = z.compress(src)
        return time.perf_counter() - t0

    compress()  # warm-up
    runs, spent, enc = 0, 0.0, float("inf")
    while runs < 3 or spent < a.min_time:
        dt = compress()
        enc, spent, runs = min(enc, dt), spent + dt, runs + 1
    stream = bytes(out["stream"])
    dec = best(lambda: out.__setitem__("back", z.decompress(stream)), a.min_time)
    ok = bytes(out["back"]) == raw
    n = len(raw)
    print(json.dumps({"codec": "zipnn", "version": ver, "bytes": n, "compressed": len(stream),
                      "ratio": n / len(stream) if stream else 0.0,
                      "encode_gbps": n / enc / 1e9 if enc > 0 else 0.0,
                      "decode_gbps": n / dec / 1e9 if dec > 0 else 0.0, "ok": ok}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

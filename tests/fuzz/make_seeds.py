#!/usr/bin/env python3
"""Writes the fuzzers' seed inputs (tests/fuzz/seeds/trace, tests/fuzz/seeds/tensor_file).

Each seed is one input of the fuzzer it seeds: an options byte (two for fuzz_trace) and then
the file or files (fuzz_trace: two files split by a NUL byte). The trace seeds are small jobs
of two ranks in the three schemas the reader meets (NCCL kernels on the GPU, record_param_comms
on the CPU, gloo's annotations), the tensor seeds small .npy (v1-v3, fp32/fp16/bf16 bit
patterns, gradient traces) and .safetensors files. Usage: tests/fuzz/make_seeds.py [DIR]
(default: tests/fuzz/seeds). Needs numpy.
"""
import io
import json
import os
import struct
import sys

import numpy as np


def event(cat, name, ts, dur, pid, tid, args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def distributed(backend, rank):
    return {"backend": backend, "rank": rank, "world_size": 2,
            "pg_config": [{"pg_name": "0", "pg_size": 2, "ranks": [0, 1]}]}


def gpu_rank(rank):  # as tests/workload/trace_jobs.h's gpu_rank
    ev = [event("user_annotation", "ProfilerStep#1", 0, 1000, 10, 1, {}),
          event("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 500, 300, 10, 2, {})]
    for corr, ts, tid in [(1, 10, 1), (2, 20, 1), (3, 30, 1), (4, 600, 2), (5, 610, 1), (99, 2000, 1)]:
        ev.append(event("cuda_runtime", "cudaLaunchKernel", ts, 5, 10, tid, {"correlation": corr}))
    nccl = {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "Float",
            "Process Group Ranks": "[0, 1]", "Process Group Name": "0"}
    kernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"
    ev.append(event("kernel", "gemm", 100, 200, 0, 7, {"correlation": 1}))
    ev.append(event("kernel", kernel, 300 + rank * 20, 100 - rank * 20, 0, 20, dict(nccl, correlation=2)))
    ev.append(event("kernel", "gemm", 410, 190, 0, 7, {"correlation": 3}))
    ev.append(event("kernel", kernel, 620, 80, 0, 20, dict(nccl, correlation=4)))
    ev.append(event("kernel", "gemm", 605, 295, 0, 7, {"correlation": 5}))
    ev.append(event("kernel", "gemm", 2100, 50, 0, 7, {"correlation": 99}))
    return {"distributedInfo": distributed("nccl", rank), "traceEvents": ev}


def cpu_rank(rank):
    ev = [event("user_annotation", "ProfilerStep#7", 0, 400, 5, 1, {}),
          event("cpu_op", "aten::mm", 0, 100, 5, 1, {}),
          event("cpu_op", "record_param_comms", 100, 10, 5, 1,
                {"Collective name": "allgather", "In msg nelems": 256, "Out msg nelems": 512, "dtype": "BFloat16",
                 "Process Group Name": "0"}),
          event("cpu_op", "record_param_comms", 110, 5, 5, 1, {"Collective name": "wait", "In msg nelems": 0,
                                                                 "dtype": "Byte"}),
          event("cpu_op", "aten::mm", 120, 280, 5, 1, {})]
    return {"distributedInfo": distributed("nccl", rank), "traceEvents": ev}


def gloo_rank(rank):
    ev = [event("user_annotation", "ProfilerStep#2", 0, 5000, 7, 7, {}),
          event("user_annotation", "gloo:all_reduce", 1000, 400, 7, 8,
                {"Input type": ["float"], "Input Dims": [[65536]]}),
          event("cpu_op", "c10d::allreduce_", 990, 20, 7, 7, {"Input type": ["float"], "Input Dims": [[65536]]}),
          event("user_annotation", "gloo:all_gather", 2000, 300, 7, 8,
                {"Input type": ["float"], "Input Dims": [[1024]]})]
    return {"distributedInfo": distributed("gloo", rank), "traceEvents": ev}


def compact(j):
    return json.dumps(j, separators=(",", ":")).encode()


def npy(a, version=None):
    b = io.BytesIO()
    np.lib.format.write_array(b, a, version=version)
    return b.getvalue()


def safetensors(tensors):
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "seeds")
    trace_dir, tensor_dir = os.path.join(root, "trace"), os.path.join(root, "tensor_file")
    os.makedirs(trace_dir, exist_ok=True)
    os.makedirs(tensor_dir, exist_ok=True)
    # fuzz_trace options: 1 spmd, 2 two files, 4 tp = 2, 8 a step asked for (byte 1 mod 4).
    for name, rank, options in [("gpu", gpu_rank, 2 | 4), ("cpu", cpu_rank, 2), ("gloo", gloo_rank, 2)]:
        with open(os.path.join(trace_dir, name + "-two"), "wb") as f:
            f.write(bytes([options, 0]) + compact(rank(0)) + b"\0" + compact(rank(1)))
        with open(os.path.join(trace_dir, name + "-spmd"), "wb") as f:
            f.write(bytes([(options & ~2) | 1, 0]) + compact(rank(0)))
    # fuzz_tensor_file options: bits 0-1 the dtype requested (none, bf16, fp16, fp32),
    # 4 .safetensors, 8 also a gradient trace.
    r = np.random.default_rng(1)
    tensors = {
        "f32": (0, npy(r.standard_normal(64).astype("<f4"))),
        "f32-as-bf16": (1, npy(r.standard_normal((4, 8)).astype("<f4"))),
        "f16": (2, npy(r.standard_normal(33).astype("<f2"))),
        "u2-as-bf16": (1, npy(r.integers(0, 65535, 50).astype("<u2"))),
        "v2": (3, npy(r.standard_normal((2, 3, 4)).astype("<f4"), (2, 0))),
        "v3": (0, npy(r.standard_normal(5).astype("<f4"), (3, 0))),
        "fortran": (0, npy(np.asfortranarray(r.standard_normal((3, 4)).astype("<f4")))),
        "grad": (8 | 1, npy(r.standard_normal((3, 4, 5)).astype("<f4"))),
        "grad-u2": (8 | 1, npy(r.integers(0, 30000, (2, 3, 4)).astype("<u2"))),
        "st": (4, safetensors({"a": ("F32", [2, 3], r.standard_normal(6).astype("<f4").tobytes()),
                               "b": ("BF16", [4], r.integers(0, 65535, 4).astype("<u2").tobytes()),
                               "c": ("I64", [1], b"\0" * 8)})),
        "st-as-bf16": (4 | 1, safetensors({"w": ("F32", [8], r.standard_normal(8).astype("<f4").tobytes()),
                                           "x": ("F16", [2, 2], r.standard_normal(4).astype("<f2").tobytes())})),
    }
    for name, (options, data) in tensors.items():
        with open(os.path.join(tensor_dir, name), "wb") as f:
            f.write(bytes([options]) + data)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
r"""Capture PyTorch profiler traces of a small real distributed training job, for
compcoll-sim's trace workload (docs/WORKLOADS.md, "Trace replay").

Runs N processes of torch.distributed on CPU (gloo) training a small GPT-style
decoder, profiles a few steps with torch.profiler, and writes what the job made:

  OUT/rank<R>.json   the profiler's Chrome trace of rank R, as PyTorch wrote it
  OUT/job.json       the job (world, tp, dp, mode, model, command, versions) and
                     every collective the job issued in the profiled steps, per
                     rank, in issue order: what a trace reader must find again

Parallelism (--tp, --mode):
  tensor parallel  --tp T: Megatron-LM style; the attention's qkv and the MLP's
                   first projection are column-parallel, the out-projection and
                   the second projection row-parallel: an allreduce over the T
                   ranks of a tensor-parallel group after each row-parallel
                   layer in forward, and one for the input gradient of each
                   column-parallel layer in backward.
  data parallel    dp = N / T, ranks r and r + T in the same data-parallel
                   group (rank = dp_rank * tp + tp_rank, Megatron-LM's order).
    --mode ddp     DistributedDataParallel: gradients allreduced in buckets
                   (--bucket-mb) while backward runs (a DDP comm hook issues
                   the same allreduce DDP would, and logs it).
    --mode zero    ZeRO-2 style sharded optimizer: after backward the flat
                   gradient is reduce-scattered over the data-parallel group
                   in buckets, each rank updates its shard (AdamW state for
                   its shard only), and the updated parameters are allgathered.

Every collective goes through torch.distributed as a user's job would; the
profiler sees them as the gloo backend records them (c10d::* CPU ops on the
main thread, gloo:* annotations on the process group's worker threads).

Examples (the first two made the bundled tests/data/torch-trace; its README):
    python3 tools/capture_trace.py --out tests/data/torch-trace/ddp-tp2-dp2 --layers 2 --bucket-mb 0.25
    python3 tools/capture_trace.py --out tests/data/torch-trace/zero-dp2 --world 2 --tp 1 --mode zero \
        --layers 1 --d-model 128 --steps 1 --bucket-mb 0.25 --port 29534
    python3 tools/capture_trace.py --world 4 --tp 1 --mode zero --out /tmp/zero
"""
import argparse
import json
import os
import platform
import sys
import time


def build_model(torch, cfg, tp_group, tp, tp_rank, log):
    nn = torch.nn
    dist = torch.distributed

    class CopyToTP(torch.autograd.Function):
        """Identity forward; allreduce of the gradient over the tensor-parallel group backward."""

        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            g = g.contiguous()
            log.call("tp-allreduce", "allreduce", g, tp_group)
            dist.all_reduce(g, group=tp_group)
            return g

    class ReduceFromTP(torch.autograd.Function):
        """Allreduce over the tensor-parallel group forward; identity backward."""

        @staticmethod
        def forward(ctx, x):
            x = x.contiguous()
            log.call("tp-allreduce", "allreduce", x, tp_group)
            dist.all_reduce(x, group=tp_group)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    def to_tp(x):
        return CopyToTP.apply(x) if tp > 1 else x

    def from_tp(x):
        return ReduceFromTP.apply(x) if tp > 1 else x

    d, h, f = cfg["d_model"], cfg["heads"], cfg["ffn"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.ln2 = nn.LayerNorm(d)
            self.heads = h // tp
            self.qkv = nn.Linear(d, 3 * d // tp, bias=False)   # column-parallel
            self.out = nn.Linear(d // tp, d, bias=False)       # row-parallel
            self.fc1 = nn.Linear(d, f // tp, bias=False)       # column-parallel
            self.fc2 = nn.Linear(f // tp, d, bias=False)       # row-parallel

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(to_tp(self.ln1(x))).chunk(3, dim=-1)
            shape = (b, s, self.heads, d // h)
            q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + from_tp(self.out(a.transpose(1, 2).reshape(b, s, d // tp)))
            x = x + from_tp(self.fc2(torch.nn.functional.gelu(self.fc1(to_tp(self.ln2(x))))))
            return x

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(cfg["vocab"], d)
            self.pos = nn.Embedding(cfg["seq"], d)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg["layers"]))
            self.ln = nn.LayerNorm(d)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1])
            x = self.emb(idx) + self.pos(pos)
            for blk in self.blocks:
                x = blk(x)
            return self.ln(x) @ self.emb.weight.t()   # tied output layer

    return GPT()


class CallLog:
    """The collectives this rank issues while the profiler records (issue order)."""

    def __init__(self, dist, rank):
        self.dist = dist
        self.rank = rank
        self.step = None
        self.steps = {}

    def call(self, kind, collective, tensor, group, elements=None):
        if self.step is None:
            return
        ranks = self.dist.get_process_group_ranks(group)
        self.steps.setdefault(self.step, []).append({
            "kind": kind, "collective": collective,
            "elements": int(elements if elements is not None else tensor.numel()),
            "dtype": str(tensor.dtype).replace("torch.", ""), "group": ranks})


def worker(rank, args, cfg):
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    tp, dp = args.tp, args.world // args.tp
    tp_rank, dp_rank = rank % tp, rank // tp
    # Every rank creates every group, in the same order (torch.distributed requires it).
    tp_group = dp_group = None
    for g in range(dp):
        grp = dist.new_group([g * tp + t for t in range(tp)])
        if g == dp_rank:
            tp_group = grp
    for t in range(tp):
        grp = dist.new_group([g * tp + t for g in range(dp)])
        if t == tp_rank:
            dp_group = grp

    log = CallLog(dist, rank)
    torch.manual_seed(args.seed + tp_rank)  # TP shards differ; DP replicas start equal
    model = build_model(torch, cfg, tp_group, tp, tp_rank, log)
    params = [p for p in model.parameters()]
    bucket_bytes = int(args.bucket_mb * (1 << 20))

    if args.mode == "ddp":
        net = torch.nn.parallel.DistributedDataParallel(model, process_group=dp_group, bucket_cap_mb=args.bucket_mb)

        def hook(state, bucket):
            # What DDP's default hook does (allreduce, then divide), logged.
            buf = bucket.buffer()
            log.call("dp-grad", "allreduce", buf, dp_group)
            fut = dist.all_reduce(buf, group=dp_group, async_op=True).get_future()
            return fut.then(lambda f: f.value()[0].div_(dp))

        net.register_comm_hook(None, hook)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.1)
    else:
        net = model
        numel = sum(p.numel() for p in params)
        per = -(-numel // dp)
        flat_grad = torch.zeros(per * dp)
        flat_param = torch.zeros(per * dp)
        shard = torch.nn.Parameter(torch.zeros(per))
        with torch.no_grad():
            torch.cat([p.reshape(-1) for p in params], out=flat_param[:numel])
            shard.copy_(flat_param[dp_rank * per:(dp_rank + 1) * per])
        opt = torch.optim.AdamW([shard], lr=1e-3, weight_decay=0.1)
        elems = max(dp, bucket_bytes // 4 // dp * dp)  # bucket elements, a multiple of dp

    def zero_step():
        with torch.no_grad():
            torch.cat([p.grad.reshape(-1) for p in params], out=flat_grad[:numel])
            shard_grad = torch.empty(per)
            # Reduce-scatter in buckets: bucket b of every rank's shard at once.
            step = max(1, elems // dp)
            for lo in range(0, per, step):
                n = min(step, per - lo)
                chunks = torch.stack([flat_grad[r * per + lo:r * per + lo + n] for r in range(dp)]).reshape(-1)
                out = torch.empty(n)
                log.call("dp-grad", "reduce_scatter", chunks, dp_group)
                dist.reduce_scatter_tensor(out, chunks, group=dp_group)
                shard_grad[lo:lo + n] = out / dp
            shard.grad = shard_grad
        opt.step()
        with torch.no_grad():
            for lo in range(0, per, step):
                n = min(step, per - lo)
                gathered = torch.empty(n * dp)
                log.call("zero-param-allgather", "allgather", gathered, dp_group)
                dist.all_gather_into_tensor(gathered, shard.data[lo:lo + n].contiguous(), group=dp_group)
                g = gathered.reshape(dp, n)
                for r in range(dp):
                    flat_param[r * per + lo:r * per + lo + n] = g[r]
            off = 0
            for p in params:
                p.copy_(flat_param[off:off + p.numel()].reshape(p.shape))
                off += p.numel()
                p.grad = None

    gen = torch.Generator().manual_seed(args.seed + 1000 + dp_rank)
    total = args.warmup + args.steps
    sched = schedule(wait=0, warmup=args.warmup, active=args.steps, repeat=1)
    times = []
    with profile(activities=[ProfilerActivity.CPU], schedule=sched, record_shapes=True) as prof:
        for s in range(total):
            log.step = s - args.warmup if s >= args.warmup else None
            t0 = time.perf_counter()
            idx = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1), generator=gen)
            logits = net(idx[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg["vocab"]), idx[:, 1:].reshape(-1))
            loss.backward()
            if args.mode == "ddp":
                opt.step()
                opt.zero_grad(set_to_none=True)
            else:
                zero_step()
            times.append(time.perf_counter() - t0)
            prof.step()
    os.makedirs(args.out, exist_ok=True)
    prof.export_chrome_trace(os.path.join(args.out, f"rank{rank}.json"))
    with open(os.path.join(args.out, f".calls{rank}.json"), "w") as f:
        json.dump({"rank": rank, "steps": [log.steps.get(i, []) for i in range(args.steps)],
                   "step_seconds": times[args.warmup:]}, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for rank<R>.json and job.json")
    ap.add_argument("--world", type=int, default=4, help="processes (default 4)")
    ap.add_argument("--tp", type=int, default=2, help="tensor-parallel degree (default 2)")
    ap.add_argument("--mode", choices=["ddp", "zero"], default="ddp")
    ap.add_argument("--steps", type=int, default=2, help="profiled steps (default 2)")
    ap.add_argument("--warmup", type=int, default=2, help="steps before profiling (default 2)")
    ap.add_argument("--bucket-mb", type=float, default=1.0, help="gradient bucket in MiB (default 1)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--port", type=int, default=29533)
    args = ap.parse_args()
    if args.world < 2 or args.tp < 1 or args.world % args.tp:
        ap.error("--world must be at least 2 and a multiple of --tp")
    cfg = {"vocab": 256, "seq": 128, "batch": 8, "layers": args.layers, "d_model": args.d_model, "heads": 4,
           "ffn": 4 * args.d_model}
    if cfg["heads"] % args.tp or cfg["ffn"] % args.tp:
        ap.error("--tp must divide the 4 heads")
    import numpy
    import torch
    import torch.multiprocessing as mp

    t0 = time.time()
    mp.spawn(worker, args=(args, cfg), nprocs=args.world)
    ranks = []
    for r in range(args.world):
        p = os.path.join(args.out, f".calls{r}.json")
        with open(p) as f:
            ranks.append(json.load(f))
        os.remove(p)
    job = {
        "generator": "tools/capture_trace.py",
        "command": "python3 tools/capture_trace.py " + " ".join(sys.argv[1:]),
        "world": args.world, "tp": args.tp, "dp": args.world // args.tp, "mode": args.mode,
        "profiled_steps": args.steps, "warmup_steps": args.warmup, "bucket_mb": args.bucket_mb,
        "model": cfg, "backend": "gloo", "threads_per_rank": 1, "seed": args.seed,
        "torch_version": torch.__version__, "numpy_version": numpy.__version__,
        "python_version": platform.python_version(), "wall_seconds": round(time.time() - t0, 1),
        "traces": [f"rank{r}.json" for r in range(args.world)],
        "calls": [r["steps"] for r in ranks],
        "step_seconds": [r["step_seconds"] for r in ranks],
    }
    with open(os.path.join(args.out, "job.json"), "w") as f:
        json.dump(job, f, indent=1)
    print(f"wrote {args.world} traces and job.json to {args.out} in {job['wall_seconds']} s")


if __name__ == "__main__":
    main()

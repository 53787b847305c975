#!/usr/bin/env python3
"""Capture real LLM-training tensors for compcoll's codec tests and experiments.

Trains a small GPT-style decoder (dense + MoE layers) for a few steps on real
English text with PyTorch on CPU and dumps what distributed training would put
on the wire:

  grad          weight gradients               (data-parallel allreduce / reduce-scatter)
  param         parameters                     (FSDP / ZeRO-3 allgather)
  act           row-parallel layer outputs     (tensor-parallel allreduce):
                attention out-projection and FFN down-projection outputs,
                before the residual add (the projections have no bias)
  actgrad       gradient of the loss w.r.t. those same outputs (the TP
                allreduce of the backward pass of the column-parallel input)
  moe-dispatch  hidden states routed to the experts of an MoE layer, grouped
                by expert in expert order (what the MoE all-to-all sends)

Every tensor is flattened, a contiguous slice of at most --max-elements values
is taken from the start, and the slice is written as bf16 bit patterns in a 1-D
.npy of dtype '<u2':

    <kind>.<name>.step<NNN>.bf16.npy

A few tensors additionally get a float32 copy '<kind>.<name>.step<NNN>.fp32.npy'
(dtype '<f4', 1-D, same slice).  manifest.json in the output directory lists
every file with its metadata.

float32 -> bf16 conversion is round-to-nearest-even, done in numpy on the raw
float32 bits (see f32_to_bf16_bits); NaN stays NaN (quiet bit forced on).

Values are captured during training step s (1-based): activations, activation
gradients, MoE dispatch tokens and weight gradients come from step s's forward
and backward pass (weight gradients before clipping, i.e. what the allreduce
would send); parameters are the ones step s's forward pass used (before step
s's optimizer update).

Run with --check DIR to verify an existing sample (needs numpy only).

Gradient trace (--trace NAME): the weight gradient of one parameter (NAME as in
the file names, e.g. layer1-attn-out-weight; 2-D parameters only) is kept at
EVERY training step 1..--steps, at the same point as the grad captures (after
backward, before clipping).  Each step keeps the top-left block of the first R
(--trace-rows) rows and all columns of the weight as PyTorch stores it
([out_features, in_features] for a Linear, [num_embeddings, dim] for an
Embedding), rounded to bf16 with f32_to_bf16_bits.  At the end one 3-D .npy of
dtype '<u2' and shape (steps, R, cols) is written, plus trace.json (settings,
per-step loss, sha256):

    <--trace-out>/grad-trace.<NAME>.bf16.npy         (default dir <repo>/tests/data/trace)

A --trace run writes ONLY the trace: the normal captures (tensor files and
manifest.json) are neither written nor deleted unless --out is given as well,
in which case both are written.  Tracing does not change the training run
(same batches, same weights), so a trace lines up step for step with a normal
capture of the same settings.

Examples:
    python3 tools/capture_tensors.py                      # regenerate tests/data
    python3 tools/capture_tensors.py --out /tmp/big --all-tensors --max-elements 0
    python3 tools/capture_tensors.py --check tests/data
    python3 tools/capture_tensors.py --trace layer1-attn-out-weight --trace-rows 64 --steps 160 --threads 1
                                                          # regenerate tests/data/trace
"""

import argparse
import hashlib
import json
import math
import os
import platform
import re
import sys
import time

import numpy as np

PROG = "tools/capture_tensors.py"
KINDS = ("grad", "param", "act", "actgrad", "moe-dispatch")
NAME_RE = re.compile(r"^[a-z0-9_-]+$")
FILE_RE = re.compile(r"^(grad|param|act|actgrad|moe-dispatch)\.([a-z0-9_-]+)\.step(\d{3,})\.(bf16|fp32)\.npy$")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACE_FILE = "grad-trace.%s.bf16.npy"  # % name
TRACE_JSON = "trace.json"

# The default (committed) selection: (kind, name, which capture steps, float32 copy too?)
# "all" = every capture step, "last" = only the last capture step.
DEFAULT_SELECTION = [
    ("grad", "layer2-ffn-down-weight", "all", False),
    ("param", "layer2-ffn-down-weight", "all", False),
    ("act", "layer2-ffn-down", "all", True),
    ("actgrad", "layer2-ffn-down", "all", True),
    ("moe-dispatch", "layer3-moe", "all", False),
    ("grad", "layer1-attn-out-weight", "last", True),
    ("param", "layer1-attn-out-weight", "last", True),
    ("act", "layer1-attn-out", "last", False),
    ("actgrad", "layer1-attn-out", "last", False),
]


# --------------------------------------------------------------------------
# bf16 conversion and .npy helpers (numpy only)
# --------------------------------------------------------------------------

def f32_to_bf16_bits(a):
    """float32 array -> uint16 bf16 bit patterns, round-to-nearest-even.

    bits = float32 bits as uint32
    bf16 = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16      (finite and inf)
    NaN  -> (bits >> 16) | 0x0040                            (sign kept, quiet NaN)
    Overflow past the largest bf16 correctly rounds to +-inf.
    """
    a = np.ascontiguousarray(a, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan_bits = (bits >> 16) | 0x0040
    out = np.where(np.isnan(a), nan_bits, rounded)
    return out.astype("<u2")


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def exponent_entropy_bits(b):
    """Empirical Shannon entropy (bits) of the bf16 exponent field ((bits >> 7) & 0xFF)."""
    e = (np.asarray(b, dtype=np.uint16) >> 7) & 0xFF
    counts = np.bincount(e.astype(np.int64), minlength=256).astype(np.float64)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum()) if p.size else 0.0


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------
# --check: verify an existing sample
# --------------------------------------------------------------------------

def check_dir(d):
    man_path = os.path.join(d, "manifest.json")
    with open(man_path) as f:
        man = json.load(f)
    entries = {e["file"]: e for e in man["files"]}
    on_disk = sorted(fn for fn in os.listdir(d) if fn.endswith(".npy"))
    problems, notes = [], []
    for fn in on_disk:
        if fn not in entries:
            problems.append("%s: not in manifest" % fn)
    for fn in sorted(set(entries) - set(on_disk)):
        problems.append("%s: in manifest but missing" % fn)
    total = 0
    print("%-52s %8s %9s %7s %7s %6s" % ("file", "elements", "bytes", "expH", "zeros%", "ok"))
    for fn in on_disk:
        if fn not in entries:
            continue
        e = entries[fn]
        path = os.path.join(d, fn)
        size = os.path.getsize(path)
        total += size
        a = np.load(path, allow_pickle=False)
        ok = True
        m = FILE_RE.match(fn)
        if not m or m.group(1) != e["kind"] or m.group(2) != e["name"] or int(m.group(3)) != e["step"] \
                or m.group(4) != e["dtype"]:
            problems.append("%s: name does not match manifest entry" % fn); ok = False
        want = np.dtype("<u2") if e["dtype"] == "bf16" else np.dtype("<f4")
        if a.dtype != want or a.ndim != 1:
            problems.append("%s: dtype %s ndim %d, want %s 1-D" % (fn, a.dtype.str, a.ndim, want.str)); ok = False
        if a.size != e["elements"]:
            problems.append("%s: %d elements, manifest says %d" % (fn, a.size, e["elements"])); ok = False
        if "sha256" in e and sha256_file(path) != e["sha256"]:
            problems.append("%s: sha256 mismatch" % fn); ok = False
        if e["dtype"] == "bf16":
            bits = a
            f = bf16_bits_to_f32(a)
        else:
            f = a
            bits = f32_to_bf16_bits(a)
        zeros = float(np.mean(f == 0)) * 100.0
        if not np.any(f != 0):
            if e["kind"] == "param":  # e.g. a LayerNorm bias before its first update: legitimately zero
                notes.append("%s: all zeros (parameter, zero-initialised)" % fn)
            else:
                problems.append("%s: all zeros" % fn); ok = False
        if not np.all(np.isfinite(f)):
            problems.append("%s: non-finite values" % fn); ok = False
        print("%-52s %8d %9d %7.3f %7.2f %6s" % (fn, a.size, size, exponent_entropy_bits(bits), zeros,
                                                 "ok" if ok else "BAD"))
    # fp32 copies must round to the same bf16 bits as their bf16 sibling
    for fn, e in entries.items():
        if e["dtype"] != "fp32":
            continue
        sib = fn[: -len(".fp32.npy")] + ".bf16.npy"
        if sib in entries and os.path.exists(os.path.join(d, sib)) and os.path.exists(os.path.join(d, fn)):
            b = np.load(os.path.join(d, sib))
            f = np.load(os.path.join(d, fn))
            if not np.array_equal(f32_to_bf16_bits(f), b):
                problems.append("%s: does not round to %s" % (fn, sib))
    print("total: %d .npy files, %d bytes" % (len(on_disk), total))
    for n in notes:
        print("NOTE: " + n)
    for p in problems:
        print("PROBLEM: " + p)
    return 0 if not problems else 1


# --------------------------------------------------------------------------
# text
# --------------------------------------------------------------------------

def load_text(path):
    if path:
        with open(path, "rb") as f:
            data = f.read()
        source = {"kind": "file", "name": os.path.basename(path)}
    else:
        from pydoc_data.topics import topics
        keys = sorted(topics)
        data = "\n\n".join(topics[k] for k in keys).encode("utf-8")
        source = {"kind": "python-stdlib",
                  "name": "pydoc_data.topics (Python %s reference documentation topics; "
                          "values joined in sorted key order with blank lines, UTF-8)"
                          % platform.python_version(),
                  "topics": len(keys)}
    source["bytes"] = len(data)
    source["sha256"] = hashlib.sha256(data).hexdigest()
    return data, source


# --------------------------------------------------------------------------
# model (defined inside a function so that the module imports without torch)
# --------------------------------------------------------------------------

def build(torch, cfg, recorder):
    nn = torch.nn
    F = torch.nn.functional

    class Attention(nn.Module):
        def __init__(self, li):
            super().__init__()
            self.li = li
            self.qkv = nn.Linear(cfg["d_model"], 3 * cfg["d_model"], bias=False)
            self.out = nn.Linear(cfg["d_model"], cfg["d_model"], bias=False)

        def forward(self, x):
            B, T, C = x.shape
            H = cfg["n_heads"]
            q, k, v = self.qkv(x).split(C, dim=2)
            q = q.view(B, T, H, C // H).transpose(1, 2)
            k = k.view(B, T, H, C // H).transpose(1, 2)
            v = v.view(B, T, H, C // H).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            y = self.out(y)  # row-parallel output (TP allreduce)
            recorder.act("layer%d-attn-out" % self.li, y)
            return y

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(cfg["d_model"], cfg["d_ff"], bias=False)
            self.down = nn.Linear(cfg["d_ff"], cfg["d_model"], bias=False)

        def forward(self, x):
            return self.down(F.gelu(self.up(x)))

    class DenseFFN(nn.Module):
        def __init__(self, li):
            super().__init__()
            self.li = li
            self.mlp = MLP()

        def forward(self, x):
            y = self.mlp(x)  # row-parallel output (TP allreduce)
            recorder.act("layer%d-ffn-down" % self.li, y)
            return y, None

    class MoEFFN(nn.Module):
        """Top-k token-choice MoE, dropless, softmax router renormalised over the top-k,
        Switch-style load-balancing auxiliary loss."""

        def __init__(self, li):
            super().__init__()
            self.li = li
            self.router = nn.Linear(cfg["d_model"], cfg["n_experts"], bias=False)
            self.experts = nn.ModuleList([MLP() for _ in range(cfg["n_experts"])])

        def forward(self, x):
            B, T, C = x.shape
            E, K = cfg["n_experts"], cfg["top_k"]
            h = x.reshape(B * T, C)
            probs = F.softmax(self.router(h).float(), dim=-1)
            topv, topi = probs.topk(K, dim=-1)
            gates = topv / topv.sum(dim=-1, keepdim=True)
            out = torch.zeros_like(h)
            chunks, counts = [], []
            for e in range(E):
                tok, slot = (topi == e).nonzero(as_tuple=True)  # token order within expert
                xe = h[tok]  # the tokens the all-to-all sends to expert e
                chunks.append(xe)
                counts.append(int(tok.numel()))
                if tok.numel():
                    ye = self.experts[e](xe) * gates[tok, slot].unsqueeze(1).to(xe.dtype)
                    out = out.index_add(0, tok, ye.to(out.dtype))
            if recorder.capturing:
                recorder.moe_dispatch("layer%d-moe" % self.li, torch.cat(chunks, 0), counts)
            # load balancing: E * sum_e f_e * P_e, f_e = fraction of the top-k assignments
            frac = torch.bincount(topi.flatten(), minlength=E).float() / (B * T * K)
            aux = E * torch.sum(frac * probs.mean(0))
            return out.view(B, T, C), aux

    class Block(nn.Module):
        def __init__(self, li):
            super().__init__()
            self.ln1 = nn.LayerNorm(cfg["d_model"])
            self.attn = Attention(li)
            self.ln2 = nn.LayerNorm(cfg["d_model"])
            self.ffn = MoEFFN(li) if li in cfg["moe_layers"] else DenseFFN(li)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            y, aux = self.ffn(self.ln2(x))
            return x + y, aux

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = nn.Embedding(cfg["vocab"], cfg["d_model"])
            self.pos_emb = nn.Embedding(cfg["seq_len"], cfg["d_model"])
            self.blocks = nn.ModuleList([Block(i) for i in range(cfg["n_layers"])])
            self.ln_f = nn.LayerNorm(cfg["d_model"])
            self.head = nn.Linear(cfg["d_model"], cfg["vocab"], bias=False)
            self.head.weight = self.tok_emb.weight  # tied
            for name, p in self.named_parameters():
                if name.endswith("ln1.weight") or name.endswith("ln2.weight") or name == "ln_f.weight":
                    continue
                if p.dim() == 1:
                    continue
                std = 0.02
                if name.endswith("attn.out.weight") or name.endswith("down.weight"):
                    std = 0.02 / math.sqrt(2 * cfg["n_layers"])  # GPT-2 residual scaling
                nn.init.normal_(p, mean=0.0, std=std)

        def forward(self, idx, targets):
            B, T = idx.shape
            x = self.tok_emb(idx) + self.pos_emb(torch.arange(T))
            aux_total = 0.0
            for blk in self.blocks:
                x, aux = blk(x)
                if aux is not None:
                    aux_total = aux_total + aux
            logits = self.head(self.ln_f(x))
            ce = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))
            return ce, aux_total

    return GPT()


def param_short_name(full):
    """'blocks.1.ffn.experts.2.up.weight' -> 'layer1-moe-expert2-up-weight' etc."""
    n = full
    n = re.sub(r"^blocks\.(\d+)\.", r"layer\1.", n)
    n = n.replace("ffn.mlp.", "ffn.").replace("ffn.experts.", "moe.expert").replace("ffn.router", "moe.router")
    n = n.replace("tok_emb", "tok-emb").replace("pos_emb", "pos-emb").replace("ln_f", "ln-f")
    n = re.sub(r"expert\.(\d+)", r"expert\1", n)
    n = n.replace(".", "-")
    assert NAME_RE.match(n), n
    return n


class Recorder:
    """Collects act / actgrad / moe-dispatch tensors while `capturing` is set."""

    def __init__(self, torch):
        self.torch = torch
        self.capturing = False
        self.store = {}  # (kind, name) -> (float32 numpy array, original shape, extra dict)

    def _put(self, kind, name, t, extra=None):
        a = t.detach().to(self.torch.float32).contiguous().numpy().copy()
        self.store[(kind, name)] = (a, list(t.shape), extra or {})

    def act(self, name, y):
        if not self.capturing:
            return
        self._put("act", name, y)
        if y.requires_grad:
            y.register_hook(lambda g, name=name: self._put("actgrad", name, g))

    def moe_dispatch(self, name, x, counts):
        self._put("moe-dispatch", name, x, {"tokens_per_expert": counts})


# --------------------------------------------------------------------------
# capture run
# --------------------------------------------------------------------------

def parse_steps(s, steps):
    out = sorted({int(x) for x in s.split(",") if x.strip()})
    bad = [x for x in out if x < 1 or x > steps]
    if bad:
        raise SystemExit("%s: capture steps %s outside 1..%d" % (PROG, bad, steps))
    return out


def remove_stale(out_dir):
    removed = []
    for fn in os.listdir(out_dir):
        if FILE_RE.match(fn):
            os.remove(os.path.join(out_dir, fn))
            removed.append(fn)
    return removed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="output directory (default: <repo>/tests/data)")
    ap.add_argument("--steps", type=int, default=60, help="training steps (default 60)")
    ap.add_argument("--capture-steps", default=None,
                    help="comma-separated 1-based steps to capture (default 1,STEPS/2,STEPS)")
    ap.add_argument("--max-elements", type=int, default=131072,
                    help="max elements per saved tensor, contiguous slice from the start of the "
                         "flattened tensor; 0 = no limit (default 131072)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--text", default=None,
                    help="train on this file's bytes instead of Python's pydoc_data.topics")
    ap.add_argument("--precision", choices=["fp32", "bf16-autocast"], default="fp32",
                    help="fp32: fp32 weights and compute, tensors rounded to bf16 on save (default); "
                         "bf16-autocast: fp32 master weights, CPU bf16 autocast for matmuls")
    ap.add_argument("--all-tensors", action="store_true",
                    help="capture every parameter/grad/act/actgrad/moe-dispatch (not the small default set)")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    ap.add_argument("--check", metavar="DIR", default=None,
                    help="verify an existing output directory and print per-file exponent entropy")
    ap.add_argument("--trace", metavar="NAME", default=None,
                    help="keep the weight gradient of parameter NAME (e.g. layer1-attn-out-weight) at every "
                         "step and write it as one (steps, rows, cols) bf16 .npy plus trace.json; without "
                         "--out only the trace is written (tests/data is left alone)")
    ap.add_argument("--trace-rows", metavar="R", type=int, default=64,
                    help="rows kept per step: the first R rows, all columns of the [out, in] weight "
                         "(default 64)")
    ap.add_argument("--trace-out", metavar="DIR", default=None,
                    help="trace output directory (default: <repo>/tests/data/trace)")
    args = ap.parse_args()

    if args.check:
        sys.exit(check_dir(args.check))

    try:
        import torch
    except ImportError:
        sys.exit("%s: needs PyTorch: pip install torch" % PROG)

    # a --trace run without --out writes only the trace
    captures = args.trace is None or args.out is not None
    out_dir = args.out or os.path.join(REPO_ROOT, "tests", "data")
    trace_dir = args.trace_out or os.path.join(REPO_ROOT, "tests", "data", "trace")
    if args.steps < 1:
        sys.exit("%s: --steps must be >= 1" % PROG)
    if args.trace is not None and args.trace_rows < 1:
        sys.exit("%s: --trace-rows must be >= 1" % PROG)
    if args.capture_steps is None:
        args.capture_steps = ",".join(str(s) for s in sorted({1, max(1, args.steps // 2), args.steps}))
    cap_steps = parse_steps(args.capture_steps, args.steps)
    last_cap = cap_steps[-1]
    if not captures:
        cap_steps = []  # trace only: no normal captures (tracing does not change the training run)
    K = args.max_elements

    t_start = time.time()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.use_deterministic_algorithms(True)

    cfg = dict(vocab=256, seq_len=128, batch=8, d_model=256, n_heads=4, d_ff=1024, n_layers=4,
               moe_layers=[1, 3], n_experts=4, top_k=2, aux_loss_coef=0.01,
               aux_loss="Switch load-balancing loss n_experts*sum_e(f_e*P_e), summed over the MoE layers",
               lr=1e-3, min_lr=1e-4, warmup_steps=max(1, min(10, args.steps // 6)),
               betas=[0.9, 0.95], weight_decay=0.1, grad_clip=1.0,
               tokenizer="byte-level (UTF-8 bytes, vocab 256)", tied_embeddings=True,
               bias=False, norm="pre-LayerNorm", activation="gelu", positional="learned",
               dropout=0.0, precision=args.precision,
               schedule="linear warm-up to lr, then cosine decay to min_lr at the last step")

    data, text_source = load_text(args.text)
    if len(data) < cfg["seq_len"] + 2:
        sys.exit("%s: text too short" % PROG)
    tokens = torch.from_numpy(np.frombuffer(data, dtype=np.uint8).astype(np.int64))

    recorder = Recorder(torch)
    model = build(torch, cfg, recorder)
    named = list(model.named_parameters())  # tied head.weight appears once, as tok_emb.weight
    n_params = sum(p.numel() for _, p in named)
    decay = [p for n, p in named if p.dim() >= 2]
    no_decay = [p for n, p in named if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=tuple(cfg["betas"]))
    gen = torch.Generator().manual_seed(args.seed)

    def lr_at(step):
        if step <= cfg["warmup_steps"]:
            return cfg["lr"] * step / cfg["warmup_steps"]
        span = max(1, args.steps - cfg["warmup_steps"])
        prog = (step - cfg["warmup_steps"]) / span
        return cfg["min_lr"] + 0.5 * (cfg["lr"] - cfg["min_lr"]) * (1 + math.cos(math.pi * prog))

    # what to save
    param_names = {param_short_name(n): (n, p) for n, p in named}
    if args.all_tensors:
        selection = None
    else:
        selection = [(k, n, which, fp32) for k, n, which, fp32 in DEFAULT_SELECTION]
        for k, n, _, _ in selection:
            if k in ("grad", "param") and n not in param_names:
                sys.exit("%s: internal: unknown parameter %s" % (PROG, n))

    trace_param, trace_rows, trace_steps, trace_none = None, 0, [], []
    if args.trace is not None:
        valid = sorted(sn for sn, (n, p) in param_names.items() if p.dim() == 2)
        if args.trace not in valid:
            sys.exit("%s: --trace: unknown or not a 2-D weight: %s\nvalid names:\n  %s"
                     % (PROG, args.trace, "\n  ".join(valid)))
        trace_param = param_names[args.trace][1]
        trace_rows = min(args.trace_rows, trace_param.shape[0])
        if trace_rows < args.trace_rows:
            print("note: %s has only %d rows; tracing all of them" % (args.trace, trace_rows))
        os.makedirs(trace_dir, exist_ok=True)

    if captures:
        os.makedirs(out_dir, exist_ok=True)
        removed = remove_stale(out_dir)
        if removed:
            print("removed %d old tensor files from %s" % (len(removed), out_dir))

    files = []

    def save(kind, name, step, arr, shape, extra, fp32_copy):
        assert kind in KINDS and NAME_RE.match(name)
        flat = np.ascontiguousarray(arr, dtype=np.float32).reshape(-1)
        n_total = flat.size
        stop = n_total if K <= 0 else min(K, n_total)
        sl = flat[:stop]
        desc = DESCRIPTIONS[kind].format(name=name, step=step)
        outs = [("bf16", f32_to_bf16_bits(sl))]
        if fp32_copy:
            outs.append(("fp32", sl.astype("<f4")))
        for dt, payload in outs:
            fn = "%s.%s.step%03d.%s.npy" % (kind, name, step, dt)
            path = os.path.join(out_dir, fn)
            np.save(path, payload, allow_pickle=False)
            ent = dict(file=fn, kind=kind, name=name, step=step, dtype=dt, elements=int(payload.size),
                       original_shape=shape, original_elements=int(n_total), slice=[0, int(stop)],
                       description=desc)
            ent.update(extra)
            ent["bytes"] = os.path.getsize(path)
            ent["sha256"] = sha256_file(path)
            bits = payload if dt == "bf16" else f32_to_bf16_bits(payload)
            ent["exponent_entropy_bits"] = round(exponent_entropy_bits(bits), 4)
            ent["zero_fraction"] = round(float(np.mean(sl == 0)), 6)
            files.append(ent)

    losses = []
    model.train()
    for step in range(1, args.steps + 1):
        starts = torch.randint(0, tokens.numel() - cfg["seq_len"] - 1, (cfg["batch"],), generator=gen)
        x = torch.stack([tokens[s:s + cfg["seq_len"]] for s in starts.tolist()])
        y = torch.stack([tokens[s + 1:s + 1 + cfg["seq_len"]] for s in starts.tolist()])
        lr = lr_at(step)
        for g in opt.param_groups:
            g["lr"] = lr
        capturing = step in cap_steps
        recorder.capturing = capturing
        recorder.store = {}
        if capturing:  # parameters as used by this step's forward pass
            params_now = {sn: p.detach().clone() for sn, (n, p) in param_names.items()}
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(args.precision == "bf16-autocast")):
            ce, aux = model(x, y)
            loss = ce + cfg["aux_loss_coef"] * aux
        loss.backward()
        if trace_param is not None:  # same point as the grad captures: after backward, before clipping
            g = trace_param.grad
            if g is None:  # no gradient this step (e.g. an expert that received no tokens): zeros
                trace_none.append(step)
                block = np.zeros((trace_rows, trace_param.shape[1]), dtype=np.float32)
            else:
                block = g.detach()[:trace_rows, :].float().numpy()
            trace_steps.append(f32_to_bf16_bits(block))
        if capturing:
            wanted = []
            if selection is None:
                for sn in param_names:
                    wanted.append(("grad", sn, False))
                    wanted.append(("param", sn, False))
                for (k, n) in recorder.store:
                    wanted.append((k, n, False))
            else:
                for k, n, which, fp32 in selection:
                    if which == "all" or step == last_cap:
                        wanted.append((k, n, fp32 and step == last_cap))
            for k, n, fp32 in wanted:
                if k == "grad":
                    p = param_names[n][1]
                    if p.grad is None:
                        continue
                    save(k, n, step, p.grad.float().numpy(), list(p.shape), {}, fp32)
                elif k == "param":
                    t = params_now[n]
                    save(k, n, step, t.float().numpy(), list(t.shape), {}, fp32)
                else:
                    if (k, n) not in recorder.store:
                        sys.exit("%s: internal: %s.%s not recorded" % (PROG, k, n))
                    arr, shape, extra = recorder.store[(k, n)]
                    save(k, n, step, arr, shape, extra, fp32)
            del params_now
        recorder.capturing = False
        recorder.store = {}
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        opt.step()
        ce, aux = ce.detach(), aux.detach()
        losses.append({"step": step, "loss": round(float(ce), 5), "aux": round(float(aux), 5),
                       "grad_norm": round(float(gnorm), 5), "lr": lr})
        if step == 1 or step % 10 == 0 or step == args.steps or capturing:
            print("step %4d  loss %.4f  aux %.4f  gnorm %.4f  lr %.2e%s  (%.1fs)"
                  % (step, float(ce), float(aux), float(gnorm), lr, "  [captured]" if capturing else "",
                     time.time() - t_start), flush=True)

    runtime = time.time() - t_start
    cmd = " ".join(["python3", PROG] + sys.argv[1:])
    # What made the files, in the trace's metadata and the manifest alike.
    run_info = {
        "generator": PROG,
        "command": cmd,
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "threads": args.threads,
        "seed": args.seed,
    }
    if trace_param is not None:
        trace = np.stack(trace_steps).astype("<u2")
        fn = TRACE_FILE % args.trace
        path = os.path.join(trace_dir, fn)
        np.save(path, trace, allow_pickle=False)
        meta = {
            "file": fn,
            "name": args.trace,
            "kind": "grad",
            "shape": list(trace.shape),
            "dtype": "bf16",
            "steps": args.steps,
            "rows": trace_rows,
            "cols": int(trace.shape[2]),
            "original_shape": list(trace_param.shape),
            "block": "trace[s-1] = rows [0, %d), all %d columns of the weight gradient of training step s "
                     "(1-based), weight as PyTorch stores it ([out_features, in_features])"
                     % (trace_rows, trace.shape[2]),
            "step_timing": "weight gradient of step s after backward, before clipping (what the data-parallel "
                           "allreduce would send); the loss of step s is train_log[s-1]",
            "format": "3-D .npy, dtype '<u2', C order, shape (steps, rows, cols): bf16 bit patterns; "
                      "float32 -> bf16 by round-to-nearest-even: bits=f32 as uint32; "
                      "(bits + 0x7FFF + ((bits>>16)&1)) >> 16; NaN -> (bits>>16)|0x0040",
            "grad_none_steps": trace_none,
            **run_info,
            "text_source": text_source,
            "model_config": cfg,
            "n_params": n_params,
            "train_log": losses,
            "bytes": os.path.getsize(path),
            "sha256": sha256_file(path),
        }
        with open(os.path.join(trace_dir, TRACE_JSON), "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
        print("wrote %s %s (%d bytes) + %s to %s in %.1fs"
              % (fn, "x".join(str(d) for d in trace.shape), meta["bytes"], TRACE_JSON, trace_dir, runtime))
        if not captures:
            return
    manifest = {
        "format": {
            "bf16": "1-D .npy, dtype '<u2': bf16 bit patterns; float32 -> bf16 by round-to-nearest-even: "
                    "bits=f32 as uint32; (bits + 0x7FFF + ((bits>>16)&1)) >> 16; NaN -> (bits>>16)|0x0040",
            "fp32": "1-D .npy, dtype '<f4': the same slice as the bf16 file, unrounded float32",
            "naming": "<kind>.<name>.step<NNN>.<bf16|fp32>.npy",
            "slice": "flattened (row-major) tensor, elements [slice[0], slice[1]) of original_elements",
        },
        "kinds": KIND_DOC,
        **run_info,
        "steps": args.steps,
        "capture_steps": cap_steps,
        "max_elements": K,
        "selection": "all-tensors" if args.all_tensors else "default",
        "text_source": text_source,
        "model_config": cfg,
        "n_params": n_params,
        "step_timing": "values captured during training step s (1-based): act/actgrad/moe-dispatch/grad from "
                       "step s's forward+backward (grad before clipping); param = weights used by step s's "
                       "forward (before step s's AdamW update)",
        "train_log": losses,
        "files": sorted(files, key=lambda e: e["file"]),
    }
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    total = sum(e["bytes"] for e in files)
    print("wrote %d files (%d bytes) + manifest.json to %s in %.1fs" % (len(files), total, out_dir, runtime))


KIND_DOC = {
    "grad": "weight gradient after backward, before clipping (data-parallel allreduce / reduce-scatter payload)",
    "param": "parameter used by the forward pass of that step (FSDP / ZeRO-3 allgather payload)",
    "act": "output of a row-parallel projection (attention out-projection or FFN down-projection, no bias), "
           "before the residual add (tensor-parallel allreduce payload, forward)",
    "actgrad": "gradient of the loss w.r.t. the same row-parallel output (tensor-parallel allreduce payload, "
               "backward)",
    "moe-dispatch": "post-LayerNorm hidden states routed to the experts, grouped by expert in expert order, "
                    "[sum(tokens_per_expert), d_model] (MoE all-to-all dispatch payload)",
}

DESCRIPTIONS = {
    "grad": "gradient of {name} at step {step}",
    "param": "parameter {name} as used by step {step}'s forward pass",
    "act": "row-parallel output {name} at step {step} (before residual add)",
    "actgrad": "gradient w.r.t. row-parallel output {name} at step {step}",
    "moe-dispatch": "tokens dispatched to the experts of {name} at step {step}, grouped by expert",
}


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""FlashMLA beside sparsecp's attention kernels, measured in the same run (issue 19).

  attn_anchor.py flashmla > flashmla.jsonl
      On the GPU machine (PyTorch, and the sgl-flash-mla wheel on PYTHONPATH: see
      attn_anchor.sh): FlashMLA's SM90 sparse kernels on the shapes of
      `sparsecp bench kernels --device cuda`, one JSON line per case, FLOPs counted as
      sparsecp counts them: tokens * heads * topk * (2 * 576 + 2 * 512).
  attn_anchor.py merge KERNELS.json FLASHMLA.jsonl > merged.json
      Anywhere: the bench kernels document with an "anchor" object on every attention
      result that has a FlashMLA case of its shape ({"name", "tflops", "ratio"}: ours
      over FlashMLA's), and "ratio_to_copy" on the gather results (their GB/s over the
      same run's copy). The bf16 decode cases are set against FlashMLA's fp8_ds_mla decode
      (FlashMLA has no bf16 sparse decode on SM90); issue 19's goals read those ratios.
      A table goes to stderr.
"""
import json
import sys

HEADS, D_QK, D_V, TOPK = 128, 576, 512, 2048


def flops(tokens):
    return tokens * HEADS * TOPK * (2 * D_QK + 2 * D_V)


# ---- measuring (GPU machine) ----

def timed_ms(fn, min_ms=30.0, samples=10):
    """Median, min and max of `samples` timings, each over enough calls to last min_ms."""
    import torch
    for _ in range(2):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(); fn(); end.record(); torch.cuda.synchronize()
    reps = max(1, int(min_ms / max(start.elapsed_time(end), 1e-3)) + 1)
    got = []
    for _ in range(samples):
        start.record()
        for _ in range(reps):
            fn()
        end.record(); torch.cuda.synchronize()
        got.append(start.elapsed_time(end) / reps)
    got.sort()
    return got[len(got) // 2], got[0], got[-1]


def fp8_ds_mla_rows(n):
    """DeepSeek-V3.2's fp8 KV row (656 bytes): 512 e4m3, 4 f32 scales, 64 bf16 rope."""
    import torch
    rows = torch.empty(n, 656, dtype=torch.uint8, device="cuda")
    rows[:, :512] = (torch.randn(n, 512, device="cuda") * 0.5).to(torch.float8_e4m3fn).view(torch.uint8)
    rows[:, 512:528] = torch.full((n, 4), 0.05, dtype=torch.float32, device="cuda").view(torch.uint8)
    rows[:, 528:] = torch.randn(n, 64, dtype=torch.bfloat16, device="cuda").view(torch.uint8)
    return rows


def case_decode(fm, requests, q_per_request, block=64, kv_rows=1 << 21):
    import torch
    q = torch.randn(requests, q_per_request, HEADS, D_QK, dtype=torch.bfloat16, device="cuda") * 0.5
    blocks = kv_rows // block
    cache = fp8_ds_mla_rows(blocks * block).view(blocks, block, 1, 656)
    sel = torch.randint(0, blocks * block, (requests, q_per_request, TOPK), dtype=torch.int32,
                        device="cuda")
    meta, _ = fm.get_mla_metadata()

    def run():
        return fm.flash_mla_with_kvcache(q, cache, None, None, D_V, meta, None,
                                         softmax_scale=D_QK ** -0.5, causal=False,
                                         is_fp8_kvcache=True, indices=sel, use_legacy=True)
    out, _ = run()
    assert torch.isfinite(out.float()).all(), "non-finite output"
    med, lo, hi = timed_ms(run)
    tokens = requests * q_per_request
    return dict(name="flashmla.decode", phase="decode", kv="fp8_ds_mla", tokens=tokens,
                q_per_request=q_per_request, kv_rows=kv_rows, ms=med, min_ms=lo, max_ms=hi,
                tflops=flops(tokens) / (med * 1e-3) / 1e12)


def case_prefill(fm, tokens=2048, kv_rows=65536):
    import torch
    q = torch.randn(tokens, HEADS, D_QK, dtype=torch.bfloat16, device="cuda") * 0.5
    kv = torch.randn(kv_rows, 1, D_QK, dtype=torch.bfloat16, device="cuda") * 0.5
    sel = torch.randint(0, kv_rows, (tokens, 1, TOPK), dtype=torch.int32, device="cuda")

    def run():
        return fm.flash_mla_sparse_fwd(q, kv, sel, D_QK ** -0.5, d_v=D_V, use_legacy=True)
    assert torch.isfinite(run()[0].float()).all(), "non-finite output"
    med, lo, hi = timed_ms(run)
    return dict(name="flashmla.prefill", phase="prefill", kv="bf16", tokens=tokens,
                q_per_request=tokens, kv_rows=kv_rows, ms=med, min_ms=lo, max_ms=hi,
                tflops=flops(tokens) / (med * 1e-3) / 1e12)


def measure():
    import torch
    import flash_mla as fm
    print(json.dumps(dict(name="flashmla.env", torch=torch.__version__,
                          gpu=torch.cuda.get_device_name(0),
                          flash_mla=getattr(fm, "__version__", "?"))), flush=True)
    failed = 0
    # (the prefill again over 2048 rows, which stay in L2: how much of each kernel's
    # prefill time is the rows' way from memory; bench kernels' prefill_l2 is ours)
    for make in (lambda: case_decode(fm, 128, 1), lambda: case_decode(fm, 128, 2),
                 lambda: case_prefill(fm), lambda: case_prefill(fm, kv_rows=2048)):
        try:
            print(json.dumps(make()), flush=True)
        except Exception as e:  # one case failing must not hide the others
            print(f"attn_anchor: a FlashMLA case failed: {e!r}", file=sys.stderr)
            failed += 1
        torch.cuda.empty_cache()
    return 1 if failed else 0


# ---- merging (anywhere) ----

def anchor_for(result, anchors):
    """The FlashMLA case a sparsecp attention result is measured against, or None."""
    p = result.get("params", {})
    phase = {"kernel.sparse_attn.decode": "decode",
             "kernel.sparse_attn.prefill": "prefill"}.get(result.get("name"))
    if phase is None or p.get("heads") != HEADS or p.get("topk") != TOPK:
        return None
    for a in anchors:
        if a.get("phase") != phase or a.get("tokens") != p.get("tokens"):
            continue
        if phase == "decode" and a.get("q_per_request") != p.get("q_per_request"):
            continue
        if phase == "prefill" and (p.get("kv") != "bf16" or a.get("kv_rows") != p.get("kv_rows")):
            continue
        return a
    return None


def merge(kernels_path, anchors_path):
    doc = json.load(open(kernels_path))
    anchors = []
    for line in open(anchors_path):
        line = line.strip()
        if line.startswith("{"):
            a = json.loads(line)
            if "tflops" in a:
                anchors.append(a)
    copy = [r for r in doc["results"] if r.get("name") == "kernel.copy"]
    copy_gbps = copy[0].get("gbps") if copy else None
    rows = []
    for r in doc["results"]:
        a = anchor_for(r, anchors)
        if a is not None and a.get("tflops", 0) > 0:
            label = f'{a.get("name", "flashmla")} {a.get("kv", "?")}, {a.get("tokens")} tokens'
            r["anchor"] = dict(name=label, tflops=round(a["tflops"], 2),
                               ratio=round(r["tflops"] / a["tflops"], 4))
            rows.append((f'{r["name"]} {r["params"].get("kv")} x{r["params"].get("q_per_request")}',
                         r["tflops"], a["tflops"], r["anchor"]["ratio"]))
        if r.get("name") == "kernel.gather" and copy_gbps:
            r["ratio_to_copy"] = round(r["gbps"] / copy_gbps, 4)
            rows.append((f'kernel.gather {r["params"].get("op")}', r["gbps"], copy_gbps,
                         r["ratio_to_copy"]))
    attached = sum(1 for r in doc["results"] if "anchor" in r)
    doc["anchor"] = dict(name="FlashMLA (sgl-flash-mla, SM90 legacy kernels), same run",
                         cases=len(anchors), attached=attached)
    json.dump(doc, sys.stdout)
    sys.stdout.write("\n")
    print(f'{"case":44s} {"ours":>10s} {"anchor":>10s} {"ratio":>7s}', file=sys.stderr)
    for name, ours, theirs, ratio in rows:
        print(f"{name:44s} {ours:10.1f} {theirs:10.1f} {ratio:7.3f}", file=sys.stderr)
    if attached == 0:
        print("attn_anchor: no FlashMLA case to compare with (read %d)" % len(anchors),
              file=sys.stderr)
        return 1
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "flashmla":
        return measure()
    if len(argv) == 4 and argv[1] == "merge":
        return merge(argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""The lightning indexer + top-K as a user would write it in PyTorch (bf16 einsum on
cuBLAS, ReLU, head weights, sum, causal mask, torch.topk), on the shapes of sparsecp's
`bench kernels --device cuda` indexer cases, on model-long's 32k and 128k prefill and on
one model-long decode token over 32k and 128k keys. (A copy of
../shared/tools/anchors/indexer_ref.py with the decode cases added, issue 18.)
FLOPs counted as sparsecp counts them: 2 * heads * dim per (token, visible key).
Optionally DeepGEMM's fp8 MQA logits when its wheel loads. One JSON line per case."""
import json, sys, traceback
import torch


def timeit(fn, samples=7):
    fn(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(samples):
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        out.append(s.elapsed_time(e))
    out.sort()
    return out[len(out) // 2]


def indexer(q, k, w, topk, first_pos, chunk=256):
    """q [S,H,D] bf16, k [T,D] bf16, w [S,H] f32; query i sees keys < first_pos + i + 1."""
    S, T = q.shape[0], k.shape[0]
    res = []
    for a in range(0, S, chunk):
        b = min(S, a + chunk)
        lg = torch.einsum("shd,td->sht", q[a:b], k)            # bf16 tensor cores
        sc = (torch.relu(lg.float()) * w[a:b, :, None]).sum(1)  # [s, T]
        if first_pos is not None:
            pos = torch.arange(T, device=q.device)[None, :]
            lim = (first_pos + torch.arange(a, b, device=q.device) + 1)[:, None]
            sc = sc.masked_fill(pos >= lim, float("-inf"))
        res.append(torch.topk(sc, min(topk, T), dim=1).indices)
    return torch.cat(res)


def case(name, S, T, H, D, topk, causal, chunk=256):
    q = torch.randn(S, H, D, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(T, D, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(S, H, dtype=torch.float32, device="cuda")
    first = (T - S) if causal else None
    ms = timeit(lambda: indexer(q, k, w, topk, first, chunk))
    if causal:
        pairs = sum(min(T, T - S + i + 1) for i in range(S))
    else:
        pairs = S * T
    flops = 2 * H * D * pairs
    return dict(case=name, ms=ms, tflops=flops / (ms * 1e-3) / 1e12, S=S, T=T, H=H, D=D, topk=topk)


def main():
    print(json.dumps(dict(torch=torch.__version__, gpu=torch.cuda.get_device_name(0))), flush=True)
    cases = [
        ("torch.indexer.decode 128x16384 h64 d128", 128, 16384, 64, 128, 2048, False, 128),
        ("torch.indexer.prefill 1024 causal/16384 h64 d128", 1024, 16384, 64, 128, 2048, True, 256),
        ("torch.indexer.prefill 32768 causal h4 d64 (model-long, one layer)", 32768, 32768, 4, 64, 2048, True, 2048),
        ("torch.indexer.prefill 131072 causal h4 d64 (model-long, one layer)", 131072, 131072, 4, 64, 2048, True, 1024),
        ("torch.indexer.decode 1x32768 h4 d64 (model-long, one layer)", 1, 32768, 4, 64, 2048, False, 1),
        ("torch.indexer.decode 1x131072 h4 d64 (model-long, one layer)", 1, 131072, 4, 64, 2048, False, 1),
    ]
    for c in cases:
        try:
            print(json.dumps(case(*c)), flush=True)
        except Exception:
            print(f"{c[0]} failed", file=sys.stderr); traceback.print_exc()
        torch.cuda.empty_cache()
    try:
        import deep_gemm
        print(json.dumps(dict(deep_gemm="loaded", version=getattr(deep_gemm, "__version__", "?"))), flush=True)
    except Exception as e:
        print(json.dumps(dict(deep_gemm=f"not loadable: {str(e)[:300]}")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The lightning indexer + top-K as a user would write it in PyTorch (bf16 einsum on
cuBLAS, ReLU, head weights, sum, causal mask, torch.topk), on the shapes of sparsecp's
`bench kernels --device cuda` indexer cases, on model-long's 32k and 128k prefill and on
one model-long decode token over 32k and 128k keys. (A copy of
../shared/tools/anchors/indexer_ref.py with the decode cases added, issue 18.)
FLOPs counted as sparsecp counts them: 2 * heads * dim per (token, visible key).
The 64-head shapes also in fp8 as a user would write DeepSeek-V3.2's fp8 indexer
(e4m3 q and keys with power-of-two scales, torch._scaled_mm, scales applied after: the
anchor of sparsecp's fp8_index keys). Its decode cases give every token the same key
set (sparsecp's kernel.indexer decode_shared case); the decode case of sparsecp, a
context a token, has its own version here (decode_own, bf16). Optionally DeepGEMM's fp8
MQA logits when its wheel loads. One JSON line per case; --only SUBSTR keeps the cases
whose name holds SUBSTR."""
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


def select(sc, a, b, first_pos, topk):
    """The top-K of scores sc [b - a, T] of queries a..b, each seeing keys < first_pos + i + 1
    (first_pos None: all)."""
    T = sc.shape[1]
    if first_pos is not None:
        pos = torch.arange(T, device=sc.device)[None, :]
        lim = (first_pos + torch.arange(a, b, device=sc.device) + 1)[:, None]
        sc = sc.masked_fill(pos >= lim, float("-inf"))
    return torch.topk(sc, min(topk, T), dim=1).indices


def indexer(q, k, w, topk, first_pos, chunk=256):
    """q [S,H,D] bf16, k [T,D] bf16, w [S,H] f32; query i sees keys < first_pos + i + 1."""
    S = q.shape[0]
    res = []
    for a in range(0, S, chunk):
        b = min(S, a + chunk)
        lg = torch.einsum("shd,td->sht", q[a:b], k)            # bf16 tensor cores
        sc = (torch.relu(lg.float()) * w[a:b, :, None]).sum(1)  # [s, T]
        res.append(select(sc, a, b, first_pos, topk))
    return torch.cat(res)


def pow2_scale(x):
    """Per row of the last dimension: the least power of two s with amax / s <= 448."""
    amax = x.abs().amax(-1, keepdim=True).float().clamp(min=1e-30)
    return torch.exp2(torch.ceil(torch.log2(amax / 448.0)))


def indexer_fp8(q8, qs, k8, ks, w, topk, first_pos, chunk=256):
    """q8 [S,H,D] e4m3 with scales qs [S,H,1], k8 [T,D] e4m3 with ks [T,1], w [S,H]."""
    S, H, D = q8.shape
    T = k8.shape[0]
    one = torch.ones((), device=q8.device, dtype=torch.float32)
    res = []
    for a in range(0, S, chunk):
        b = min(S, a + chunk)
        lg = torch._scaled_mm(q8[a:b].reshape(-1, D), k8.t(), scale_a=one, scale_b=one,
                              out_dtype=torch.bfloat16).view(b - a, H, T)
        sc = (torch.relu(lg.float()) * (w[a:b] * qs[a:b, :, 0])[:, :, None]).sum(1) * ks[:, 0][None, :]
        res.append(select(sc, a, b, first_pos, topk))
    return torch.cat(res)


def case_fp8(name, S, T, H, D, topk, causal, chunk=256):
    q = torch.randn(S, H, D, dtype=torch.float32, device="cuda")
    k = torch.randn(T, D, dtype=torch.float32, device="cuda")
    w = torch.randn(S, H, dtype=torch.float32, device="cuda")
    qs, ks = pow2_scale(q), pow2_scale(k)
    q8 = (q / qs).to(torch.float8_e4m3fn)
    k8 = (k / ks).to(torch.float8_e4m3fn).contiguous()
    first = (T - S) if causal else None
    ms = timeit(lambda: indexer_fp8(q8, qs, k8, ks, w, topk, first, chunk))
    pairs = sum(min(T, T - S + i + 1) for i in range(S)) if causal else S * T
    return dict(case=name, ms=ms, tflops=2 * H * D * pairs / (ms * 1e-3) / 1e12, S=S, T=T, H=H,
                D=D, topk=topk, fmt="fp8")


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


def case_own(name, S, T, H, D, topk):
    """Decode tokens each over its own context of T keys (a batch of requests, as
    sparsecp's kernel.indexer decode case; the cases above share one key set): a batched
    GEMM over the tokens' keys [S, T, D], then the same fold and torch.topk."""
    q = torch.randn(S, H, D, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(S, T, D, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(S, H, dtype=torch.float32, device="cuda")

    def run():
        lg = torch.bmm(q, k.transpose(1, 2))                   # [S, H, T], bf16 tensor cores
        sc = (torch.relu(lg.float()) * w[:, :, None]).sum(1)  # [S, T]
        return sc.topk(min(topk, T), dim=-1).indices

    ms = timeit(run)
    return dict(case=name, ms=ms, tflops=2 * H * D * S * T / (ms * 1e-3) / 1e12, S=S, T=T,
                H=H, D=D, topk=topk, contexts="own")


def emit(name, fn, *args):
    """One case's JSON line, or its failure on stderr; the next case runs either way."""
    try:
        print(json.dumps(fn(name, *args)), flush=True)
    except Exception:
        print(f"{name} failed", file=sys.stderr); traceback.print_exc()
    torch.cuda.empty_cache()


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
    # --only SUBSTR: the cases whose name holds SUBSTR (a device call short of time)
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    cases = [c for c in cases if only in c[0]]
    for c in cases:
        emit(c[0], case, *c[1:])
    for c in [c for c in cases if " h64 " in c[0]]:  # the 64-head shapes in fp8
        emit(c[0].replace("torch.indexer.", "torch.indexer.fp8."), case_fp8, *c[1:])
    own = ("torch.indexer.decode_own 128x16384 h64 d128 (a context a token)", 128, 16384, 64,
           128, 2048)
    if only in own[0]:
        emit(own[0], case_own, *own[1:])
    try:
        import deep_gemm
        print(json.dumps(dict(deep_gemm="loaded", version=getattr(deep_gemm, "__version__", "?"))), flush=True)
    except Exception as e:
        print(json.dumps(dict(deep_gemm=f"not loadable: {str(e)[:300]}")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

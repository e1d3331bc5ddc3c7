#!/usr/bin/env python3
"""Independent re-implementation of SPEC.md §3-6 (plan), compared against
`sparsecp plan --json` on the worked example, the replicated set of §3 and random
batches. Written from SPEC.md alone, not from the planner's code. ctest runs it
(cli_plan_reference)."""
import json, random, subprocess, sys

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/tools/sparsecp"
DEF = dict(pcp=1, dcp=1, tp=1, interleave=1, block_size=64, pad_multiple=1,
           max_gathered_rows=1048576, layers=1)

def owner(p, N, I): return (p // I) % N
def jloc(p, N, I): return (p // (N * I)) * I + p % I
def local_len(L, r, N, I): return (L // (N * I)) * I + min(max(L % (N * I) - r * I, 0), I)

def ref(cfg, reqs, model):
    P, N, T, I = cfg["pcp"], cfg["dcp"], cfg["tp"], cfg["interleave"]
    C = 2 * P
    rows = {r: [] for r in range(P)}
    start = 0; starts = []
    info = []
    for i, rq in enumerate(reqs):
        c, q, pf = rq["computed"], rq["scheduled"], rq["prefill"]
        starts.append(start); start += q
        if q == 0: info.append(None); continue
        cs = -(-q // C)
        drops = (C - 1) * cs >= q
        split = pf and P > 1 and not (N > 1 and drops)
        info.append((split, cs))
        for r in range(P):
            if split:
                for k in (r, C - 1 - r):
                    lo, hi = k * cs, min((k + 1) * cs, q)
                    if hi > lo: rows[r].append((1 if pf else 0, i, lo, hi - lo, True))
            else:
                rows[r].append((1 if pf else 0, i, 0, q, False))
    for r in rows: rows[r].sort(key=lambda x: (x[0], x[1], x[2]))
    Tl = [sum(x[3] for x in rows[r]) for r in range(P)]
    pm = cfg["pad_multiple"]
    tpad = -(-max(Tl) // pm) * pm
    D = sum(rq["scheduled"] for rq in reqs if not rq["prefill"])
    gidx = [0] * (P * tpad); mask = [False] * (P * tpad); restore = [None] * start
    for r in range(P):
        s = r * tpad
        for (_, i, off, ln, sp) in rows[r]:
            for t in range(ln):
                g = starts[i] + off + t
                gidx[s] = g
                own = sp or r == 0
                if own:
                    assert restore[g] is None; restore[g] = s; mask[s] = True
                s += 1
    out = dict(t_pad=tpad, num_decode_tokens=D, padded_gather_idx=gidx,
               hidden_restore_idx=restore, kv_write_mask=mask,
               ranks=[dict(rank=r, num_tokens=Tl[r], rows=[dict(req=x[1], offset=x[2], len=x[3], split=x[4]) for x in rows[r]]) for r in range(P)],
               extents=[rq["computed"] + rq["scheduled"] for rq in reqs],
               dcp_local_seq_lens=[[local_len(rq["computed"] + rq["scheduled"], r, N, I) for r in range(N)] for rq in reqs])
    chunks = []
    if N > 1:
        M = cfg["max_gathered_rows"]; bud = M // N
        cur = None
        for i, rq in enumerate(reqs):
            if not rq["prefill"] or rq["scheduled"] == 0: continue
            E = rq["computed"] + rq["scheduled"]; S = local_len(E, 0, N, I)
            if S > bud: return "error"
            if cur is None or cur["tot"] + S > bud:
                cur = dict(regs=[], tot=0); chunks.append(cur)
            cur["regs"].append(dict(req=i, extent=E, shard_rows=S, ws_start=cur["tot"]))
            cur["tot"] += S
        cj = []
        for ch in chunks:
            de = []
            for g in ch["regs"]:
                for p in range(g["extent"]):
                    de.append(owner(p, N, I) * ch["tot"] + g["ws_start"] + jloc(p, N, I))
            cj.append(dict(regions=ch["regs"], shard_rows_total=ch["tot"], deinterleave_idx=de))
        out["chunks"] = cj
    # collectives
    H, kvr, rope, idim, K, hid = model
    Hl = H // T; Hatt = Hl * N if P == 1 else Hl
    kvw = kvr + rope
    has_pf = any(rq["prefill"] and rq["scheduled"] > 0 for rq in reqs)
    co = []
    for l in range(cfg["layers"]):
        if has_pf and P > 1: co.append((l, "pcp", "all_gather", tpad - D, kvw + idim, "prefill_kv"))
        if has_pf and N > 1:
            for ch in chunks: co.append((l, "dcp", "all_gather", ch["tot"], kvw + idim, "context_kv"))
        if D > 0 and N > 1 and P == 1: co.append((l, "dcp", "all_gather", D, Hl * kvw, "decode_q"))
        if D > 0 and N > 1:
            co.append((l, "dcp", "all_gather", D, 2 * K, "topk_candidates"))
            co.append((l, "dcp", "all_gather", D, Hatt, "decode_lse"))
            co.append((l, "dcp", "all_reduce" if P > 1 else "reduce_scatter", D, Hatt * kvr, "decode_out"))
        if T > 1:
            co.append((l, "tp", "all_reduce", tpad, hid, "attn_out"))
            co.append((l, "tp", "all_reduce", tpad, hid, "mlp_out"))
    if P > 1: co.append((-1, "pcp", "all_gather", tpad, hid, "hidden_restore"))
    out["collectives"] = [dict(seq=s, layer=c[0], group=c[1], op=c[2], rows=c[3], width=c[4], purpose=c[5]) for s, c in enumerate(co)]
    return out

def run(cfg, reqs):
    p = subprocess.run([BIN, "plan", "--json"], input=json.dumps(dict(config=cfg, requests=reqs)),
                       capture_output=True, text=True)
    return json.loads(p.stdout), p.returncode

def compare(cfg, reqs, model):
    full = dict(DEF); full.update(cfg)
    got, rc = run(cfg, reqs)
    exp = ref(full, reqs, model)
    if exp == "error":
        return rc != 0 or f"expected error, got rc {rc}"
    if rc != 0: return f"unexpected error {got}"
    bad = []
    for k, v in exp.items():
        g = got.get(k)
        if k == "chunks":
            g = [dict(regions=[dict(req=r["req"], extent=r["extent"], shard_rows=r["shard_rows"], ws_start=r["ws_start"]) for r in c["regions"]],
                      shard_rows_total=c["shard_rows_total"], deinterleave_idx=c["deinterleave_idx"]) for c in (g or [])]
        if g != v: bad.append((k, v, g))
    return bad or True

if __name__ == "__main__":
    # usage: ref_plan.py SPARSECP [SEED [BATCHES]]; exit 1 on any difference
    failures = 0
    # SPEC's worked example (§3-6)
    cfg = dict(pcp=2, dcp=2, interleave=1, heads=8, kv_lora_rank=16, rope_dim=8, index_dim=8, topk=4, hidden=32)
    model = (8, 16, 8, 8, 4, 32)
    wex = [dict(computed=0, scheduled=11, prefill=True), dict(computed=6, scheduled=8, prefill=True)]
    res = compare(cfg, wex, model)
    print("worked example:", res)
    failures += res is not True
    # SPEC §3: at P = N = 2 a new prefill of q tokens is replicated for q in {1,2,3,5,6,9}
    replicated = set()
    for q in range(1, 10):
        got, _ = run(dict(pcp=2, dcp=2), [dict(computed=0, scheduled=q, prefill=True)])
        if not got["ranks"][0]["rows"][0]["split"]: replicated.add(q)
    print("replicated at P = N = 2:", sorted(replicated))
    failures += replicated != {1, 2, 3, 5, 6, 9}
    random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    nfail = 0
    for it in range(int(sys.argv[3]) if len(sys.argv) > 3 else 1500):
        P = random.choice([1, 1, 2, 3, 4])
        T = random.choice([1, 2, 4])
        if P > 1: N = random.choice([1, P])
        else: N = random.choice([d for d in (1, 2, 4) if T % d == 0])
        B = random.choice([4, 8, 16]); I = random.choice([d for d in (1, 2, 4, 8) if B % d == 0])
        H = T * random.choice([1, 2])
        c = dict(pcp=P, dcp=N, tp=T, interleave=I, block_size=B, pad_multiple=random.choice([1, 1, 4]),
                 max_gathered_rows=random.choice([1048576, 64, 40 * N]), layers=random.choice([1, 2]),
                 heads=H, kv_lora_rank=16, rope_dim=8, index_dim=8, topk=random.choice([2, 4]), hidden=32)
        model = (H, 16, 8, 8, c["topk"], 32)
        reqs = []
        for _ in range(random.randint(1, 5)):
            pf = random.random() < 0.6
            q = random.randint(0, 25) if pf else random.choice([0, 1, 1, 1, 2])
            cc = random.randint(0, 30)
            if cc + q == 0: cc = 1
            reqs.append(dict(computed=cc, scheduled=q, prefill=pf))
        if sum(r["scheduled"] for r in reqs) == 0: reqs[0]["scheduled"] = 1
        res = compare(c, reqs, model)
        if res is not True:
            nfail += 1
            if nfail < 5: print("MISMATCH", c, reqs, res)
    print("random mismatches:", nfail)
    failures += nfail
    sys.exit(1 if failures else 0)

#!/usr/bin/env python3
"""Makes logits.json, the reference that tests/unit/test_hf_forward.c checks sparsecp's
forward pass against: transformers' own DeepseekV32ForCausalLM (issue 23, point 6) run on
the committed tiny checkpoint tiny-bf16/ (bf16 weights), in float32 (the weights widened
exactly, every activation f32, as sparsecp's CPU backend computes), eager attention.

For each case: a prompt of random token ids, then GEN greedy tokens. Every step runs the
whole sequence again without a cache (the plainest use of the library), and records the
last position's logits: row 0 after the prompt, row i after i generated tokens; the
greedy token of row i is the argmax of row i.

A case is kept only when no choice inside it is a tie or a near tie, because two correct
f32 implementations may break them differently: torch.topk picks among equal values in its
own way (neither the lower nor the higher position consistently), sparsecp takes the lower
position, and this tiny random model's indexer often scores several keys exactly 0 (every
head's ReLU is 0). So for every layer and query row with more than K keys, transformers'
selected set must equal sparsecp's rule's, an exact tie cut at the boundary must be one of
zeros (which both compute exactly), and no other score may lie within MARGIN (relative to
the row's largest |score|) of the boundary score; every token's routed experts (and kept
groups) must win by more than MARGIN; every greedy token's logit must lead the runner-up
by more than TOKEN_MARGIN. Rejected draws are counted in the output (rejected_draws). The margins are recomputed from each module's inputs with the
module's own weights (forward hooks), line for line as modeling_deepseek_v32.py scores
them; the logits themselves are the library's, untouched.

Needs torch and transformers >= 5 (deepseek_v32); CI has neither, so the output is
committed and this is run by hand:

    python3 tests/data/hf_checkpoint/make_logits.py

(LENGTHS=5,10 picks other prompt lengths; VERBOSE=1 prints why each draw was rejected.)
make_glm_logits.py uses reference() below for GLM-5's glm_moe_dsa.
"""
import json
import os
import random
import sys

import torch
import transformers
from transformers import DeepseekV32ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "tiny-bf16")
# prompt lengths: below index_topk (8: every key attended) and above it
LENGTHS = [int(x) for x in os.environ.get("LENGTHS", "5,10,16,20").split(",")]
GEN = 6
MARGIN = 1e-4
TOKEN_MARGIN = 1e-3


def reference(model, rotate, lengths=None):
    """The kept cases of model (in eval mode, float32) and the number of rejected draws.
    rotate is the indexer's rotary function of the model's modeling file (q, k, cos, sin,
    unsqueeze_dim=...); layers without an indexer (glm_moe_dsa's "shared" ones) reuse an
    earlier layer's selection, which that layer's hook has checked."""
    lengths = LENGTHS if lengths is None else lengths
    cfg = model.config
    margins = {"index": float("inf"), "route": float("inf")}

    def indexer_hook(mod, args, kwargs, out):
        hs = kwargs.get("hidden_states", args[0] if args else None)
        q_resid = kwargs.get("q_resid", args[1] if len(args) > 1 else None)
        cos, sin = kwargs.get("position_embeddings", args[2] if len(args) > 2 else None)
        b, s, _ = hs.shape
        q = mod.wq_b(q_resid).view(b, s, mod.n_heads, mod.head_dim)
        q_rot, q_pass = torch.split(q, [mod.qk_rope_head_dim, mod.head_dim - mod.qk_rope_head_dim], -1)
        k = mod.k_norm(mod.wk(hs)).unsqueeze(2)
        k_rot, k_pass = torch.split(k, [mod.qk_rope_head_dim, mod.head_dim - mod.qk_rope_head_dim], -1)
        q_rot, k_rot = rotate(q_rot, k_rot, cos, sin, unsqueeze_dim=2)
        q = torch.cat([q_rot, q_pass], -1)
        k = torch.cat([k_rot, k_pass], -1).squeeze(2)
        sc = torch.relu(torch.matmul(q.float(), k.transpose(-1, -2).float().unsqueeze(1)) * mod.softmax_scale)
        w = mod.weights_proj(hs).float() * (mod.n_heads ** -0.5)
        idx = torch.matmul(w.unsqueeze(-2), sc).squeeze(-2)  # [B, S, T]
        for t in range(s):
            row = idx[0, t, : t + 1]
            K = mod.index_topk
            if row.numel() <= K:
                continue
            # sparsecp's rule: score descending, ties to the lower position
            order = sorted(range(t + 1), key=lambda j: (-row[j].item(), j))
            mine = set(order[:K])
            theirs = set(out[0, t].tolist())
            b = row[order[K - 1]].item()
            tied = {j for j in range(t + 1) if row[j].item() == b}
            straddles = not tied <= mine
            if mine != theirs or (straddles and b != 0.0):
                if os.environ.get("VERBOSE"):
                    print("indexer row", t, "mine", sorted(mine), "theirs", sorted(theirs), "b", b,
                          "tied", sorted(tied), file=sys.stderr)
                margins["index"] = 0.0  # a different pick, or a tie that is not an exact zero
                continue
            # an f32 rounding must not move a score across b: the nearest score below it, and
            # with a tie cut at the boundary the nearest above it too
            scale = max(row.abs().max().item(), 1e-30)
            below = [b - row[j].item() for j in range(t + 1) if row[j].item() < b]
            above = [row[j].item() - b for j in range(t + 1) if row[j].item() > b]
            gaps = below + (above if straddles else [])
            if gaps:
                margins["index"] = min(margins["index"], min(gaps) / scale)

    def router_hook(mod, args, out):
        logits = out[0]
        scores = logits.sigmoid()
        choice = scores + mod.e_score_correction_bias
        g = choice.view(-1, mod.num_group, mod.num_experts // mod.num_group)
        gs = g.topk(2, dim=-1)[0].sum(-1)
        for r in range(gs.shape[0]):
            v = torch.sort(gs[r], descending=True).values
            if mod.topk_group < mod.num_group:
                margins["route"] = min(margins["route"], (v[mod.topk_group - 1] - v[mod.topk_group]).item())
            keep = torch.topk(gs[r], mod.topk_group).indices
            allowed = torch.cat([choice[r].view(mod.num_group, -1)[i] for i in sorted(keep.tolist())])
            a = torch.sort(allowed, descending=True).values
            if a.numel() > mod.top_k:
                margins["route"] = min(margins["route"], (a[mod.top_k - 1] - a[mod.top_k]).item())

    for layer in model.model.layers:
        if getattr(layer.self_attn, "indexer", None) is not None:
            layer.self_attn.indexer.register_forward_hook(indexer_hook, with_kwargs=True)
        if hasattr(layer.mlp, "gate"):
            layer.mlp.gate.register_forward_hook(router_hook)

    rng = random.Random(23)
    cases, rejected = [], 0
    for n in lengths:
        while True:
            prompt = [rng.randrange(cfg.vocab_size) for _ in range(n)]
            margins["index"] = margins["route"] = float("inf")
            seq, rows, tok_margin = list(prompt), [], float("inf")
            with torch.no_grad():
                for _ in range(GEN):
                    out = model(torch.tensor([seq]), use_cache=False).logits[0, -1]
                    top = torch.topk(out, 2).values
                    tok_margin = min(tok_margin, (top[0] - top[1]).item())
                    rows.append(out.tolist())
                    seq.append(int(torch.argmax(out)))
                    if not ok(margins, tok_margin):
                        break  # rejected already: the rest cannot change that
            if ok(margins, tok_margin):
                break
            rejected += 1
            if os.environ.get("VERBOSE"):
                print(n, margins, tok_margin, file=sys.stderr)
        cases.append({"prompt": prompt, "generated": seq[n:], "logits": rows,
                      "min_index_margin": margins["index"], "min_route_margin": margins["route"],
                      "min_token_margin": tok_margin})
        print(f"prompt {n}: tokens {seq[n:]}, margins index {margins['index']:.3g} "
              f"route {margins['route']:.3g} token {tok_margin:.3g}", file=sys.stderr)
    return cases, rejected


def ok(margins, tok_margin):
    return margins["index"] > MARGIN and margins["route"] > MARGIN and tok_margin > TOKEN_MARGIN


def main():
    from transformers.models.deepseek_v32.modeling_deepseek_v32 import apply_rotary_pos_emb
    torch.manual_seed(0)
    model = DeepseekV32ForCausalLM.from_pretrained(MODEL, dtype=torch.float32,
                                                   attn_implementation="eager")
    model.eval()
    cases, rejected = reference(model, apply_rotary_pos_emb)
    out = {"model": "tiny-bf16", "transformers": transformers.__version__,
           "torch": torch.__version__, "dtype": "float32", "attn_implementation": "eager",
           "gen": GEN, "margin": MARGIN, "token_margin": TOKEN_MARGIN,
           "rejected_draws": rejected, "cases": cases}
    with open(os.path.join(HERE, "logits.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Makes tests/data/moe_yarn/reference.json for tests/unit/test_moe_yarn.c (issue 23,
point 2): YaRN rotary frequencies, scale corrections and rotations, and DeepSeek-V3
expert routing with the MoE combine, computed in float64 by plain Python (no torch, no
numpy: neither is on the CI machine).

The formulas are re-implemented here following the transformers source line by line,
not sparsecp's C code:

  src/transformers/modeling_rope_utils.py
      _compute_yarn_parameters (get_mscale, find_correction_dim, find_correction_range
      with truncate = True, linear_ramp_factor, the inv_freq blend, attention_factor)
  src/transformers/models/deepseek_v32/modeling_deepseek_v32.py
      yarn_get_mscale, yarn_apply_mscale (the attention softmax scale),
      DeepseekV32RotaryEmbedding.forward (emb = cat(freqs, freqs), cos/sin times
      attention_scaling), rotate_half + apply_rotary_pos_emb (the indexer's layout),
      apply_rotary_pos_emb_interleave (the MLA layout; its output is de-interleaved,
      [rotated evens ; rotated odds]), DeepseekV32TopkRouter.forward,
      DeepseekV32Experts / DeepseekV32MoE.forward (the combine)

torch.topk(sorted=False) leaves ties unspecified; here they go to the lower index (what
sparsecp implements), and the random routing cases are redrawn until no two candidates
lie within 1e-4 of each other at a selection boundary, so float32 rounding cannot change
a pick. Inputs are float32 values (rounded here), so the C test reads exactly what this
script used. Deterministic (fixed seeds):

    python3 tests/data/moe_yarn/make_reference.py > tests/data/moe_yarn/reference.json
"""
import json
import math
import random
import struct


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ---- modeling_rope_utils._compute_yarn_parameters ----

def get_mscale(scale, mscale=1):
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def compute_yarn_parameters(rope, dim):
    base = rope["rope_theta"]
    factor = rope["factor"]
    attention_factor = rope.get("attention_factor")
    mscale = rope.get("mscale")
    mscale_all_dim = rope.get("mscale_all_dim")
    original_max_position_embeddings = rope["original_max_position_embeddings"]
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
        else:
            attention_factor = get_mscale(factor)
    beta_fast = rope.get("beta_fast") or 32
    beta_slow = rope.get("beta_slow") or 1

    def find_correction_dim(num_rotations, dim, base, max_position_embeddings):
        return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    def find_correction_range(low_rot, high_rot, dim, base, max_position_embeddings, truncate):
        low = find_correction_dim(low_rot, dim, base, max_position_embeddings)
        high = find_correction_dim(high_rot, dim, base, max_position_embeddings)
        if truncate:
            low = math.floor(low)
            high = math.ceil(high)
        return max(low, 0), min(high, dim - 1)

    def linear_ramp_factor(min_, max_, dim):
        if min_ == max_:
            max_ += 0.001
        return [min(max((i - min_) / (max_ - min_), 0.0), 1.0) for i in range(dim)]

    pos_freqs = [base ** (i / dim) for i in range(0, dim, 2)]
    inv_freq_extrapolation = [1.0 / p for p in pos_freqs]
    inv_freq_interpolation = [1.0 / (factor * p) for p in pos_freqs]
    low, high = find_correction_range(beta_fast, beta_slow, dim, base, original_max_position_embeddings, True)
    extrapolation_factor = [1 - r for r in linear_ramp_factor(low, high, dim // 2)]
    inv_freq = [ip * (1 - e) + ep * e for ip, ep, e in
                zip(inv_freq_interpolation, inv_freq_extrapolation, extrapolation_factor)]
    return inv_freq, attention_factor, low, high


def compute_default_parameters(rope, dim):
    base = rope["rope_theta"]
    return [1.0 / (base ** (i / dim)) for i in range(0, dim, 2)], 1.0


# ---- modeling_deepseek_v32: softmax scale and rotations ----

def yarn_apply_mscale(rope, scaling):
    if rope.get("rope_type", "default") != "default":
        mscale_all_dim = rope.get("mscale_all_dim", 0)
        scaling_factor = rope["factor"]
        if mscale_all_dim:
            mscale = get_mscale(scaling_factor, mscale_all_dim)
            scaling = scaling * mscale * mscale
    return scaling


def cos_sin(inv_freq, attention_scaling, pos):
    freqs = [pos * f for f in inv_freq]
    emb = freqs + freqs
    return [math.cos(t) * attention_scaling for t in emb], [math.sin(t) * attention_scaling for t in emb]


def rotate_half(x):
    h = len(x) // 2
    return [-v for v in x[h:]] + x[:h]


def apply_rotary_pos_emb(x, cos, sin):  # the indexer: halves
    r = rotate_half(x)
    return [a * c + b * s for a, b, c, s in zip(x, r, cos, sin)]


def apply_rotary_pos_emb_interleave(x, cos, sin):  # MLA: interleaved in, [evens ; odds] out
    h = len(cos) // 2
    cos, sin = cos[:h], sin[:h]
    x1, x2 = x[0::2], x[1::2]
    return ([a * c - b * s for a, b, c, s in zip(x1, x2, cos, sin)] +
            [b * c + a * s for a, b, c, s in zip(x1, x2, cos, sin)])


YARN_CASES = [
    # name, rotary width, rope parameters (rope_type "default" = plain RoPE)
    ("v32_full", 64, dict(rope_type="yarn", rope_theta=10000.0, factor=40.0,
                          original_max_position_embeddings=4096, beta_fast=32.0, beta_slow=1.0,
                          mscale=1.0, mscale_all_dim=1.0)),
    ("tiny_checkpoint", 8, dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                original_max_position_embeddings=64, beta_fast=32.0,
                                beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)),
    ("factor_one", 64, dict(rope_type="yarn", rope_theta=10000.0, factor=1.0,
                            original_max_position_embeddings=4096, beta_fast=32.0, beta_slow=1.0,
                            mscale=1.0, mscale_all_dim=1.0)),
    ("mscale_differs", 32, dict(rope_type="yarn", rope_theta=50000.0, factor=16.0,
                                original_max_position_embeddings=2048, beta_fast=16.0,
                                beta_slow=2.0, mscale=0.707, mscale_all_dim=1.3)),
    ("no_mscale_all_dim", 64, dict(rope_type="yarn", rope_theta=10000.0, factor=8.0,
                                   original_max_position_embeddings=4096, beta_fast=32.0,
                                   beta_slow=1.0, mscale=1.0, mscale_all_dim=0.0)),
    ("low_equals_high", 16, dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                 original_max_position_embeddings=4, beta_fast=32.0,
                                 beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)),
    ("high_below_zero", 16, dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                 original_max_position_embeddings=1, beta_fast=32.0,
                                 beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)),
    ("low_above_width", 16, dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                 original_max_position_embeddings=2000000000, beta_fast=1.0,
                                 beta_slow=0.5, mscale=1.0, mscale_all_dim=1.0)),
    ("range_clamped", 16, dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                               original_max_position_embeddings=100000000, beta_fast=1.0,
                               beta_slow=0.5, mscale=1.0, mscale_all_dim=1.0)),
    ("plain", 64, dict(rope_type="default", rope_theta=10000.0)),
]
POSITIONS = [0, 1, 7, 100, 4095, 4096, 65535, 163839]
QK_HEAD_DIM = 192


def yarn_reference():
    rng = random.Random(23)
    out = []
    for name, dim, rope in YARN_CASES:
        if rope["rope_type"] == "yarn":
            inv_freq, attn, low, high = compute_yarn_parameters(rope, dim)
        else:
            (inv_freq, attn), low, high = compute_default_parameters(rope, dim), None, None
        x = [f32(rng.uniform(-2, 2)) for _ in range(dim)]
        rot = []
        for p in POSITIONS:
            cos, sin = cos_sin(inv_freq, attn, p)
            rot.append(dict(pos=p, halves=apply_rotary_pos_emb(x, cos, sin),
                            interleave_hf=apply_rotary_pos_emb_interleave(x, cos, sin)))
        out.append(dict(name=name, rot_dim=dim, rope=rope, inv_freq=inv_freq,
                        low=low, high=high, attention_factor=attn,
                        softmax_scale=yarn_apply_mscale(rope, QK_HEAD_DIM ** -0.5),
                        qk_head_dim=QK_HEAD_DIM, x=x, rotations=rot))
    return out


# ---- DeepseekV32TopkRouter.forward, DeepseekV32MoE.forward ----

def topk(values, k):  # ties to the lower index; returns indices
    return sorted(range(len(values)), key=lambda i: (-values[i], i))[:k]


def router(logits, bias, n_group, topk_group, top_k, norm_topk_prob, routed_scaling_factor):
    n = len(logits)
    per = n // n_group
    scores = [1.0 / (1.0 + math.exp(-z)) for z in logits]
    scores_for_choice = [s + b for s, b in zip(scores, bias)]
    group_scores = [sum(sorted(scores_for_choice[g * per:(g + 1) * per], reverse=True)[:2])
                    for g in range(n_group)]
    group_idx = topk(group_scores, topk_group)
    score_mask = [(e // per) in group_idx for e in range(n)]
    masked = [c if m else -math.inf for c, m in zip(scores_for_choice, score_mask)]
    topk_indices = topk(masked, top_k)
    topk_weights = [scores[e] for e in topk_indices]
    if norm_topk_prob:
        denominator = sum(topk_weights) + 1e-20
        topk_weights = [w / denominator for w in topk_weights]
    topk_weights = [w * routed_scaling_factor for w in topk_weights]
    order = sorted(range(top_k), key=lambda i: topk_indices[i])  # sparsecp: ascending expert
    return ([topk_indices[i] for i in order], [topk_weights[i] for i in order],
            group_scores, group_idx, scores_for_choice, masked)


def clear_margins(group_scores, group_idx, masked, top_k, eps=1e-4):
    """No two values straddle a selection boundary within eps."""
    def ok(values, k):
        s = sorted(values, reverse=True)
        return k >= len(s) or s[k - 1] - s[k] > eps
    return ok(group_scores, len(group_idx)) and ok([m for m in masked if m != -math.inf], top_k)


ROUTE_CASES = [
    # name, n_experts, n_group, topk_group, k, norm_topk_prob, routed_scaling_factor, count
    ("v3_full", 256, 8, 4, 8, True, 2.5, 6),
    ("tiny_checkpoint", 16, 4, 2, 4, True, 2.5, 6),
    ("one_group", 64, 1, 1, 6, False, 1.0, 4),
    ("odd_groups", 30, 5, 3, 7, True, 1.5, 4),
    ("no_norm", 32, 8, 3, 5, False, 2.5, 4),
]


def route_reference():
    rng = random.Random(2323)
    out = []
    for name, n, g, tg, k, norm, rsf, count in ROUTE_CASES:
        made = 0
        while made < count:
            logits = [f32(rng.gauss(0, 2)) for _ in range(n)]
            bias = [f32(rng.uniform(-0.3, 0.3)) for _ in range(n)]
            experts, weights, gs, gi, _, masked = router(logits, bias, g, tg, k, norm, rsf)
            if not clear_margins(gs, gi, masked, k):
                continue
            hidden = 8
            routed = [[f32(rng.uniform(-1, 1)) for _ in range(hidden)] for _ in range(k)]
            shared = [f32(rng.uniform(-1, 1)) for _ in range(hidden)]
            combined = [sum(w * r[h] for w, r in zip(weights, routed)) + shared[h]
                        for h in range(hidden)]
            out.append(dict(name=f"{name}_{made}", n_experts=n, n_group=g, topk_group=tg, k=k,
                            norm_topk_prob=norm, routed_scaling_factor=rsf, logits=logits,
                            bias=bias, experts=experts, weights=weights, hidden=hidden,
                            routed=routed, shared=shared, combined=combined))
            made += 1
    return out


if __name__ == "__main__":
    json.dump(dict(source="tests/data/moe_yarn/make_reference.py (transformers formulas, float64)",
                   yarn=yarn_reference(), route=route_reference()),
              __import__("sys").stdout, indent=1)
    print()

#!/usr/bin/env python3
"""Makes the GLM-5 reference of tests/unit/test_hf_forward.c: a tiny GlmMoeDsaForCausalLM
(transformers' glm_moe_dsa, GLM-5's variant of DeepSeek-V3.2's sparse attention; issue 23,
point 6) built from CONFIG below, saved in bf16 as tiny-glm-bf16/ (three shards and an
index, as save_pretrained writes them), then loaded back in float32 (eager attention, on
the CPU) and run on random prompts exactly as make_logits.py runs DeepSeek-V3.2 (its
reference(): the logits after the prompt and after each of 6 greedy tokens, draws with a
tie or near tie rejected). Writes

    tests/data/hf_checkpoint/tiny-glm-bf16/   config.json, generation_config.json,
                                              model.safetensors.index.json, the shards
    tests/data/hf_checkpoint/glm_logits.json  the reference, logits.json's format

What the model exercises, beside what tiny-bf16 already does: 4 layers whose
indexer_types are full, shared, full, shared (a shared layer has no indexer and reuses
the top-K of the full layer before it, a later full layer replaces it); the indexer's
interleaved rotary pairs; rms_norm_eps 1e-5 (GLM-5's; the q/kv latent norms keep 1e-6);
plain RoPE with theta 1e6 (GLM-5 has no YaRN); one expert group (n_group 1, GLM-5's);
norm weights, the indexer key norm's bias and the router's e_score_correction_bias drawn
away from their initial 1 / 0 / 0, so that a permuted norm or an ignored bias shows.

Needs torch and transformers >= 5.17 (glm_moe_dsa); deterministic (seed 0, random 23),
about a minute on a CPU. Run from the repository root:

    python3 tests/data/hf_checkpoint/make_glm_logits.py

(LENGTHS=5,10 picks other prompt lengths; VERBOSE=1 prints why each draw was rejected.)
"""
import json
import os
import shutil
import sys
import tempfile

import torch
import transformers
from transformers import GlmMoeDsaConfig, GlmMoeDsaForCausalLM
from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import apply_rotary_pos_emb_interleave

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_logits  # noqa: E402 (its reference() and margins)

NAME = "tiny-glm-bf16"
OUT = os.path.join(HERE, NAME)
LOGITS = os.path.join(HERE, "glm_logits.json")
INDEXER_TYPES = ["full", "shared", "full", "shared"]
CONFIG = dict(
    vocab_size=256, hidden_size=64, intermediate_size=32, moe_intermediate_size=16,
    num_hidden_layers=4, first_k_dense_replace=1, num_attention_heads=2,
    num_key_value_heads=2, q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16,
    qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=4, n_shared_experts=1,
    num_experts_per_tok=2, n_group=1, topk_group=1, routed_scaling_factor=2.5,
    norm_topk_prob=True, index_n_heads=4, index_head_dim=16, index_topk=8,
    max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False,
    indexer_types=INDEXER_TYPES,
    rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
)


def build():
    """The random model, its norms and biases moved off their initial values, in bf16."""
    torch.manual_seed(0)
    model = GlmMoeDsaForCausalLM(GlmMoeDsaConfig(**CONFIG))
    assert list(model.config.indexer_types) == INDEXER_TYPES, model.config.indexer_types
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):  # every RMSNorm and the indexer's LayerNorm
                p.add_(0.1 * torch.randn_like(p))
            elif name.endswith("k_norm.bias"):
                p.copy_(0.1 * torch.randn_like(p))
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.05 * torch.randn_like(b))
    for i, layer in enumerate(model.model.layers):
        assert (layer.self_attn.indexer is None) == (INDEXER_TYPES[i] == "shared"), i
    return model.to(torch.bfloat16)


def save(model):
    """Saves model into OUT (replaced), as save_pretrained writes it; returns its files."""
    tmp = tempfile.mkdtemp()
    model.save_pretrained(tmp, max_shard_size="100KB")
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    files = sorted(f for f in os.listdir(tmp) if f.endswith(".json") or f.endswith(".safetensors"))
    for f in files:
        shutil.copy(os.path.join(tmp, f), OUT)
    shutil.rmtree(tmp, ignore_errors=True)
    return files


def main():
    files = save(build())
    size = sum(os.path.getsize(os.path.join(OUT, f)) for f in files)
    print(f"{NAME}: {', '.join(files)}; {size} bytes -> {OUT}")
    model = GlmMoeDsaForCausalLM.from_pretrained(OUT, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    names = {n for n, _ in model.named_parameters()}
    for i, t in enumerate(INDEXER_TYPES):  # what the checkpoint holds, layer by layer
        has = f"model.layers.{i}.self_attn.indexer.wk.weight" in names
        assert has == (t == "full"), (i, t)
    cases, rejected = make_logits.reference(model, apply_rotary_pos_emb_interleave)
    out = {"model": NAME, "model_type": "glm_moe_dsa", "indexer_types": INDEXER_TYPES,
           "transformers": transformers.__version__, "torch": torch.__version__,
           "dtype": "float32", "attn_implementation": "eager", "gen": make_logits.GEN,
           "margin": make_logits.MARGIN, "token_margin": make_logits.TOKEN_MARGIN,
           "rejected_draws": rejected, "cases": cases}
    with open(LOGITS, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"glm_logits.json: {len(cases)} prompts of {[len(c['prompt']) for c in cases]} tokens, "
          f"{make_logits.GEN} greedy tokens each, {rejected} draws rejected; "
          f"transformers {transformers.__version__}, torch {torch.__version__} -> {LOGITS}")


if __name__ == "__main__":
    main()

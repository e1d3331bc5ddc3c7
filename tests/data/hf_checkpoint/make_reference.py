#!/usr/bin/env python3
"""Makes the reference data of tests/unit/test_hf_checkpoint.c with Hugging Face
transformers' own deepseek_v32 model (issue 23): a tiny DeepseekV32ForCausalLM built from
CONFIG below is saved with save_pretrained (bf16, sharded), and what it wrote is recorded:

  transformers.json   the saved config.json, and every tensor of every shard with its
                      dtype and shape, read from the safetensors headers
  tiny-bf16/          the saved directory itself (config.json, the index, the shards)

sparsecp's own table (model/hf_checkpoint.h) must name exactly these tensors with these
shapes, and `sparsecp checkpoint` must accept the directory. Needs torch and transformers
(>= 5, whose deepseek_v32 keeps routed experts fused in memory and writes them per expert
on save); CI has neither, so the output is committed and this script is run by hand:

    python3 tests/data/hf_checkpoint/make_reference.py OUTDIR
"""
import json
import os
import shutil
import struct
import sys
import tempfile

CONFIG = dict(
    vocab_size=256, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
    num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=2,
    num_key_value_heads=2, q_lora_rank=48, kv_lora_rank=32, qk_nope_head_dim=16,
    qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=4, n_shared_experts=1,
    num_experts_per_tok=2, n_group=2, topk_group=1, routed_scaling_factor=2.5,
    norm_topk_prob=True, index_n_heads=2, index_head_dim=16, index_topk=8,
    max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False,
    rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                         original_max_position_embeddings=64, beta_fast=32.0,
                         beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0),
)


def header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return {k: {"dtype": v["dtype"], "shape": v["shape"]} for k, v in h.items()}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    import torch
    import transformers
    from transformers import DeepseekV32Config, DeepseekV32ForCausalLM

    torch.manual_seed(0)
    cfg = DeepseekV32Config(**CONFIG)
    model = DeepseekV32ForCausalLM(cfg).to(torch.bfloat16)
    state = {k: list(v.shape) for k, v in model.state_dict().items()}
    tmp = tempfile.mkdtemp()
    model.save_pretrained(tmp, max_shard_size="100KB")
    files = sorted(f for f in os.listdir(tmp) if f.endswith(".safetensors"))
    tensors = {}
    for f in files:
        for k, v in header(os.path.join(tmp, f)).items():
            v["shard"] = f
            tensors[k] = v
    with open(os.path.join(tmp, "config.json")) as f:
        saved_cfg = json.load(f)
    ref = {"transformers": transformers.__version__, "torch": torch.__version__,
           "config": saved_cfg, "shards": files, "tensors": tensors,
           "state_dict": state}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "transformers.json"), "w") as f:
        json.dump(ref, f, indent=1, sort_keys=True)
    dst = os.path.join(out, "tiny-bf16")
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    for f in os.listdir(tmp):
        if f.endswith(".json") or f.endswith(".safetensors"):
            shutil.copy(os.path.join(tmp, f), dst)
    print(f"transformers {transformers.__version__}: {len(tensors)} tensors in "
          f"{len(files)} shards -> {out}")


if __name__ == "__main__":
    main()

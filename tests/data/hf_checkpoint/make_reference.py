#!/usr/bin/env python3
"""Makes the reference data of tests/unit/test_hf_checkpoint.c with Hugging Face
transformers' own deepseek_v32 model (issue 23): a tiny DeepseekV32ForCausalLM built from
CONFIG below is saved with save_pretrained (bf16, sharded), and what it wrote is recorded:

  transformers.json   the saved config.json, and every tensor of every shard with its
                      dtype and shape, read from the safetensors headers
  tiny-bf16/          the saved directory itself (config.json, the index, the shards)
  transformers-fp8.json, tiny-fp8/
                      the same model quantized by transformers' FineGrainedFP8 (CUDA
                      only), plus torch's value of each e4m3 byte and one weight
                      dequantized by torch

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


def save(model, out, name, ref_name, extra):
    """Saves model (100 KB shards), copies the directory to OUT/NAME and writes
    OUT/REF_NAME: the saved config, its shards and tensors, and extra(tmp, files)."""
    tmp = tempfile.mkdtemp()
    model.save_pretrained(tmp, max_shard_size="100KB")
    files = sorted(f for f in os.listdir(tmp) if f.endswith(".safetensors"))
    tensors = {}
    for f in files:
        for k, v in header(os.path.join(tmp, f)).items():
            v["shard"] = f
            tensors[k] = v
    with open(os.path.join(tmp, "config.json")) as f:
        ref = {"config": json.load(f), "shards": files, "tensors": tensors}
    ref.update(extra(tmp, files))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, ref_name), "w") as f:
        json.dump(ref, f, indent=1, sort_keys=True)
    dst = os.path.join(out, name)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    for f in os.listdir(tmp):
        if f.endswith(".json") or f.endswith(".safetensors"):
            shutil.copy(os.path.join(tmp, f), dst)
    print(f"{name}: {len(tensors)} tensors in {len(files)} shards -> {dst}")
    return dst


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    import torch
    import transformers
    from transformers import DeepseekV32Config, DeepseekV32ForCausalLM

    torch.manual_seed(0)
    cfg = DeepseekV32Config(**CONFIG)
    model = DeepseekV32ForCausalLM(cfg).to(torch.bfloat16)
    state = {k: list(v.shape) for k, v in model.state_dict().items()}
    dst = save(model, out, "tiny-bf16", "transformers.json",
               lambda tmp, files: {"transformers": transformers.__version__,
                                   "torch": torch.__version__, "state_dict": state})
    if torch.cuda.is_available():
        fp8(dst, out)
    else:
        print("no CUDA device: the fp8 part (transformers-fp8.json, tiny-fp8/) is not made")


def fp8(bf16_dir, out):
    """The same model quantized by transformers' FineGrainedFP8 (blocks of 32, so that
    scales have several and partial blocks) and saved: transformers-fp8.json records its
    tensors, torch's value of every e4m3 byte, and two weights dequantized by torch.
    transformers 5.17 reports the attention projections' weight_scale_inv as newly
    initialized when it quantizes on load: their values (not their layout) vary by run."""
    import torch
    from safetensors.torch import load_file
    from transformers import DeepseekV32ForCausalLM, FineGrainedFP8Config

    block = 32
    q = FineGrainedFP8Config(weight_block_size=(block, block))
    model = DeepseekV32ForCausalLM.from_pretrained(bf16_dir, quantization_config=q,
                                                   device_map="cuda", dtype=torch.bfloat16)

    def extra(tmp, files):
        state = {}
        for f in files:
            state.update(load_file(os.path.join(tmp, f)))
        dequant = {}
        # a dense weight of full blocks, and one whose last row block is partial (40 rows)
        for name in ("model.layers.0.mlp.down_proj",
                     "model.layers.1.self_attn.kv_a_proj_with_mqa"):
            w = state[name + ".weight"].float()
            s = state[name + ".weight_scale_inv"].float()
            full = s.repeat_interleave(block, 0)[: w.shape[0]].repeat_interleave(block, 1)
            dequant[name + ".weight"] = (w * full[:, : w.shape[1]]).tolist()
        codes = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
        return {"e4m3": [None if c != c else c for c in codes.tolist()], "dequant": dequant}

    save(model, out, "tiny-fp8", "transformers-fp8.json", extra)


if __name__ == "__main__":
    main()

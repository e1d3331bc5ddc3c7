/* cmd_checkpoint.c - `sparsecp checkpoint DIR [--json]`: checks a DeepSeek-V3.2
 * checkpoint directory as published (model/hf_checkpoint.h) and summarizes it, including
 * whether sparsecp can serve it (`run|launch --model-dir`, model/hf_model.h: on the CPU
 * backend; the CUDA backend lacks the checkpoint's kernels and fp8 weights so far). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "base/jsonw.h"
#include "model/hf_checkpoint.h"
#include "model/hf_model.h"
#include "tools/cli.h"

#define SERVE_NOTE \
  "served on the CPU backend by `sparsecp run|launch --model-dir DIR`; the CUDA backend " \
  "cannot serve checkpoints yet (issue 23, point 3)"

/* Whether the model configuration sparsecp serves can be made from the checked config
 * (why not in d). */
static bool servable(const sc_hf_checkpoint *c, sc_diag *d) {
  sc_model_config m;
  return sc_model_config_from_hf(&c->cfg, &m, d) == 0;
}

static void help(FILE *f) {
  fprintf(f,
          "usage: sparsecp checkpoint DIR [--json]\n"
          "\n"
          "Checks a DeepSeek-V3.2 checkpoint directory as Hugging Face publishes it:\n"
          "config.json (model_type deepseek_v32), model.safetensors.index.json and its\n"
          "shards (or one model.safetensors), every tensor's name, shape and dtype\n"
          "against the table the config implies (fp8 e4m3 weights with their block\n"
          "scales, weight_scale_inv, or bf16/f32). Multi-token-prediction layers are\n"
          "skipped.\n"
          "A valid directory is served (on the CPU) by `sparsecp run|launch --model-dir`.\n"
          "\n"
          "  --json      print one JSON object; on an invalid directory {\"error\": ...}\n"
          "  -h, --help  this text\n"
          "\n"
          "Exit status: 0 valid, 2 invalid (the message names the key, tensor or shard;\n"
          "a missing file is invalid too), 1 when a file that is there cannot be opened,\n"
          "mapped or read.\n");
}

static void print_json(const char *dir, const sc_hf_checkpoint *c) {
  const sc_hf_config *f = &c->cfg;
  sc_jsonw w;
  sc_jsonw_init(&w);
  sc_jsonw_obj_begin(&w);
  sc_jsonw_kv_bool(&w, "valid", true);
  sc_jsonw_kv_str(&w, "dir", dir);
  sc_jsonw_kv_str(&w, "model_type", f->model_type);
  sc_jsonw_kv_int(&w, "layers", f->num_hidden_layers);
  sc_jsonw_kv_int(&w, "dense_layers", f->first_k_dense_replace);
  sc_jsonw_kv_int(&w, "moe_layers", f->num_hidden_layers - f->first_k_dense_replace);
  sc_jsonw_kv_int(&w, "routed_experts", f->n_routed_experts);
  sc_jsonw_kv_int(&w, "shared_experts", f->n_shared_experts);
  sc_jsonw_kv_int(&w, "experts_per_token", f->num_experts_per_tok);
  sc_jsonw_kv_int(&w, "expert_groups", f->n_group);
  sc_jsonw_kv_int(&w, "topk_groups", f->topk_group);
  sc_jsonw_kv_int(&w, "heads", f->num_attention_heads);
  sc_jsonw_kv_int(&w, "index_heads", f->index_n_heads);
  sc_jsonw_kv_int(&w, "index_head_dim", f->index_head_dim);
  sc_jsonw_kv_int(&w, "index_topk", f->index_topk);
  sc_jsonw_kv_str(&w, "rope", f->rope.type == SC_HF_ROPE_YARN ? "yarn" : "default");
  sc_jsonw_kv_str(&w, "weights", f->quant.fp8 ? "fp8" : "unquantized");
  sc_jsonw_kv_int(&w, "tensors", c->num);
  sc_jsonw_kv_int(&w, "shards", c->num_shards);
  sc_jsonw_key(&w, "bytes");
  sc_jsonw_obj_begin(&w);
  sc_jsonw_key(&w, "F8_E4M3");
  sc_jsonw_uint(&w, c->bytes_f8);
  sc_jsonw_key(&w, "BF16");
  sc_jsonw_uint(&w, c->bytes_bf16);
  sc_jsonw_key(&w, "F32");
  sc_jsonw_uint(&w, c->bytes_f32);
  sc_jsonw_obj_end(&w);
  sc_jsonw_kv_int(&w, "mtp_tensors_skipped", c->mtp_tensors);
  sc_jsonw_key(&w, "mtp_bytes_skipped");
  sc_jsonw_uint(&w, c->mtp_bytes);
  sc_jsonw_kv_int(&w, "unknown_config_keys", f->unknown_keys);
  sc_diag why = {0};
  const bool ok = servable(c, &why);
  sc_jsonw_kv_bool(&w, "servable", ok);
  sc_jsonw_kv_str(&w, "note", ok ? SERVE_NOTE : sc_diag_message(&why));
  sc_jsonw_obj_end(&w);
  printf("%s\n", sc_jsonw_str(&w));
  sc_jsonw_free(&w);
}

/* "12.3 GiB", "456 B": buf is returned. */
static const char *size_text(uint64_t b, char *buf, size_t cap) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)b;
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, u++;
  snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
  return buf;
}

static void print_text(const char *dir, const sc_hf_checkpoint *c) {
  const sc_hf_config *f = &c->cfg;
  printf("checkpoint %s: valid %s directory\n", dir, f->model_type);
  printf("  layers     %d (%d dense, %d MoE)\n", f->num_hidden_layers, f->first_k_dense_replace,
         f->num_hidden_layers - f->first_k_dense_replace);
  printf("  experts    %d routed (top %d, %d groups, %d chosen) + %d shared\n",
         f->n_routed_experts, f->num_experts_per_tok, f->n_group, f->topk_group,
         f->n_shared_experts);
  printf("  attention  %d heads, q_lora %d, kv_lora %d, rope %d (%s)\n", f->num_attention_heads,
         f->q_lora_rank, f->kv_lora_rank, f->qk_rope_head_dim,
         f->rope.type == SC_HF_ROPE_YARN ? "yarn" : "default");
  printf("  indexer    %d heads x %d, top-k %d\n", f->index_n_heads, f->index_head_dim,
         f->index_topk);
  char a[32], b[32], e[32];
  printf("  tensors    %d checked in %d shard%s; F8_E4M3 %s, BF16 %s, F32 %s\n", c->num,
         c->num_shards, c->num_shards == 1 ? "" : "s", size_text(c->bytes_f8, a, sizeof a),
         size_text(c->bytes_bf16, b, sizeof b), size_text(c->bytes_f32, e, sizeof e));
  printf("  skipped    %d multi-token-prediction tensor%s (%s)\n", c->mtp_tensors,
         c->mtp_tensors == 1 ? "" : "s", size_text(c->mtp_bytes, a, sizeof a));
  if (f->unknown_keys)
    printf("  config     %d unknown key%s ignored (first: \"%s\")\n", f->unknown_keys,
           f->unknown_keys == 1 ? "" : "s", f->first_unknown);
  sc_diag why = {0};
  if (servable(c, &why))
    printf("note: %s\n", SERVE_NOTE);
  else
    printf("note: cannot be served: %s\n", sc_diag_message(&why));
}

int sc_cmd_checkpoint(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  bool json = false;
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
    case 'j': json = true; break;
    case 'h': help(stdout); return SC_EXIT_OK;
    default: help(stderr); return SC_EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    help(stderr);
    return SC_EXIT_USAGE;
  }
  const char *dir = argv[optind];
  sc_hf_checkpoint c;
  sc_diag d = {0};
  const int rc = sc_hf_checkpoint_open(dir, &c, &d);
  if (rc) {
    /* unreadable files and memory are runtime failures; everything else is the input */
    const int status = rc == SC_EIO || rc == SC_ENOMEM ? SC_EXIT_FAILURE : SC_EXIT_USAGE;
    if (json) {
      sc_cli_report_error("checkpoint", true, sc_diag_message(&d));
    } else {
      sc_cli_error("checkpoint", "%s: %s", dir, sc_diag_message(&d));
    }
    return status;
  }
  if (json) print_json(dir, &c);
  else print_text(dir, &c);
  sc_hf_checkpoint_close(&c);
  return fflush(stdout) == 0 ? SC_EXIT_OK : SC_EXIT_FAILURE;
}

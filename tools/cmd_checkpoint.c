/* cmd_checkpoint.c - `sparsecp checkpoint DIR [--json]`: checks a DeepSeek-V3.2
 * checkpoint directory as published (model/hf_checkpoint.h) and summarizes it, including
 * whether sparsecp can serve it (`run|launch --model-dir`, model/hf_model.h: on the CPU
 * backend; the CUDA backend lacks the checkpoint's kernels and fp8 weights so far). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/jsonw.h"
#include "model/hf_checkpoint.h"
#include "model/hf_memory.h"
#include "model/hf_model.h"
#include "tools/cli.h"

#define SERVE_NOTE "served by `sparsecp run|launch --model-dir DIR`, on the CPU or CUDA backend"

/* Whether the model configuration sparsecp serves can be made from the checked config,
 * with generation_config.json's end-of-sequence tokens as `run --model-dir` takes them
 * (why not in d). */
static bool servable(const char *dir, const sc_hf_checkpoint *c, sc_model_config *m,
                     sc_diag *d) {
  sc_hf_config cfg = c->cfg;
  return sc_hf_dir_eos(dir, &cfg.eos, d) == 0 && sc_model_config_from_hf(&cfg, m, d) == 0;
}

static void help(FILE *f) {
  fprintf(f,
          "usage: sparsecp checkpoint DIR [--json]\n"
          "       sparsecp checkpoint DIR|CONFIG.json --memory [--pcp P] [--dcp N] [--tp T]\n"
          "                           [--context L] [--budget B] [--block-size S] [--json]\n"
          "\n"
          "Checks a DeepSeek-V3.2 (or GLM-5) checkpoint directory as Hugging Face\n"
          "publishes it: config.json (model_type deepseek_v32 or glm_moe_dsa),\n"
          "model.safetensors.index.json and its\n"
          "shards (or one model.safetensors), every tensor's name, shape and dtype\n"
          "against the table the config implies (fp8 e4m3 weights with their block\n"
          "scales, weight_scale_inv, or bf16/f32). Multi-token-prediction layers are\n"
          "skipped.\n"
          "A valid directory is served by `sparsecp run|launch --model-dir` (CPU or CUDA);\n"
          "the summary names its end-of-sequence tokens (config.json's eos_token_id and\n"
          "generation_config.json's), where its requests end.\n"
          "\n"
          "  --json      print one JSON object; on an invalid directory {\"error\": ...}\n"
          "  --memory    reads only the config (DIR/config.json, or the file given) and\n"
          "              prints the memory one rank (GPU) needs at the layout: weights as\n"
          "              released (fp8 resident) and in f32 (the CPU backend today), the KV\n"
          "              cache of one request of L tokens in bf16 and f32, and an estimate of\n"
          "              the step buffers (docs/model.md, \"Memory per GPU\")\n"
          "  --pcp P --dcp N --tp T   the layout (default 1 1 1; SPEC.md's rules)\n"
          "  --context L  tokens of the request in the KV cache (default the config's\n"
          "              max_position_embeddings)\n"
          "  --budget B   tokens of one step (default 256, the scheduler's token_budget)\n"
          "  --block-size S  KV block (default 16, the pipeline's)\n"
          "  -h, --help  this text\n"
          "\n"
          "Exit status: 0 valid, 2 invalid (the message names the key, tensor or shard;\n"
          "a missing file is invalid too; with --memory a layout sparsecp does not run),\n"
          "1 when a file that is there cannot be opened, mapped or read.\n");
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
  sc_jsonw_kv_str(&w, "index_rope", f->index_rope_interleaved ? "interleaved" : "halves");
  sc_jsonw_kv_int(&w, "index_shared_layers", f->index_shared_layers);
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
  sc_model_config m;
  const bool ok = servable(dir, c, &m, &why);
  if (ok) {
    sc_jsonw_key(&w, "eos_token_id");
    sc_jsonw_int32_array(&w, m.eos.id, (size_t)m.eos.n);
  }
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
  printf("  indexer    %d heads x %d, top-k %d, %s rotary", f->index_n_heads, f->index_head_dim,
         f->index_topk, f->index_rope_interleaved ? "interleaved" : "half-split");
  if (f->index_shared_layers > 0)
    printf("; %d of %d layers reuse an earlier layer's top-K", f->index_shared_layers,
           f->num_hidden_layers);
  printf("\n");
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
  sc_model_config m;
  if (servable(dir, c, &m, &why)) {
    printf("  ends at    ");
    for (int32_t i = 0; i < m.eos.n; i++) printf("%stoken %d", i ? ", " : "", m.eos.id[i]);
    printf("%s\n", m.eos.n ? " (eos_token_id)" : "no end-of-sequence token: max_tokens only");
    printf("note: %s\n", SERVE_NOTE);
  } else {
    printf("note: cannot be served: %s\n", sc_diag_message(&why));
  }
}

/* "12.3 GiB" for the memory table (size_text's units). */
static void mem_row(const char *what, uint64_t b, const char *note) {
  char t[32];
  printf("  %-34s %12s  %s\n", what, size_text(b, t, sizeof t), note);
}

static int memory(const char *path, bool json, const sc_hf_mem_in *in_opt) {
  char cfg_path[4200];
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(cfg_path, sizeof cfg_path, "%s/config.json", path);
  else snprintf(cfg_path, sizeof cfg_path, "%s", path);
  sc_hf_config cfg;
  sc_diag d = {0};
  int rc = sc_hf_config_load(cfg_path, &cfg, &d);
  sc_hf_mem_in in = *in_opt;
  if (in.context == 0) in.context = cfg.max_position_embeddings;
  sc_hf_mem m;
  if (rc == 0) rc = sc_hf_memory(&cfg, &in, &m, &d);
  if (rc) {
    sc_cli_report_error("checkpoint", json, sc_diag_message(&d));
    return rc == SC_EIO || rc == SC_ENOMEM ? SC_EXIT_FAILURE : SC_EXIT_USAGE;
  }
  const uint64_t total_bf16 = sc_hf_mem_total(&m);
  if (json) {
    sc_jsonw w;
    sc_jsonw_init(&w);
    sc_jsonw_obj_begin(&w);
    sc_jsonw_kv_str(&w, "config", cfg_path);
    sc_jsonw_kv_int(&w, "pcp", in.pcp);
    sc_jsonw_kv_int(&w, "dcp", in.dcp);
    sc_jsonw_kv_int(&w, "tp", in.tp);
    sc_jsonw_kv_int(&w, "context", in.context);
    sc_jsonw_kv_int(&w, "budget", in.budget);
    sc_jsonw_kv_int(&w, "block_size", in.block_size);
    sc_jsonw_kv_str(&w, "weights_dtype", cfg.quant.fp8 ? "fp8" : "unquantized");
    static const char *const K[] = {"weights_stored", "weights_replicated", "weights_f32",
                                    "weights_total", "kv_token_bf16", "kv_token_f32",
                                    "kv_token_bf16_fp8_index", "kv_bf16", "kv_f32",
                                    "kv_bf16_fp8_index", "kv_token_fp8_ds_mla",
                                    "kv_fp8_ds_mla", "step_buffers", "workspace",
                                    "total_bf16_kv"};
    const uint64_t V[] = {m.weights_stored, m.weights_replicated, m.weights_f32,
                          m.weights_total, m.kv_token_bf16, m.kv_token_f32,
                          m.kv_token_bf16_fp8_index, m.kv_bf16, m.kv_f32,
                          m.kv_bf16_fp8_index, m.kv_token_fp8_ds_mla, m.kv_fp8_ds_mla,
                          m.step_buffers, m.workspace, total_bf16};
    sc_jsonw_key(&w, "bytes");
    sc_jsonw_obj_begin(&w);
    for (size_t i = 0; i < sizeof V / sizeof V[0]; i++) {
      sc_jsonw_key(&w, K[i]);
      sc_jsonw_uint(&w, V[i]);
    }
    sc_jsonw_obj_end(&w);
    sc_jsonw_kv_int(&w, "kv_slots", m.kv_slots);
    sc_jsonw_kv_int(&w, "kv_row_values", m.kv_row_values);
    sc_jsonw_kv_int(&w, "step_rows", m.step_rows);
    sc_jsonw_obj_end(&w);
    printf("%s\n", sc_jsonw_str(&w));
    sc_jsonw_free(&w);
  } else {
    char note[160], a[32];
    printf("memory per rank of %s (%d layers) at P %d, N %d, T %d: one request of %lld "
           "tokens, KV block %d, step of %d tokens\n",
           cfg_path, cfg.num_hidden_layers, in.pcp, in.dcp, in.tp, (long long)in.context,
           in.block_size, in.budget);
    snprintf(note, sizeof note, "%s as released; %s of it on every rank; whole model %s",
             cfg.quant.fp8 ? "fp8 + scales, bf16" : "bf16",
             size_text(m.weights_replicated, a, sizeof a),
             size_text(m.weights_total, (char[32]){0}, 32));
    mem_row("weights (resident as released)", m.weights_stored, note);
    mem_row("weights in f32 (CPU backend today)", m.weights_f32, "");
    snprintf(note, sizeof note, "%lld slots x %llu B (%lld values x %d layers)",
             (long long)m.kv_slots, (unsigned long long)m.kv_token_bf16,
             (long long)m.kv_row_values, cfg.num_hidden_layers);
    mem_row("KV cache, bf16", m.kv_bf16, note);
    mem_row("KV cache, f32", m.kv_f32, "");
    snprintf(note, sizeof note, "%llu B a token (--index-format fp8)",
             (unsigned long long)m.kv_token_bf16_fp8_index);
    mem_row("KV cache, bf16 + fp8 index keys", m.kv_bf16_fp8_index, note);
    if (m.kv_token_fp8_ds_mla > 0) {
      snprintf(note, sizeof note, "%llu B a token (--kv-format fp8_ds_mla)",
               (unsigned long long)m.kv_token_fp8_ds_mla);
      mem_row("KV cache, fp8_ds_mla + fp8 keys", m.kv_fp8_ds_mla, note);
    }
    snprintf(note, sizeof note, "estimate, %lld rows", (long long)m.step_rows);
    mem_row("step buffers", m.step_buffers, note);
    mem_row("DCP context workspace", m.workspace, in.dcp > 1 ? "a prefill chunk over the context" : "none with N = 1");
    mem_row("total (resident weights, bf16 KV)", total_bf16, "");
  }
  return fflush(stdout) == 0 ? SC_EXIT_OK : SC_EXIT_FAILURE;
}

int sc_cmd_checkpoint(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"memory", no_argument, NULL, 'm'},
                                       {"pcp", required_argument, NULL, 'P'},
                                       {"dcp", required_argument, NULL, 'N'},
                                       {"tp", required_argument, NULL, 'T'},
                                       {"context", required_argument, NULL, 'L'},
                                       {"budget", required_argument, NULL, 'B'},
                                       {"block-size", required_argument, NULL, 'S'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  bool json = false, mem = false, layout = false;
  sc_hf_mem_in in = {.pcp = 1, .dcp = 1, .tp = 1, .block_size = 16, .budget = 256};
  int64_t v;
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
    case 'j': json = true; break;
    case 'm': mem = true; break;
    case 'P': if (!sc_cli_int("checkpoint", "--pcp", optarg, 1, 1024, &v)) return SC_EXIT_USAGE; in.pcp = (int32_t)v; layout = true; break;
    case 'N': if (!sc_cli_int("checkpoint", "--dcp", optarg, 1, 1024, &v)) return SC_EXIT_USAGE; in.dcp = (int32_t)v; layout = true; break;
    case 'T': if (!sc_cli_int("checkpoint", "--tp", optarg, 1, 1024, &v)) return SC_EXIT_USAGE; in.tp = (int32_t)v; layout = true; break;
    case 'L': if (!sc_cli_int("checkpoint", "--context", optarg, 1, INT32_MAX, &v)) return SC_EXIT_USAGE; in.context = v; layout = true; break;
    case 'B': if (!sc_cli_int("checkpoint", "--budget", optarg, 1, 1 << 24, &v)) return SC_EXIT_USAGE; in.budget = (int32_t)v; layout = true; break;
    case 'S': if (!sc_cli_int("checkpoint", "--block-size", optarg, 1, 4096, &v)) return SC_EXIT_USAGE; in.block_size = (int32_t)v; layout = true; break;
    case 'h': help(stdout); return SC_EXIT_OK;
    default: help(stderr); return SC_EXIT_USAGE;
    }
  }
  if (optind != argc - 1 || (layout && !mem)) {
    if (layout && !mem) sc_cli_error("checkpoint", "--pcp, --dcp, --tp, --context, --budget and --block-size go with --memory");
    else help(stderr);
    return SC_EXIT_USAGE;
  }
  if (mem) return memory(argv[optind], json, &in);
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

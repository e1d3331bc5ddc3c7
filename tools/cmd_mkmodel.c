/* cmd_mkmodel.c - `sparsecp mkmodel DIR [options]`: writes a small DeepSeek-V3.2
 * checkpoint directory of the real layout (model/hf_writer.h), checks it with the reader
 * (model/hf_checkpoint.h) and summarizes it (issue 23, point 5). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "base/jsonw.h"
#include "model/hf_checkpoint.h"
#include "model/hf_writer.h"
#include "tools/cli.h"

static void help(FILE *f) {
  sc_hf_gen g;
  sc_hf_gen_default(&g);
  fprintf(f,
          "usage: sparsecp mkmodel DIR [--layers L] [--dense-layers K] [--experts E]\n"
          "                        [--hidden H] [--vocab V] [--shards S] [--dtype fp8|bf16]\n"
          "                        [--seed N] [--model-type deepseek_v32|glm_moe_dsa] [--json]\n"
          "\n"
          "Writes a small DeepSeek-V3.2 checkpoint of the layout transformers'\n"
          "deepseek_v32 saves (config.json, generation_config.json, safetensors shards\n"
          "with model.safetensors.index.json, or one model.safetensors), with weights\n"
          "drawn from the seed: fp8 e4m3 with 128 x 128 block scales (weight_scale_inv)\n"
          "or bf16. `sparsecp run|launch --model-dir DIR` serves it (docs/model.md).\n"
          "DIR must not exist or be empty: nothing is overwritten, and the files are\n"
          "written beside it and renamed into place at the end.\n"
          "\n"
          "  --layers L        transformer layers (default %d)\n"
          "  --dense-layers K  the first K have a dense MLP, the rest MoE (default %d)\n"
          "  --experts E       routed experts, a multiple of 4 (default %d; 4 groups, 2\n"
          "                    chosen, 4 experts per token, 1 shared expert)\n"
          "  --hidden H        hidden size, a multiple of 64 (default %d; heads H/32,\n"
          "                    q_lora H/2, kv_lora H/4, intermediate 5H/2, experts' H/4)\n"
          "  --vocab V         vocabulary (default %d)\n"
          "  --shards S        safetensors files (default %d; 1 writes model.safetensors)\n"
          "  --dtype fp8|bf16  weights (default fp8)\n"
          "  --seed N          seed of the weights (default %llu)\n"
          "  --model-type T    deepseek_v32 (default) or glm_moe_dsa: GLM-5's variant,\n"
          "                    interleaved indexer rotary, odd layers without an indexer\n"
          "                    reusing the top-K of the layer before (indexer_types)\n"
          "  --json            print one JSON object (\"dir\", \"tensors\", \"shards\",\n"
          "                    \"bytes\"; {\"error\": ...} on failure)\n"
          "  -h, --help        this text\n"
          "\n"
          "Exit status: 0 written, 2 bad options or DIR exists and is not empty,\n"
          "1 a file could not be written.\n",
          g.layers, g.dense_layers, g.experts, g.hidden, g.vocab, g.shards,
          (unsigned long long)g.seed);
}

static int fail(bool json, int rc, const char *msg) {
  sc_cli_report_error("mkmodel", json, msg);
  return rc == SC_EINVAL ? SC_EXIT_USAGE : SC_EXIT_FAILURE;
}

int sc_cmd_mkmodel(int argc, char **argv) {
  static const struct option opts[] = {
      {"layers", required_argument, NULL, 'l'}, {"dense-layers", required_argument, NULL, 'k'},
      {"experts", required_argument, NULL, 'e'}, {"hidden", required_argument, NULL, 'H'},
      {"vocab", required_argument, NULL, 'v'},  {"shards", required_argument, NULL, 's'},
      {"dtype", required_argument, NULL, 'd'},  {"seed", required_argument, NULL, 'S'},
      {"model-type", required_argument, NULL, 'm'},
      {"json", no_argument, NULL, 'j'},         {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  sc_hf_gen g;
  sc_hf_gen_default(&g);
  bool json = false;
  int64_t v;
  int ch;
  optind = 1;
  /* ranges here only keep the values in int32_t; model/hf_writer.c says what is allowed */
#define INT_OPT(name, field)                                                        \
  if (!sc_cli_int("mkmodel", name, optarg, INT32_MIN, INT32_MAX, &v)) return SC_EXIT_USAGE; \
  g.field = (int32_t)v;                                                             \
  break
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
    case 'l': INT_OPT("--layers", layers);
    case 'k': INT_OPT("--dense-layers", dense_layers);
    case 'e': INT_OPT("--experts", experts);
    case 'H': INT_OPT("--hidden", hidden);
    case 'v': INT_OPT("--vocab", vocab);
    case 's': INT_OPT("--shards", shards);
    case 'S':
      if (!sc_cli_int("mkmodel", "--seed", optarg, 0, INT64_MAX, &v)) return SC_EXIT_USAGE;
      g.seed = (uint64_t)v;
      break;
    case 'd':
      if (strcmp(optarg, "fp8") && strcmp(optarg, "bf16")) {
        sc_cli_error("mkmodel", "--dtype must be fp8 or bf16, not '%s'", optarg);
        return SC_EXIT_USAGE;
      }
      g.fp8 = !strcmp(optarg, "fp8");
      break;
    case 'm':
      if (strcmp(optarg, "deepseek_v32") && strcmp(optarg, "glm_moe_dsa")) {
        sc_cli_error("mkmodel", "--model-type must be deepseek_v32 or glm_moe_dsa, not '%s'",
                     optarg);
        return SC_EXIT_USAGE;
      }
      g.glm = !strcmp(optarg, "glm_moe_dsa");
      break;
    case 'j': json = true; break;
    case 'h': help(stdout); return SC_EXIT_OK;
    default: help(stderr); return SC_EXIT_USAGE;
    }
  }
#undef INT_OPT
  if (optind != argc - 1) {
    help(stderr);
    return SC_EXIT_USAGE;
  }
  const char *dir = argv[optind];
  sc_diag d = {0};
  int rc = sc_hf_write_dir(dir, &g, &d);
  if (rc) return fail(json, rc, sc_diag_message(&d));
  /* read back by the loader's own checks: what was written is a valid checkpoint */
  sc_hf_checkpoint c;
  if ((rc = sc_hf_checkpoint_open(dir, &c, &d))) {
    char msg[400];
    snprintf(msg, sizeof msg, "%s was written but does not read back: %s", dir,
             sc_diag_message(&d));
    return fail(json, SC_EIO, msg);
  }
  const uint64_t bytes = c.bytes_f8 + c.bytes_bf16 + c.bytes_f32;
  if (json) {
    sc_jsonw w;
    sc_jsonw_init(&w);
    sc_jsonw_obj_begin(&w);
    sc_jsonw_kv_str(&w, "dir", dir);
    sc_jsonw_kv_str(&w, "model_type", c.cfg.model_type);
    sc_jsonw_kv_str(&w, "weights", g.fp8 ? "fp8" : "bf16");
    sc_jsonw_kv_int(&w, "layers", c.cfg.num_hidden_layers);
    sc_jsonw_kv_int(&w, "dense_layers", c.cfg.first_k_dense_replace);
    sc_jsonw_kv_int(&w, "routed_experts", c.cfg.n_routed_experts);
    sc_jsonw_kv_int(&w, "hidden", c.cfg.hidden_size);
    sc_jsonw_kv_int(&w, "vocab", c.cfg.vocab_size);
    sc_jsonw_kv_int(&w, "tensors", c.num);
    sc_jsonw_kv_int(&w, "shards", c.num_shards);
    sc_jsonw_key(&w, "bytes");
    sc_jsonw_uint(&w, bytes);
    sc_jsonw_obj_end(&w);
    printf("%s\n", sc_jsonw_str(&w));
    sc_jsonw_free(&w);
  } else {
    printf("wrote %s: %s, %d layers (%d dense), %d routed experts + 1 shared, "
           "hidden %d, vocab %d; %d tensors (%s) in %d shard%s, %llu bytes\n",
           dir, c.cfg.model_type, c.cfg.num_hidden_layers, c.cfg.first_k_dense_replace, c.cfg.n_routed_experts,
           c.cfg.hidden_size, c.cfg.vocab_size, c.num, g.fp8 ? "fp8 with block scales" : "bf16",
           c.num_shards, c.num_shards == 1 ? "" : "s", (unsigned long long)bytes);
  }
  sc_hf_checkpoint_close(&c);
  return fflush(stdout) == 0 ? SC_EXIT_OK : SC_EXIT_FAILURE;
}

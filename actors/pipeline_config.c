/* pipeline_config.c - the pipeline section of a cluster file (pipeline_config.h). */
#include "actors/pipeline_config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/curve_key.h"
#include "base/zap.h"
#include "model/hf_model.h"
#include "model/model_defaults.h"

/* The gateway's default vocabulary bound is the embedded model's; a cluster sets its own
 * model's (limits.vocab_size below). */
_Static_assert(SC_MSG_DEFAULT_VOCAB == SC_MODEL_DEFAULT_VOCAB,
               "messages' default vocabulary is the embedded model's");

static int get_i32(json_t *o, const char *key, int32_t lo, int32_t hi, int32_t *out,
                   sc_diag *d) {
  json_t *v = json_object_get(o, key);
  if (v == NULL) return 0;
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
    return sc_fail(d, SC_EINVAL, "pipeline.%s must be an integer in [%d, %d]", key, lo, hi);
  *out = (int32_t)json_integer_value(v);
  return 0;
}

/* A path from the cluster file (its key `what`): relative paths are relative to the
 * file's folder, so a cluster file and its model can be moved (or started from anywhere)
 * together. SC_EINVAL when the result does not fit out. */
/* Bytes of a client_submit besides its prompt's ids: the envelope, the other fields
 * and the prompt's array header (about 60 in fact). */
#define SC_SUBMIT_OVERHEAD 1024

/* pipeline.KEY, a file path relative to the cluster file's folder, into out ("" when the
 * key is absent). */
static int get_path(const char *cluster_path, json_t *p, const char *key, char *out, size_t cap,
                    sc_diag *d) {
  json_t *v = json_object_get(p, key);
  if (v == NULL) return 0;
  char what[64];
  snprintf(what, sizeof what, "pipeline.%s", key);
  if (!json_is_string(v)) return sc_fail(d, SC_EINVAL, "%s must be a path", what);
  return sc_cluster_resolve_path(cluster_path, what, json_string_value(v), out, cap, d);
}

static int parse_section(const char *cluster_path, json_t *p, sc_pipeline_config *c,
                         sc_diag *d) {
  const char *key;
  json_t *v;
  static const char *const known[] = {
      "model", "model_file", "model_dir", "weights", "interleave", "block_size", "pad_multiple",
      "max_gathered_rows", "num_blocks", "token_budget", "max_running", "max_model_len",
      "deadline_ms", "kernel_threads", "kv_format", "index_format", "inject", "max_prompt_len",
      "device", "cuda_device", "collectives", "tokenizer", "served_model_name", "profile",
      "rejoin_wait_ms", "step_retries", "cuda_graphs", "overlap", "gemm_precision",
      "ranks_per_gpu"};
  json_object_foreach(p, key, v) {
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= strcmp(key, known[i]) == 0;
    if (!ok) return sc_fail(d, SC_EINVAL, "pipeline: unknown key \"%s\"", key);
  }
  int rc;
  sc_engine_config *e = &c->engine;
  json_t *mf = json_object_get(p, "model_file"), *m = json_object_get(p, "model");
  json_t *md = json_object_get(p, "model_dir");
  /* a checkpoint directory is the whole model: its config.json and its weights */
  if (md && (mf || m || json_object_get(p, "weights")))
    return sc_fail(d, SC_EINVAL, "pipeline.model_dir brings its own configuration and "
                   "weights: it cannot be combined with model_file, model or weights");
  if (mf) {
    if (!json_is_string(mf)) return sc_fail(d, SC_EINVAL, "pipeline.model_file must be a path");
    if ((rc = sc_cluster_resolve_path(cluster_path, "pipeline.model_file", json_string_value(mf),
                                    c->model_file, sizeof c->model_file, d)) ||
        (rc = sc_model_config_load(c->model_file, &e->model, d)))
      return rc;
  }
  if (md) {
    if ((rc = get_path(cluster_path, p, "model_dir", c->model_dir, sizeof c->model_dir, d)) ||
        (rc = sc_model_config_load_dir(c->model_dir, &e->model, d)))
      return rc;
  }
  if ((rc = get_path(cluster_path, p, "tokenizer", c->tokenizer_path, sizeof c->tokenizer_path,
                     d)))
    return rc;
  json_t *smn = json_object_get(p, "served_model_name");
  if (smn) {
    if (!json_is_string(smn) || json_string_length(smn) == 0 ||
        json_string_length(smn) >= sizeof c->served_model_name)
      return sc_fail(d, SC_EINVAL, "pipeline.served_model_name must be a name of 1 to %zu bytes",
                     sizeof c->served_model_name - 1);
    snprintf(c->served_model_name, sizeof c->served_model_name, "%s", json_string_value(smn));
  }
  if (m && (rc = sc_model_config_apply_json(&e->model, m, d))) return rc;
  if ((rc = get_path(cluster_path, p, "weights", c->weights_path, sizeof c->weights_path, d)))
    return rc;
  int32_t deadline = (int32_t)c->deadline_ms, max_prompt = c->limits.max_prompt_len;
  int32_t rejoin = (int32_t)c->rejoin_wait_ms, retries = c->step_retries;
  if ((rc = get_i32(p, "interleave", 1, SC_PLAN_MAX_DIM, &e->plan.interleave, d)) ||
      (rc = get_i32(p, "block_size", 1, SC_PLAN_MAX_DIM, &e->plan.block_size, d)) ||
      (rc = get_i32(p, "pad_multiple", 1, SC_PLAN_MAX_DIM, &e->plan.pad_multiple, d)) ||
      (rc = get_i32(p, "num_blocks", 1, 1 << 24, &e->num_blocks, d)) ||
      (rc = get_i32(p, "token_budget", 1, 1 << 24, &c->sched.token_budget, d)) ||
      (rc = get_i32(p, "max_running", 1, 1 << 20, &c->sched.max_running, d)) ||
      (rc = get_i32(p, "max_model_len", 2, SC_PLAN_MAX_TOKENS, &c->sched.max_model_len, d)) ||
      (rc = get_i32(p, "deadline_ms", 1, 3600000, &deadline, d)) ||
      (rc = get_i32(p, "kernel_threads", 1, 64, &e->kernel_threads, d)) ||
      (rc = get_i32(p, "max_prompt_len", 1, SC_PLAN_MAX_TOKENS, &max_prompt, d)) ||
      (rc = get_i32(p, "rejoin_wait_ms", 0, 3600000, &rejoin, d)) ||
      (rc = get_i32(p, "step_retries", 0, 16, &retries, d)))
    return rc;
  c->step_retries = retries;
  c->deadline_ms = deadline;
  c->rejoin_wait_ms = rejoin;
  c->limits.max_prompt_len = max_prompt;
  json_t *mg = json_object_get(p, "max_gathered_rows");
  if (mg) {
    if (!json_is_integer(mg) || json_integer_value(mg) < 1)
      return sc_fail(d, SC_EINVAL, "pipeline.max_gathered_rows must be a positive integer");
    e->plan.max_gathered_rows = json_integer_value(mg);
  }
  json_t *dev = json_object_get(p, "device");
  if (dev) {
    const char *name = json_string_value(dev);
    if (name == NULL || (strcmp(name, "cpu") && strcmp(name, "cuda")))
      return sc_fail(d, SC_EINVAL, "pipeline.device must be \"cpu\" or \"cuda\"");
    e->cuda = strcmp(name, "cuda") == 0;
  }
  json_t *gp = json_object_get(p, "gemm_precision");
  if (gp) {
    const char *name = json_string_value(gp);
    if (name == NULL || (strcmp(name, "f32") && strcmp(name, "tf32")))
      return sc_fail(d, SC_EINVAL, "pipeline.gemm_precision must be \"f32\" or \"tf32\"");
    e->gemm_tf32 = strcmp(name, "tf32") == 0;
    /* (the CPU's gemms are the f32 reference: asking it for TF32 is a mistake to say) */
    if (e->gemm_tf32 && !e->cuda)
      return sc_fail(d, SC_EINVAL, "pipeline.gemm_precision \"tf32\" is for device \"cuda\"");
  }
  if ((rc = get_i32(p, "cuda_device", 0, 1024, &e->cuda_device, d)) ||
      (rc = get_i32(p, "ranks_per_gpu", 1, 1024, &e->ranks_per_gpu, d)))
    return rc;
  json_t *coll = json_object_get(p, "collectives");
  if (coll) {
    const char *name = json_string_value(coll);
    if (name == NULL || (strcmp(name, "host") && strcmp(name, "nccl") && strcmp(name, "ipc")))
      return sc_fail(d, SC_EINVAL,
                     "pipeline.collectives must be \"host\", \"nccl\" or \"ipc\"");
    c->nccl = strcmp(name, "nccl") == 0;
    c->ipc = strcmp(name, "ipc") == 0;
  }
  for (const char *const *f = (const char *const[]){"kv_format", "index_format", NULL}; *f; f++)
    if (json_object_get(p, *f) && !json_is_string(json_object_get(p, *f)))
      return sc_fail(d, SC_EINVAL, "pipeline.%s must be a string", *f);
  json_t *prof = json_object_get(p, "profile");
  if (prof) {
    if (!json_is_boolean(prof)) return sc_fail(d, SC_EINVAL, "pipeline.profile must be true or false");
    c->profile = json_is_true(prof);
  }
  json_t *graphs = json_object_get(p, "cuda_graphs");
  if (graphs) {
    if (!json_is_boolean(graphs))
      return sc_fail(d, SC_EINVAL, "pipeline.cuda_graphs must be true or false");
    e->no_recordings = json_is_false(graphs);
  }
  json_t *ov = json_object_get(p, "overlap");
  if (ov) {
    const char *mode = json_is_string(ov) ? json_string_value(ov) : "";
    if (strcmp(mode, "auto") == 0) c->overlap = SC_OVERLAP_AUTO;
    else if (strcmp(mode, "on") == 0) c->overlap = SC_OVERLAP_ON;
    else if (strcmp(mode, "off") == 0) c->overlap = SC_OVERLAP_OFF;
    else return sc_fail(d, SC_EINVAL, "pipeline.overlap must be \"auto\", \"on\" or \"off\"");
  }
  json_t *inj = json_object_get(p, "inject");
  if (inj) {
    if (!json_is_array(inj)) return sc_fail(d, SC_EINVAL, "pipeline.inject must be a list");
    size_t i;
    json_t *s;
    json_array_foreach(inj, i, s) {
      if (!json_is_string(s)) return sc_fail(d, SC_EINVAL, "pipeline.inject[%zu] must be a string", i);
      if ((rc = sc_faults_parse(&c->inject, json_string_value(s), c->num_ranks, d)))
        return rc;
    }
  }
  return 0;
}

int sc_pipeline_config_load(const char *cluster_path, const sc_cluster *cluster,
                            sc_pipeline_config *c, bool *present, sc_diag *d) {
  memset(c, 0, sizeof *c);
  *present = false;
  json_error_t err;
  json_t *root = json_load_file(cluster_path, 0, &err);
  if (root == NULL)
    return sc_fail(d, SC_EINVAL, "%s: invalid JSON at line %d: %s", cluster_path, err.line,
                   err.text);
  json_t *p = json_object_get(root, "pipeline");
  if (p == NULL) { /* a runtime-only cluster: nothing to do */
    json_decref(root);
    return 0;
  }
  *present = true;
  sc_engine_config *e = &c->engine;
  sc_model_plan_config_default(&e->plan);
  e->plan.pcp = cluster->pcp;
  e->plan.dcp = cluster->dcp;
  e->plan.tp = cluster->tp;
  e->plan.block_size = 16;
  sc_model_config_default(&e->model);
  e->num_blocks = 256;
  e->kv_fmt = SC_KFMT_F32;
  e->kernel_threads = 1;
  /* block_size, num_blocks and dcp follow the engine's below */
  c->sched = (sc_sched_config){.token_budget = 256, .max_running = 32, .max_model_len = 4096};
  sc_msg_limits_default(&c->limits);
  c->deadline_ms = 10000;
  c->num_ranks = cluster->num_nodes;
  snprintf(c->listen, sizeof c->listen, "%s", cluster->listen);
  int rc = 0;
  if (cluster->listen_key_file[0] != '\0' &&
      (rc = sc_cluster_resolve_path(cluster_path, "cluster: listen_key_file",
                                    cluster->listen_key_file, c->listen_key_file,
                                    sizeof c->listen_key_file, d)))
    goto out;
  /* (sc_cluster_load made it relative to the caller's directory already) */
  snprintf(c->client_keys_file, sizeof c->client_keys_file, "%s", cluster->client_keys_file);
  snprintf(c->http, sizeof c->http, "%s", cluster->http);
  snprintf(c->http_api_key_file, sizeof c->http_api_key_file, "%s", cluster->http_api_key_file);
  c->http_timeout_s = cluster->http_timeout_s > 0 ? cluster->http_timeout_s : 30;
  if (cluster->num_nodes != cluster->pcp * cluster->tp) {
    rc = sc_fail(d, SC_EINVAL,
                 "cluster: a pipeline needs pcp * tp = %d nodes (the DCP groups reuse PCP "
                 "or TP ranks), the file lists %d",
                 cluster->pcp * cluster->tp, cluster->num_nodes);
    goto out;
  }
  c->coll_endpoints = calloc((size_t)c->num_ranks, sizeof *c->coll_endpoints);
  if (c->coll_endpoints == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto out;
  }
  json_t *nodes = json_object_get(root, "nodes");
  for (size_t i = 0; i < json_array_size(nodes); i++) {
    json_t *nd = json_array_get(nodes, i);
    const int32_t r = (int32_t)json_integer_value(json_object_get(nd, "rank"));
    json_t *ce = json_object_get(nd, "coll");
    if (!json_is_string(ce) || json_string_length(ce) == 0 || json_string_length(ce) >= 256) {
      rc = sc_fail(d, SC_EINVAL, "cluster: nodes[%zu] needs a \"coll\" endpoint (the rank's "
                                 "collective traffic)", i);
      goto out;
    }
    if (!cluster->curve && !cluster->plaintext_tcp &&
        !sc_endpoint_is_local(json_string_value(ce))) {
      rc = sc_fail(d, SC_EINVAL, "cluster: nodes[%zu].coll is on tcp without CURVE keys; "
                                 "`sparsecp keygen --cluster FILE` writes them", i);
      goto out;
    }
    snprintf(c->coll_endpoints[r], sizeof c->coll_endpoints[r], "%s", json_string_value(ce));
  }
  if (cluster->curve) {
    c->rank_keys = malloc(sizeof *c->rank_keys * (size_t)c->num_ranks);
    if (c->rank_keys == NULL) {
      rc = sc_fail(d, SC_ENOMEM, "out of memory");
      goto out;
    }
    for (int32_t r = 0; r < c->num_ranks; r++)
      memcpy(c->rank_keys[r], cluster->nodes[r].public_key, 32);
  }
  if (!json_is_object(p)) {
    rc = sc_fail(d, SC_EINVAL, "cluster: \"pipeline\" must be an object");
    goto out;
  }
  if ((rc = parse_section(cluster_path, p, c, d))) goto out;
  if (c->weights_path[0]) e->weights = c->weights_path;
  if (c->model_dir[0]) e->model_dir = c->model_dir;
  /* the scheduler's pool is the engines' cache: one virtual block per physical block */
  c->sched.block_size = e->plan.block_size;
  c->sched.num_blocks = e->num_blocks;
  c->sched.dcp = e->plan.dcp;
  /* requests end at the model's end-of-sequence tokens (sched.h) */
  _Static_assert(SC_SCHED_MAX_EOS >= SC_HF_MAX_EOS, "the model's eos ids outgrow the scheduler's");
  memcpy(c->sched.eos, e->model.eos.id, sizeof(int32_t) * (size_t)e->model.eos.n);
  c->sched.num_eos = e->model.eos.n;
  if (c->sched.max_model_len > e->model.max_position) c->sched.max_model_len = e->model.max_position;
  c->limits.vocab_size = e->model.vocab;
  if (c->limits.max_prompt_len > c->sched.max_model_len - 1)
    c->limits.max_prompt_len = c->sched.max_model_len - 1;
  /* The longest prompt must fit one client message, or the gateway could never accept
   * what it promises: ids take 1-5 bytes each by their largest value (msgpack), and the
   * rest of a client_submit well under SC_SUBMIT_OVERHEAD. */
  const int64_t id_bytes = c->limits.vocab_size <= 128      ? 1
                           : c->limits.vocab_size <= 256    ? 2
                           : c->limits.vocab_size <= 65536  ? 3
                                                            : 5;
  const int64_t fits = ((int64_t)c->limits.max_bytes - SC_SUBMIT_OVERHEAD) / id_bytes;
  if (c->limits.max_prompt_len > fits) {
    rc = sc_fail(d, SC_EINVAL,
                 "pipeline: max_prompt_len %d does not fit one client message (%zu bytes, "
                 "%lld bytes per token id for a vocabulary of %d): at most %lld",
                 c->limits.max_prompt_len, c->limits.max_bytes, (long long)id_bytes,
                 c->limits.vocab_size, (long long)fits);
    goto out;
  }
  sc_plan_config pc = e->plan;
  sc_model_config_to_plan(&e->model, &pc);
  if ((rc = sc_model_config_validate(&e->model, d)) || (rc = sc_plan_config_validate(&pc, d)) ||
      (rc = sc_model_config_check_tp(&e->model, pc.tp, d)))
    goto out;
  rc = sc_pipeline_kv_formats(json_string_value(json_object_get(p, "kv_format")),
                              json_string_value(json_object_get(p, "index_format")), &e->model,
                              &e->kv_fmt, &e->index_fp8, d);
out:
  json_decref(root);
  if (rc) sc_pipeline_config_free(c);
  return rc;
}

int sc_pipeline_kv_formats(const char *kv_format, const char *index_format,
                           const sc_model_config *m, sc_kfmt *kv, bool *index_fp8, sc_diag *d) {
  *kv = SC_KFMT_F32;
  *index_fp8 = false;
  if (kv_format == NULL || strcmp(kv_format, "f32") == 0) *kv = SC_KFMT_F32;
  else if (strcmp(kv_format, "bf16") == 0) *kv = SC_KFMT_BF16;
  else if (strcmp(kv_format, "fp8_ds_mla") == 0) *kv = SC_KFMT_FP8_DS_MLA;
  else
    return sc_fail(d, SC_EINVAL,
                   "pipeline.kv_format must be \"f32\", \"bf16\" or \"fp8_ds_mla\"");
  if (index_format == NULL) *index_fp8 = *kv == SC_KFMT_FP8_DS_MLA;
  else if (strcmp(index_format, "kv") == 0) *index_fp8 = false;
  else if (strcmp(index_format, "fp8") == 0) *index_fp8 = true;
  else return sc_fail(d, SC_EINVAL, "pipeline.index_format must be \"kv\" or \"fp8\"");
  if (*kv != SC_KFMT_FP8_DS_MLA) return 0;
  /* fp8_ds_mla rows hold the 576 KV values and nothing else (kernels.h), so the keys live
   * apart, in fp8 as DeepSeek-V3.2 keeps them: the one layout that format has. */
  if (!*index_fp8)
    return sc_fail(d, SC_EINVAL, "kv_format fp8_ds_mla keeps the index keys in fp8 rows of "
                                 "their own: index_format fp8 (the default with it), not kv");
  if (m->kv_lora_rank != SC_KFP8_DS_MLA_NOPE || m->rope_dim != SC_KFP8_DS_MLA_ROPE ||
      m->index_dim < 2)
    return sc_fail(d, SC_EINVAL,
                   "kv_format fp8_ds_mla is DeepSeek-V3.2's row: kv_lora_rank 512 and rope_dim "
                   "64 (this model: %d and %d) and an indexer (index_dim >= 2, here %d)",
                   m->kv_lora_rank, m->rope_dim, m->index_dim);
  return 0;
}

void sc_pipeline_config_free(sc_pipeline_config *c) {
  free(c->coll_endpoints);
  c->coll_endpoints = NULL;
  free(c->rank_keys);
  c->rank_keys = NULL;
  sc_wipe(&c->node_key, sizeof c->node_key);
}

bool sc_pipeline_overlaps(const sc_pipeline_config *c) {
  if (c->profile) return false;
  /* NCCL's backend counts a step's collectives from its reset, so a step cannot queue
   * collectives behind another's (docs/pipeline.md, "Overlapped steps"): several NCCL
   * ranks do not overlap (the host and IPC backends' steps do: coll.h, overlaps).
   * "auto" overlaps on CUDA only: on the CPU ops run as they are queued (no faster).
   * Four ranks sharing an H200 (2026-12-04, bench/gpu-step.md): TPOT 1.24-1.29 ms
   * overlapped against 1.45-1.48 ms one step at a time, tokens identical. */
  if (c->num_ranks > 1 && c->nccl) return false; /* (executor_actor.c, may_start) */
  return c->overlap == SC_OVERLAP_ON || (c->overlap == SC_OVERLAP_AUTO && c->engine.cuda);
}

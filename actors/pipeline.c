/* pipeline.c - pipeline configuration, the rank context, and the startup list. */
#include "actors/pipeline.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/backend_host.h"
#include "collectives/backend_staged.h"
#include "model/model_defaults.h"
#ifdef SC_HAVE_CUDA
#include "collectives/backend_nccl.h"
#include "kernels/cuda/kernels_cuda.h"
#endif

static int get_i32(json_t *o, const char *key, int32_t lo, int32_t hi, int32_t *out,
                   sc_diag *d) {
  json_t *v = json_object_get(o, key);
  if (v == NULL) return 0;
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
    return sc_fail(d, SC_EINVAL, "pipeline.%s must be an integer in [%d, %d]", key, lo, hi);
  *out = (int32_t)json_integer_value(v);
  return 0;
}

static const char *const k_fault_names[SC_FAULT_COUNT] = {
    [SC_FAULT_DESYNC] = "desync", [SC_FAULT_KILL] = "kill", [SC_FAULT_BADACK] = "badack",
    [SC_FAULT_NOACK] = "noack", [SC_FAULT_DEVFAULT] = "devfault",
    [SC_FAULT_NOCOMPLETE] = "nocomplete"};

int sc_pipeline_parse_inject(sc_pipeline_config *c, const char *spec, sc_diag *d) {
  char kind[16];
  int rank = -1;
  unsigned long long step = 0;
  int used = 0;
  if (sscanf(spec, "%15[a-z]:%d:%llu%n", kind, &rank, &step, &used) != 3 ||
      spec[used] != '\0' || rank < 0 || rank >= c->num_ranks || step < 1)
    return sc_fail(d, SC_EINVAL,
                   "--inject '%s': expected KIND:RANK:STEP with KIND one of desync, kill, "
                   "badack, noack, devfault, nocomplete, RANK in [0, %d] and STEP >= 1",
                   spec, c->num_ranks - 1);
  for (int f = 0; f < SC_FAULT_COUNT; f++) {
    if (strcmp(kind, k_fault_names[f]) == 0) {
      c->inject[f] = (sc_fault_at){.rank = rank, .step = step};
      return 0;
    }
  }
  return sc_fail(d, SC_EINVAL,
                 "--inject '%s': the fault is desync, kill, badack, noack, devfault or "
                 "nocomplete", spec);
}

/* A path from the cluster file (its key `what`): relative paths are relative to the
 * file's folder, so a cluster file and its model can be moved (or started from anywhere)
 * together. SC_EINVAL when the result does not fit out. */
static int resolve_path(const char *cluster_path, const char *what, const char *path,
                        char *out, size_t len, sc_diag *d) {
  const char *slash = strrchr(cluster_path, '/');
  const int n = path[0] == '/' || slash == NULL
                    ? snprintf(out, len, "%s", path)
                    : snprintf(out, len, "%.*s/%s", (int)(slash - cluster_path), cluster_path,
                               path);
  if (n < 0 || (size_t)n >= len)
    return sc_fail(d, SC_EINVAL, "%s: the path is longer than %zu bytes", what, len - 1);
  return 0;
}

/* Bytes of a client_submit besides its prompt's ids: the envelope, the other fields
 * and the prompt's array header (about 60 in fact). */
#define SC_SUBMIT_OVERHEAD 1024

static int parse_section(const char *cluster_path, json_t *p, sc_pipeline_config *c,
                         sc_diag *d) {
  const char *key;
  json_t *v;
  static const char *const known[] = {
      "model", "model_file", "weights", "interleave", "block_size", "pad_multiple",
      "max_gathered_rows", "num_blocks", "token_budget", "max_running", "max_model_len",
      "deadline_ms", "kernel_threads", "kv_format", "inject", "max_prompt_len", "device",
      "cuda_device", "collectives"};
  json_object_foreach(p, key, v) {
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= strcmp(key, known[i]) == 0;
    if (!ok) return sc_fail(d, SC_EINVAL, "pipeline: unknown key \"%s\"", key);
  }
  int rc;
  sc_engine_config *e = &c->engine;
  json_t *mf = json_object_get(p, "model_file"), *m = json_object_get(p, "model");
  if (mf) {
    if (!json_is_string(mf)) return sc_fail(d, SC_EINVAL, "pipeline.model_file must be a path");
    char path[1024];
    if ((rc = resolve_path(cluster_path, "pipeline.model_file", json_string_value(mf), path,
                           sizeof path, d)) ||
        (rc = sc_model_config_load(path, &e->model, d)))
      return rc;
  }
  if (m && (rc = sc_model_config_apply_json(&e->model, m, d))) return rc;
  json_t *w = json_object_get(p, "weights");
  if (w) {
    if (!json_is_string(w)) return sc_fail(d, SC_EINVAL, "pipeline.weights must be a path");
    if ((rc = resolve_path(cluster_path, "pipeline.weights", json_string_value(w),
                           c->weights_path, sizeof c->weights_path, d)))
      return rc;
  }
  int32_t deadline = (int32_t)c->deadline_ms, max_prompt = c->limits.max_prompt_len;
  if ((rc = get_i32(p, "interleave", 1, SC_PLAN_MAX_DIM, &e->plan.interleave, d)) ||
      (rc = get_i32(p, "block_size", 1, SC_PLAN_MAX_DIM, &e->plan.block_size, d)) ||
      (rc = get_i32(p, "pad_multiple", 1, SC_PLAN_MAX_DIM, &e->plan.pad_multiple, d)) ||
      (rc = get_i32(p, "num_blocks", 1, 1 << 24, &e->num_blocks, d)) ||
      (rc = get_i32(p, "token_budget", 1, 1 << 24, &c->sched.token_budget, d)) ||
      (rc = get_i32(p, "max_running", 1, 1 << 20, &c->sched.max_running, d)) ||
      (rc = get_i32(p, "max_model_len", 2, SC_PLAN_MAX_TOKENS, &c->sched.max_model_len, d)) ||
      (rc = get_i32(p, "deadline_ms", 1, 3600000, &deadline, d)) ||
      (rc = get_i32(p, "kernel_threads", 1, 64, &e->kernel_threads, d)) ||
      (rc = get_i32(p, "max_prompt_len", 1, SC_PLAN_MAX_TOKENS, &max_prompt, d)))
    return rc;
  c->deadline_ms = deadline;
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
  if ((rc = get_i32(p, "cuda_device", 0, 1024, &e->cuda_device, d))) return rc;
  json_t *coll = json_object_get(p, "collectives");
  if (coll) {
    const char *name = json_string_value(coll);
    if (name == NULL || (strcmp(name, "host") && strcmp(name, "nccl")))
      return sc_fail(d, SC_EINVAL, "pipeline.collectives must be \"host\" or \"nccl\"");
    c->nccl = strcmp(name, "nccl") == 0;
  }
  json_t *kf = json_object_get(p, "kv_format");
  if (kf) {
    const char *s = json_string_value(kf);
    if (s && strcmp(s, "f32") == 0) e->kv_fmt = SC_KFMT_F32;
    else if (s && strcmp(s, "bf16") == 0) e->kv_fmt = SC_KFMT_BF16;
    else return sc_fail(d, SC_EINVAL, "pipeline.kv_format must be \"f32\" or \"bf16\"");
  }
  json_t *inj = json_object_get(p, "inject");
  if (inj) {
    if (!json_is_array(inj)) return sc_fail(d, SC_EINVAL, "pipeline.inject must be a list");
    size_t i;
    json_t *s;
    json_array_foreach(inj, i, s) {
      if (!json_is_string(s)) return sc_fail(d, SC_EINVAL, "pipeline.inject[%zu] must be a string", i);
      if ((rc = sc_pipeline_parse_inject(c, json_string_value(s), d))) return rc;
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
      (rc = resolve_path(cluster_path, "cluster: listen_key_file", cluster->listen_key_file,
                         c->listen_key_file, sizeof c->listen_key_file, d)))
    goto out;
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
    snprintf(c->coll_endpoints[r], sizeof c->coll_endpoints[r], "%s", json_string_value(ce));
  }
  if (!json_is_object(p)) {
    rc = sc_fail(d, SC_EINVAL, "cluster: \"pipeline\" must be an object");
    goto out;
  }
  if ((rc = parse_section(cluster_path, p, c, d))) goto out;
  if (c->weights_path[0]) e->weights = c->weights_path;
  /* the scheduler's pool is the engines' cache: one virtual block per physical block */
  c->sched.block_size = e->plan.block_size;
  c->sched.num_blocks = e->num_blocks;
  c->sched.dcp = e->plan.dcp;
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
out:
  json_decref(root);
  if (rc) sc_pipeline_config_free(c);
  return rc;
}

void sc_pipeline_config_free(sc_pipeline_config *c) {
  free(c->coll_endpoints);
  c->coll_endpoints = NULL;
}

void sc_rank_ctx_comm_done(sc_rank_ctx *x, int state) {
  pthread_mutex_lock(&x->comm_mu);
  atomic_store(&x->comm_state, state);
  pthread_cond_broadcast(&x->comm_cv);
  pthread_mutex_unlock(&x->comm_mu);
}

int sc_rank_ctx_comm_wait(sc_rank_ctx *x, int64_t timeout_ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_ms / 1000;
  until.tv_nsec += (timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&x->comm_mu);
  while (atomic_load(&x->comm_state) == 0)
    if (pthread_cond_timedwait(&x->comm_cv, &x->comm_mu, &until) != 0) break;
  const int st = atomic_load(&x->comm_state);
  pthread_mutex_unlock(&x->comm_mu);
  return st == 1 ? 0 : st < 0 ? st : SC_ETIMEDOUT;
}

int sc_rank_ctx_nccl_init(sc_rank_ctx *x, const unsigned char ids[SC_GROUP_COUNT][128],
                          sc_diag *d) {
#ifdef SC_HAVE_CUDA
  sc_nccl_id nid[SC_GROUP_COUNT];
  for (int g = 0; g < SC_GROUP_COUNT; g++) memcpy(nid[g].bytes, ids[g], SC_NCCL_ID_BYTES);
  void *stream = sc_kernels_cuda_stream(sc_engine_kernels(x->engine));
  const uint64_t inject = x->comm.inject_desync_step;
  /* every process sees its one GPU as device 0 (CUDA_VISIBLE_DEVICES, docs/pipeline.md) */
  const int rc = sc_nccl_comm_init(&x->plan_cfg, x->rank, 0, nid, stream, x->cfg.deadline_ms,
                                   &x->comm);
  x->comm.inject_desync_step = inject;
  if (rc) return sc_fail(d, rc, "rank %d: cannot create the NCCL communicators: %s", x->rank,
                         sc_strerror(rc));
  x->nccl_comm = true;
  return 0;
#else
  (void)x, (void)ids;
  return sc_fail(d, SC_ENOTSUP, "this sparsecp was built without CUDA and NCCL");
#endif
}

int sc_rank_ctx_create(const sc_pipeline_config *cfg, int32_t rank, sc_rank_ctx **out,
                       sc_diag *d) {
  *out = NULL;
  sc_rank_ctx *x = calloc(1, sizeof *x);
  const char **eps = calloc((size_t)cfg->num_ranks, sizeof *eps);
  int rc = SC_ENOMEM;
  if (x == NULL || eps == NULL) {
    free(x);
    free(eps);
    return sc_fail(d, SC_ENOMEM, "out of memory");
  }
  x->cfg = *cfg;
  x->cfg.coll_endpoints = NULL; /* borrowed only here */
  pthread_mutex_init(&x->comm_mu, NULL);
  pthread_cond_init(&x->comm_cv, NULL);
  x->rank = rank;
  x->plan_cfg = cfg->engine.plan;
  sc_model_config_to_plan(&cfg->engine.model, &x->plan_cfg);
  if (cfg->nccl && !cfg->engine.cuda) {
    rc = sc_fail(d, SC_EINVAL, "NCCL collectives need \"device\": \"cuda\"");
    goto fail;
  }
  /* 1. the comm's groups (the engine takes its TP slice from them), and for host
   *    collectives the backend itself */
  if (cfg->nccl) {
    sc_comm_init_groups(&x->comm, &x->plan_cfg, rank);
  } else {
    for (int32_t r = 0; r < cfg->num_ranks; r++) eps[r] = cfg->coll_endpoints[r];
    const sc_host_coll_config hc = {.rank = rank, .endpoints = eps,
                                    .deadline_ms = cfg->deadline_ms};
    if ((rc = sc_host_coll_create(&x->comm, &x->plan_cfg, &hc, d))) goto fail;
    x->host_comm = true;
  }
  /* 2. the engine (weights, cache, forward) */
  if ((rc = sc_engine_create(&cfg->engine, rank, &x->comm, &x->engine, d))) goto fail;
  /* 3. device buffers: staged through host memory for the host backend, or NCCL */
  if (cfg->engine.cuda && !cfg->nccl) {
    if ((rc = sc_coll_staged_wrap(&x->comm, sc_engine_kernels(x->engine), d))) goto fail;
    x->staged = true;
  }
  /* NCCL: the comm actor exchanges the unique ids and creates the communicators */
  atomic_store(&x->comm_state, cfg->nccl ? 0 : 1);
  if (cfg->inject[SC_FAULT_DESYNC].rank == rank)
    x->comm.inject_desync_step = cfg->inject[SC_FAULT_DESYNC].step;
  free(eps);
  *out = x;
  return 0;
fail:
  free(eps);
  sc_rank_ctx_destroy(x);
  return rc;
}

void sc_rank_ctx_destroy(sc_rank_ctx *x) {
  if (x == NULL) return;
  if (x->staged) sc_coll_staged_unwrap(&x->comm);
  /* the communicators before the engine: NCCL waits on events of the engine's stream */
#ifdef SC_HAVE_CUDA
  if (x->nccl_comm) sc_nccl_comm_destroy(&x->comm);
#endif
  if (x->host_comm) sc_host_coll_destroy(&x->comm);
  sc_engine_destroy(x->engine);
  pthread_mutex_destroy(&x->comm_mu);
  pthread_cond_destroy(&x->comm_cv);
  free(x);
}

int sc_pipeline_send_abort(sc_ctx *c, sc_actor_id dst, uint64_t step, int32_t rank, int code,
                           const char *message, const sc_coll_failure *f) {
  sc_msg_step_abort *a = sc_msg_body_new(SC_MSG_STEP_ABORT);
  if (a == NULL || (a->message = strdup(message)) == NULL) {
    sc_msg_body_destroy(SC_MSG_STEP_ABORT, a);
    return SC_ENOMEM;
  }
  a->reason = code;
  a->rank = rank;
  a->step = step;
  a->seq = -1;
  if (f && f->step == step && f->code != 0) {
    a->seq = f->seq;
    a->expected = f->expected;
    a->actual = f->actual;
  }
  const int rc = sc_send_step(c, dst, SC_MSG_STEP_ABORT, step, a);
  if (rc) sc_msg_body_destroy(SC_MSG_STEP_ABORT, a);
  return rc;
}

void sc_pipeline_startup(sc_rank_ctx **ctx_slot, sc_startup_actor *out) {
  const sc_startup_actor list[SC_PIPELINE_NUM_ACTORS] = {
      {"gateway", &sc_gateway_spec, SC_ON_HEAD, ctx_slot, sizeof *ctx_slot},
      {"scheduler", &sc_scheduler_spec, SC_ON_HEAD, ctx_slot, sizeof *ctx_slot},
      {"partitioner", &sc_partitioner_spec, SC_ON_HEAD, ctx_slot, sizeof *ctx_slot},
      {"comm", &sc_comm_spec, SC_ON_ALL, ctx_slot, sizeof *ctx_slot},
      {"metadata", &sc_metadata_spec, SC_ON_ALL, ctx_slot, sizeof *ctx_slot},
      {"executor", &sc_executor_spec, SC_ON_ALL, ctx_slot, sizeof *ctx_slot},
  };
  memcpy(out, list, sizeof list);
}

void sc_pipeline_stop_clients(sc_node *node, const char *why) {
  sc_actor_id sched;
  if (sc_node_resolve(node, "scheduler@0", &sched) != 0) return;
  sc_msg_node_shutdown *m = sc_msg_body_new(SC_MSG_NODE_SHUTDOWN);
  if (m == NULL) return;
  m->reason = strdup(why ? why : "");
  sc_envelope env = {.type = SC_MSG_NODE_SHUTDOWN, .dst = sched};
  if (sc_node_send(node, &env, m) != 0) {
    sc_msg_body_destroy(SC_MSG_NODE_SHUTDOWN, m);
    return;
  }
  /* the answers go scheduler -> gateway -> clients, all on the head's loops; a fixed
   * pause, as the scheduler's own shut_down takes, since nothing reports them sent */
  usleep(SC_PIPELINE_STOP_ANSWER_MS * 1000);
}

/* plan_build.c - the compact step plan: rank layout (SPEC.md §3), global chunk plan
 * (§5) and collective plan (§6). Index arrays are in plan_index.c. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "plan/dcp.h"
#include "plan/plan.h"

void sc_plan_init(sc_plan *plan) { memset(plan, 0, sizeof *plan); }

void sc_plan_free(sc_plan *plan) {
  free(plan->reqs);
  free(plan->order);
  free(plan->rank_tokens);
  free(plan->regions);
  free(plan->chunks);
  free(plan->colls);
  sc_plan_init(plan);
}

/* Grows *arr to hold at least n elements of size elem; capacity doubles so repeated
 * builds of similar steps stop allocating. */
static int grow(void **arr, int32_t *cap, int32_t n, size_t elem) {
  if (n <= *cap) return 0;
  int64_t c = *cap > 0 ? *cap : 16;
  while (c < n) c *= 2;
  void *p = realloc(*arr, (size_t)c * elem);
  if (p == NULL) return SC_ENOMEM;
  *arr = p;
  *cap = (int32_t)c;
  return 0;
}
#define GROW(plan, field, capf, n) \
  grow((void **)&(plan)->field, &(plan)->capf, (n), sizeof *(plan)->field)

int sc_plan_reserve(sc_plan *plan, int32_t reqs, int32_t order, int32_t pcp, int32_t regions,
                    int32_t chunks, int32_t colls) {
  int rc;
  if ((rc = GROW(plan, reqs, cap_reqs, reqs)) || (rc = GROW(plan, order, cap_order, order)) ||
      (rc = GROW(plan, rank_tokens, cap_pcp, pcp)) ||
      (rc = GROW(plan, regions, cap_regions, regions)) ||
      (rc = GROW(plan, chunks, cap_chunks, chunks)) || (rc = GROW(plan, colls, cap_colls, colls)))
    return rc;
  return 0;
}

static void reset(sc_plan *plan) {
  plan->num_reqs = plan->num_ordered = 0;
  plan->num_tokens = plan->num_decode_tokens = plan->t_pad = 0;
  plan->num_regions = plan->num_chunks = plan->num_colls = 0;
  plan->fingerprint = 0;
}

/* Length of DualChunkSwap chunk k of a request of q tokens cut in chunks of cs. */
static inline int32_t chunk_len(int32_t q, int32_t cs, int32_t k) {
  int64_t lo = (int64_t)k * cs;
  if (lo >= q) return 0;
  return (int32_t)(lo + cs <= q ? cs : q - lo);
}

/* SPEC.md §3: split a prefill over 2P chunks unless, under DCP, the last chunk would be
 * empty (then some rank would get a short or empty share and the per-request DCP gathers
 * would differ in shape between ranks: replicate instead). */
static bool is_split(const sc_plan_config *cfg, const sc_batch_req *r, int32_t *cs) {
  const int32_t C = 2 * cfg->pcp;
  *cs = r->scheduled;
  if (!r->prefill || cfg->pcp == 1 || r->scheduled == 0) return false;
  const int32_t chunk = (int32_t)(((int64_t)r->scheduled + C - 1) / C);
  const bool drops_a_chunk = (int64_t)(C - 1) * chunk >= r->scheduled;
  if (cfg->dcp > 1 && drops_a_chunk) return false;
  *cs = chunk;
  return true;
}

int sc_plan_req_rows(const sc_plan *plan, int32_t req, int32_t pcp_rank,
                     sc_plan_row out[2]) {
  const sc_plan_req *r = &plan->reqs[req];
  if (r->q == 0) return 0;
  if (!(r->flags & SC_REQ_SPLIT)) {
    out[0] = (sc_plan_row){.req = req, .offset = 0, .len = r->q, .split = false};
    return 1;
  }
  const int32_t C = 2 * plan->cfg.pcp;
  const int32_t ks[2] = {pcp_rank, C - 1 - pcp_rank};
  int n = 0;
  for (int i = 0; i < 2; i++) {
    const int32_t len = chunk_len(r->q, r->cs, ks[i]);
    if (len == 0) continue; /* only possible without DCP */
    out[n++] = (sc_plan_row){.req = req, .offset = ks[i] * r->cs, .len = len, .split = true};
  }
  return n;
}

static int build_layout(sc_plan *plan, const sc_batch_req *reqs, int32_t n, sc_diag *d) {
  const sc_plan_config *cfg = &plan->cfg;
  const int32_t P = cfg->pcp, C = 2 * P;
  int64_t total = 0, decode = 0, replicated = 0;
  int32_t num_decode_reqs = 0;

  memset(plan->rank_tokens, 0, (size_t)P * sizeof *plan->rank_tokens);
  for (int32_t i = 0; i < n; i++) {
    const sc_batch_req *in = &reqs[i];
    if (in->computed < 0 || in->scheduled < 0)
      return sc_fail(d, SC_EINVAL,
                     "request %d: computed (%d) and scheduled (%d) must be >= 0", i,
                     in->computed, in->scheduled);
    const int64_t extent = (int64_t)in->computed + in->scheduled;
    if (extent < 1)
      return sc_fail(d, SC_EINVAL,
                     "request %d: extent computed + scheduled must be >= 1 (got 0)", i);
    if (extent > SC_PLAN_MAX_TOKENS)
      return sc_fail(d, SC_ERANGE, "request %d: extent %lld exceeds the limit of %d tokens",
                     i, (long long)extent, SC_PLAN_MAX_TOKENS);
    total += in->scheduled;
    if (total > SC_PLAN_MAX_TOKENS)
      return sc_fail(d, SC_ERANGE, "the batch schedules more than %d tokens",
                     SC_PLAN_MAX_TOKENS);

    sc_plan_req *r = &plan->reqs[i];
    const bool split = is_split(cfg, in, &r->cs);
    r->start = (int32_t)(total - in->scheduled);
    r->q = in->scheduled;
    r->extent = (int32_t)extent;
    r->region = -1;
    r->flags = (in->prefill ? SC_REQ_PREFILL : 0u) | (split ? SC_REQ_SPLIT : 0u);
    if (!in->prefill) {
      decode += in->scheduled;
      num_decode_reqs += in->scheduled > 0;
    }
    if (!split) {
      replicated += in->scheduled; /* every rank holds the whole request */
    } else {
      for (int32_t k = 0; k < P; k++)
        plan->rank_tokens[k] += chunk_len(r->q, r->cs, k) + chunk_len(r->q, r->cs, C - 1 - k);
    }
  }
  if (total == 0)
    return sc_fail(d, SC_EINVAL, "empty batch: no request schedules any token");

  /* Row order (prefill ? 1 : 0, request index, offset): decodes first, each group in
   * request order. A stable two-way partition of the batch order. */
  int32_t nd = 0, np = num_decode_reqs;
  for (int32_t i = 0; i < n; i++) {
    if (plan->reqs[i].q == 0) continue;
    if (plan->reqs[i].flags & SC_REQ_PREFILL) plan->order[np++] = i;
    else plan->order[nd++] = i;
  }
  plan->num_ordered = np;

  int64_t max_local = 0;
  for (int32_t k = 0; k < P; k++) {
    plan->rank_tokens[k] += (int32_t)replicated;
    if (plan->rank_tokens[k] > max_local) max_local = plan->rank_tokens[k];
  }
  const int64_t pm = cfg->pad_multiple;
  const int64_t t_pad = (max_local + pm - 1) / pm * pm;
  if (t_pad * P > INT32_MAX)
    return sc_fail(d, SC_ERANGE, "gathered layout of %lld slots does not fit 32-bit indices",
                   (long long)(t_pad * P));
  plan->num_reqs = n;
  plan->num_tokens = (int32_t)total;
  plan->num_decode_tokens = (int32_t)decode;
  plan->t_pad = (int32_t)t_pad;
  return 0;
}

/* SPEC.md §5: regions are the prefill requests with q > 0 in request order, packed
 * greedily into chunks of at most floor(M / N) shard rows. Needed only under DCP. */
static int build_chunks(sc_plan *plan, sc_diag *d) {
  const sc_plan_config *cfg = &plan->cfg;
  const int32_t N = cfg->dcp, I = cfg->interleave;
  if (N == 1) return 0;
  const int64_t budget = cfg->max_gathered_rows / N;
  int32_t nreg = 0;
  for (int32_t i = 0; i < plan->num_reqs; i++) {
    const sc_plan_req *r = &plan->reqs[i];
    nreg += (r->flags & SC_REQ_PREFILL) && r->q > 0;
  }
  int rc;
  if ((rc = GROW(plan, regions, cap_regions, nreg)) || (rc = GROW(plan, chunks, cap_chunks, nreg)))
    return sc_fail(d, rc, "out of memory planning %d regions", nreg);

  sc_plan_chunk *cur = NULL;
  for (int32_t i = 0; i < plan->num_reqs; i++) {
    sc_plan_req *r = &plan->reqs[i];
    if (!(r->flags & SC_REQ_PREFILL) || r->q == 0) continue;
    const int64_t shard = sc_dcp_local_len(r->extent, 0, N, I);
    if (shard > budget)
      return sc_fail(d, SC_ERANGE,
                     "request %d needs %lld rows per rank; the workspace holds %lld "
                     "(max_gathered_rows %lld / dcp %d)",
                     i, (long long)shard, (long long)budget,
                     (long long)cfg->max_gathered_rows, N);
    if (cur == NULL || cur->shard_rows_total + shard > budget) {
      cur = &plan->chunks[plan->num_chunks++];
      *cur = (sc_plan_chunk){.first_region = plan->num_regions};
    }
    sc_plan_region *g = &plan->regions[plan->num_regions];
    *g = (sc_plan_region){.req = i,
                          .extent = r->extent,
                          .shard_rows = (int32_t)shard,
                          .ws_start = cur->shard_rows_total,
                          .cu_start = cur->extent_total,
                          .chunk = plan->num_chunks - 1};
    r->region = plan->num_regions++;
    cur->num_regions++;
    cur->shard_rows_total += (int32_t)shard;
    cur->extent_total += r->extent;
  }
  return 0;
}

/* SPEC.md §6. The rows and widths depend on the global batch and the configuration
 * only: a rank with nothing to send still takes part with padding. */
static int build_collectives(sc_plan *plan, sc_diag *d) {
  const sc_plan_config *cfg = &plan->cfg;
  const int32_t P = cfg->pcp, N = cfg->dcp, T = cfg->tp;
  const int64_t D = plan->num_decode_tokens;
  const int64_t h_local = cfg->heads / T;
  const int64_t h_att = P == 1 ? h_local * N : h_local;
  const int64_t kv_width = (int64_t)cfg->kv_lora_rank + cfg->rope_dim;
  const int64_t kv_index_width = kv_width + cfg->index_dim;
  bool has_prefill = false;
  for (int32_t k = 0; k < plan->num_ordered && !has_prefill; k++)
    has_prefill = plan->reqs[plan->order[k]].flags & SC_REQ_PREFILL;
  const bool dcp_decode = D > 0 && N > 1;

  const int64_t per_layer = (has_prefill && P > 1) + (has_prefill ? plan->num_chunks : 0) +
                            (dcp_decode && P == 1) + 3 * dcp_decode + 2 * (T > 1);
  const int64_t total = per_layer * cfg->layers + (P > 1);
  int rc;
  if (total > INT32_MAX || (rc = GROW(plan, colls, cap_colls, (int32_t)total)))
    return sc_fail(d, SC_ENOMEM, "out of memory planning %lld collectives", (long long)total);

  sc_coll *out = plan->colls;
  int32_t seq = 0;
#define ADD(layer_, group_, op_, dtype_, purpose_, chunk_, rows_, width_)            \
  do {                                                                               \
    out[seq] = (sc_coll){.seq = seq, .layer = (layer_), .group = (group_),           \
                         .op = (op_), .dtype = (dtype_), .purpose = (purpose_),      \
                         .chunk = (chunk_), .rows = (rows_), .width = (width_)};     \
    seq++;                                                                           \
  } while (0)
  const uint8_t dt = (uint8_t)cfg->dtype;
  for (int32_t l = 0; l < cfg->layers; l++) {
    if (has_prefill && P > 1)
      ADD(l, SC_GROUP_PCP, SC_OP_ALL_GATHER, dt, SC_PURPOSE_PREFILL_KV, -1,
          plan->t_pad - D, kv_index_width);
    if (has_prefill)
      for (int32_t c = 0; c < plan->num_chunks; c++)
        ADD(l, SC_GROUP_DCP, SC_OP_ALL_GATHER, dt, SC_PURPOSE_CONTEXT_KV, c,
            plan->chunks[c].shard_rows_total, kv_index_width);
    if (dcp_decode && P == 1)
      ADD(l, SC_GROUP_DCP, SC_OP_ALL_GATHER, dt, SC_PURPOSE_DECODE_Q, -1, D,
          h_local * kv_width);
    if (dcp_decode) {
      ADD(l, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_W32, SC_PURPOSE_TOPK_CANDIDATES, -1, D,
          2 * (int64_t)cfg->topk);
      /* LSE stays f32 whatever the activation type: the merge weights need the range. */
      ADD(l, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_DECODE_LSE, -1, D, h_att);
      ADD(l, SC_GROUP_DCP, P > 1 ? SC_OP_ALL_REDUCE : SC_OP_REDUCE_SCATTER, dt,
          SC_PURPOSE_DECODE_OUT, -1, D, h_att * cfg->kv_lora_rank);
    }
    if (T > 1) {
      ADD(l, SC_GROUP_TP, SC_OP_ALL_REDUCE, dt, SC_PURPOSE_ATTN_OUT, -1, plan->t_pad,
          cfg->hidden);
      ADD(l, SC_GROUP_TP, SC_OP_ALL_REDUCE, dt, SC_PURPOSE_MLP_OUT, -1, plan->t_pad,
          cfg->hidden);
    }
  }
  if (P > 1)
    ADD(-1, SC_GROUP_PCP, SC_OP_ALL_GATHER, dt, SC_PURPOSE_HIDDEN_RESTORE, -1, plan->t_pad,
        cfg->hidden);
#undef ADD
  plan->num_colls = seq;
  plan->fingerprint = sc_coll_fingerprint(plan->colls, seq);
  return 0;
}

int sc_plan_build(sc_plan *plan, const sc_plan_config *cfg, const sc_batch_req *reqs,
                  int32_t num_reqs, sc_diag *d) {
  reset(plan);
  plan->cfg = *cfg;
  if (num_reqs <= 0 || reqs == NULL)
    return sc_fail(d, SC_EINVAL, "empty batch: a step needs at least one request");
  int rc;
  if ((rc = GROW(plan, reqs, cap_reqs, num_reqs)) ||
      (rc = GROW(plan, order, cap_order, num_reqs)) ||
      (rc = GROW(plan, rank_tokens, cap_pcp, cfg->pcp)))
    return sc_fail(d, rc, "out of memory planning %d requests", num_reqs);
  if ((rc = build_layout(plan, reqs, num_reqs, d)) || (rc = build_chunks(plan, d)) ||
      (rc = build_collectives(plan, d))) {
    reset(plan);
    return rc;
  }
  return 0;
}

size_t sc_coll_block_bytes(const sc_coll *c, int32_t group_size) {
  const size_t elems = (size_t)c->rows * (size_t)c->width;
  const size_t mine = c->op == SC_OP_REDUCE_SCATTER ? elems / (size_t)group_size : elems;
  return mine * sc_dtype_size(c->dtype);
}

int32_t sc_plan_group_size(const sc_plan_config *cfg, int group) {
  return group == SC_GROUP_TP ? cfg->tp : group == SC_GROUP_PCP ? cfg->pcp : cfg->dcp;
}

void sc_plan_purpose_totals(const sc_plan *plan, uint64_t colls[SC_PURPOSE_COUNT],
                            uint64_t bytes[SC_PURPOSE_COUNT]) {
  memset(colls, 0, sizeof(uint64_t) * SC_PURPOSE_COUNT);
  memset(bytes, 0, sizeof(uint64_t) * SC_PURPOSE_COUNT);
  for (int32_t k = 0; k < plan->num_colls; k++) {
    const sc_coll *c = &plan->colls[k];
    assert(c->purpose < SC_PURPOSE_COUNT); /* a built or checked plan */
    colls[c->purpose]++;
    bytes[c->purpose] += sc_coll_block_bytes(c, sc_plan_group_size(&plan->cfg, c->group));
  }
}

/* rows * width * elem bytes, or SIZE_MAX when that does not fit */
static size_t bytes_of(size_t rows, size_t width, size_t elem) {
  size_t n = rows;
  const size_t by[2] = {width, elem};
  for (int i = 0; i < 2; i++) n = by[i] != 0 && n > SIZE_MAX / by[i] ? SIZE_MAX : n * by[i];
  return n;
}

static size_t max_of(size_t a, size_t b) { return a > b ? a : b; }

/* Follows build_collectives term by term, with the largest rows each can have. */
size_t sc_plan_max_block_bytes(const sc_plan_config *cfg, int64_t max_step_tokens) {
  if (max_step_tokens < 1) return 0;
  const int32_t P = cfg->pcp, N = cfg->dcp, T = cfg->tp;
  /* (the planner refuses a bigger step) */
  const size_t S = (size_t)(max_step_tokens < SC_PLAN_MAX_TOKENS ? max_step_tokens
                                                                 : SC_PLAN_MAX_TOKENS);
  /* T_pad: a rank holds at most every token of the step (a step of decodes, which every
   * PCP rank holds, or of one-token prefills, which all fall to PCP rank 0), rounded up
   * to pad_multiple. D, the decode tokens: at most S. */
  const size_t pm = (size_t)cfg->pad_multiple, t_pad = (S + pm - 1) / pm * pm, D = S;
  const size_t ds = sc_dtype_size(cfg->dtype), w32 = sc_dtype_size(SC_DT_W32);
  const size_t f32 = sc_dtype_size(SC_DT_F32);
  const size_t kv_width = (size_t)cfg->kv_lora_rank + (size_t)cfg->rope_dim;
  const size_t kv_index_width = kv_width + (size_t)cfg->index_dim;
  const size_t h_local = (size_t)(cfg->heads / T);
  const size_t h_att = P == 1 ? h_local * (size_t)N : h_local;
  size_t m = 0;
  if (P > 1) /* prefill_kv: T_pad - D rows */
    m = max_of(m, bytes_of(t_pad, kv_index_width, ds));
  if (P > 1 || T > 1) /* hidden_restore (P > 1); attn_out and mlp_out (T > 1) */
    m = max_of(m, bytes_of(t_pad, (size_t)cfg->hidden, ds));
  if (N > 1) {
    /* context_kv: a chunk's rows per DCP rank, which build_chunks keeps within
     * max_gathered_rows / N; the context, not the step, sets them */
    m = max_of(m, bytes_of((size_t)(cfg->max_gathered_rows / N), kv_index_width, ds));
    if (P == 1) /* decode_q */
      m = max_of(m, bytes_of(D, h_local * kv_width, ds));
    m = max_of(m, bytes_of(D, 2 * (size_t)cfg->topk, w32)); /* topk_candidates */
    m = max_of(m, bytes_of(D, h_att, f32));                  /* decode_lse */
    /* decode_out: an all_reduce of the whole buffer (P > 1), or a reduce_scatter of
     * which each member receives 1/N (P = 1, where h_att = N * h_local) */
    m = max_of(m, bytes_of(D, (P > 1 ? h_att : h_local) * (size_t)cfg->kv_lora_rank, ds));
  }
  return m;
}

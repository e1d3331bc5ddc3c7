#include "plan_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/dcp.h"

#define FAIL(...)                           \
  do {                                      \
    snprintf(why, why_len, __VA_ARGS__);    \
    rc = -1;                                \
    goto out;                               \
  } while (0)

typedef struct {
  int32_t req, offset, len;
  bool split;
} row_t;

/* Rows of one rank, gathered through the public per-request projection. */
static int rank_rows(const sc_plan *plan, int32_t r, row_t *out) {
  int n = 0;
  for (int32_t k = 0; k < plan->num_ordered; k++) {
    sc_plan_row rows[2];
    const int nr = sc_plan_req_rows(plan, plan->order[k], r, rows);
    for (int i = 0; i < nr; i++)
      out[n++] = (row_t){rows[i].req, rows[i].offset, rows[i].len, rows[i].split};
  }
  return n;
}

int sc_check_plan(const sc_plan *plan, const sc_batch_req *reqs, int32_t n, char *why,
                  size_t why_len) {
  const sc_plan_config *cfg = &plan->cfg;
  const int32_t P = cfg->pcp, N = cfg->dcp, I = cfg->interleave, C = 2 * P;
  int rc = 0;
  row_t *rows = NULL, *rows0 = NULL;
  int32_t *start = NULL, *owner_count = NULL, *gather = NULL, *restore = NULL;
  int32_t *ws = NULL, *gathered = NULL, *deint = NULL, *lens = NULL, *expect = NULL;
  uint8_t *mask = NULL, *is_owner = NULL;

  /* Batch-level facts, recomputed directly. */
  start = calloc((size_t)n + 1, sizeof *start);
  int64_t total = 0, decode = 0;
  bool has_prefill = false;
  for (int32_t i = 0; i < n; i++) {
    start[i] = (int32_t)total;
    total += reqs[i].scheduled;
    if (!reqs[i].prefill) decode += reqs[i].scheduled;
    if (reqs[i].prefill && reqs[i].scheduled > 0) has_prefill = true;
    if (plan->reqs[i].extent != reqs[i].computed + reqs[i].scheduled)
      FAIL("request %d: extent %d != c + q", i, plan->reqs[i].extent);
  }
  if (plan->num_tokens != total) FAIL("num_tokens %d != %lld", plan->num_tokens, (long long)total);
  if (plan->num_decode_tokens != decode) FAIL("D %d != %lld", plan->num_decode_tokens, (long long)decode);

  expect = malloc(sizeof *expect * (size_t)n + 1);
  int32_t n_expect = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int32_t i = 0; i < n; i++)
      if (reqs[i].scheduled > 0 && reqs[i].prefill == (pass == 1)) expect[n_expect++] = i;

  const int32_t max_rows = 2 * n + 2;
  rows = malloc(sizeof *rows * (size_t)max_rows);
  rows0 = malloc(sizeof *rows0 * (size_t)max_rows);
  owner_count = calloc((size_t)total + 1, sizeof *owner_count);
  const int32_t t_pad = plan->t_pad;
  const int64_t slots = (int64_t)P * t_pad;
  is_owner = calloc((size_t)slots + 1, 1);
  int n0 = 0;
  int64_t max_local = 0;

  for (int32_t r = 0; r < P; r++) {
    const int nr = rank_rows(plan, r, rows);
    if (r == 0) {
      memcpy(rows0, rows, sizeof *rows * (size_t)nr);
      n0 = nr;
    }
    int64_t local = 0;
    bool seen_prefill = false;
    int32_t last_req = -1, last_end = -1;
    /* The requests this rank lists, in row order (distinct, consecutive groups). */
    for (int k = 0; k < nr; k++) {
      const row_t *w = &rows[k];
      const sc_batch_req *b = &reqs[w->req];
      if (w->len <= 0) FAIL("rank %d row %d: empty row", r, k);
      if (w->offset < 0 || w->offset + w->len > b->scheduled)
        FAIL("rank %d row %d: [%d,%d) outside q = %d", r, k, w->offset, w->offset + w->len,
             b->scheduled);
      /* decodes first */
      if (b->prefill) seen_prefill = true;
      else if (seen_prefill) FAIL("rank %d: decode row of request %d after a prefill row", r, w->req);
      /* grouped by request and ascending (request index within each kind, offsets) */
      if (w->req == last_req) {
        if (w->offset < last_end) FAIL("rank %d: rows of request %d overlap or descend", r, w->req);
      } else {
        if (last_req >= 0 && reqs[last_req].prefill == b->prefill && w->req < last_req)
          FAIL("rank %d: request %d listed after %d", r, w->req, last_req);
        for (int j = 0; j < k; j++)
          if (rows[j].req == w->req) FAIL("rank %d: request %d not grouped", r, w->req);
      }
      last_req = w->req;
      last_end = w->offset + w->len;
      /* split rule, recomputed: split iff prefill, P > 1, and not (DCP and drops a chunk) */
      const int32_t q = b->scheduled;
      const int32_t cs = (q + C - 1) / C;
      const bool drops = (int64_t)(C - 1) * cs >= q;
      const bool want_split = b->prefill && P > 1 && !(N > 1 && drops);
      if (w->split != want_split) FAIL("request %d (q %d): split %d, expected %d", w->req, q, w->split, want_split);
      if (!w->split && (w->offset != 0 || w->len != q))
        FAIL("rank %d: replicated request %d is not whole", r, w->req);
      if (w->split) {
        if (w->offset % cs != 0) FAIL("request %d: chunk offset %d not a multiple of %d", w->req, w->offset, cs);
        const int32_t kidx = w->offset / cs;
        if (kidx != r && kidx != C - 1 - r)
          FAIL("rank %d holds chunk %d of request %d", r, kidx, w->req);
      }
      /* owner copies */
      const bool owner = w->split || r == 0;
      for (int32_t t = 0; t < w->len; t++) {
        const int32_t g = start[w->req] + w->offset + t;
        if (owner) owner_count[g]++;
        if (owner) is_owner[(int64_t)r * t_pad + local + t] = 1;
      }
      local += w->len;
    }
    if (local != plan->rank_tokens[r]) FAIL("rank %d: rows hold %lld tokens, T_local says %d", r, (long long)local, plan->rank_tokens[r]);
    if (local > max_local) max_local = local;

    /* Under DCP every split request gives each rank two rows, the first full length. */
    if (N > 1) {
      for (int k = 0; k < nr; k++) {
        if (!rows[k].split) continue;
        const int32_t q = reqs[rows[k].req].scheduled, cs = (q + C - 1) / C;
        if (k + 1 >= nr || rows[k + 1].req != rows[k].req)
          FAIL("rank %d: split request %d has one row under DCP", r, rows[k].req);
        if (rows[k].len != cs) FAIL("rank %d: first row of request %d is short (%d < %d)", r, rows[k].req, rows[k].len, cs);
        k++;
      }
    }
    /* Same request indices in the same order: every rank's list of requests (in row
     * order) is the common order -- decodes, then prefills, each by request index --
     * restricted to the requests it holds tokens of; under DCP that is all of them. */
    {
      int32_t pos = 0, prev = -1;
      for (int k = 0; k < nr; k++) {
        if (rows[k].req == prev) continue;
        prev = rows[k].req;
        while (pos < n_expect && expect[pos] != prev) {
          if (N > 1) FAIL("rank %d skips request %d under DCP", r, expect[pos]);
          pos++;
        }
        if (pos == n_expect) FAIL("rank %d lists request %d out of the common order", r, prev);
        pos++;
      }
      if (N > 1 && pos != n_expect) FAIL("rank %d lists %d of %d requests under DCP", r, pos, n_expect);
    }
  }

  /* Under DCP, rows x first-length agree: every rank has the same number of rows. */
  if (N > 1)
    for (int32_t r = 1; r < P; r++)
      if (rank_rows(plan, r, rows) != n0) FAIL("rank %d has a different row count than rank 0", r);

  for (int64_t t = 0; t < total; t++)
    if (owner_count[t] != 1) FAIL("global token %lld has %d owner copies", (long long)t, owner_count[t]);

  const int64_t pm = cfg->pad_multiple;
  if (t_pad != (max_local + pm - 1) / pm * pm) FAIL("T_pad %d != roundup(%lld, %lld)", t_pad, (long long)max_local, (long long)pm);

  /* Index arrays. gathered = the global token id in every slot, as a PCP all-gather of
   * each rank's local hidden rows would produce. */
  gather = malloc(sizeof *gather * (size_t)(slots + 1));
  restore = malloc(sizeof *restore * (size_t)(total + 1));
  mask = malloc((size_t)slots + 1);
  sc_plan_fill_gather(plan, gather, restore, mask);
  for (int32_t r = 0; r < P; r++) {
    int64_t slot = (int64_t)r * t_pad;
    const int nr = rank_rows(plan, r, rows);
    for (int k = 0; k < nr; k++)
      for (int32_t t = 0; t < rows[k].len; t++, slot++)
        if (gather[slot] != start[rows[k].req] + rows[k].offset + t)
          FAIL("padded_gather_idx[%lld] = %d, expected %d", (long long)slot, gather[slot],
               start[rows[k].req] + rows[k].offset + t);
    for (; slot < (int64_t)(r + 1) * t_pad; slot++) {
      if (gather[slot] != 0) FAIL("padding slot %lld holds %d, not 0", (long long)slot, gather[slot]);
      if (mask[slot]) FAIL("padding slot %lld writes KV", (long long)slot);
    }
  }
  for (int64_t t = 0; t < total; t++) {
    if (restore[t] < 0 || restore[t] >= slots) FAIL("hidden_restore_idx[%lld] out of range", (long long)t);
    if (gather[restore[t]] != t) FAIL("gathered[hidden_restore_idx[%lld]] = %d", (long long)t, gather[restore[t]]);
    if (!is_owner[restore[t]]) FAIL("hidden_restore_idx[%lld] is not the owner copy", (long long)t);
  }
  for (int64_t s = 0; s < slots; s++)
    if ((mask[s] != 0) != (is_owner[s] != 0)) FAIL("kv_write_mask[%lld] = %d, owner %d", (long long)s, mask[s], is_owner[s]);

  /* DCP local lengths */
  lens = malloc(sizeof *lens * (size_t)n * (size_t)N + 1);
  sc_plan_fill_dcp_local_lens(plan, lens);
  for (int32_t i = 0; i < n; i++) {
    const int32_t e = reqs[i].computed + reqs[i].scheduled;
    int64_t sum = 0;
    for (int32_t r = 0; r < N; r++) {
      int64_t cnt = 0;
      for (int32_t p = 0; p < e; p++) cnt += sc_dcp_owner(p, N, I) == r;
      if (lens[(size_t)i * N + r] != cnt) FAIL("local len of request %d on rank %d: %d != %lld", i, r, lens[(size_t)i * N + r], (long long)cnt);
      if (cnt > lens[(size_t)i * N]) FAIL("rank %d holds more of request %d than rank 0", r, i);
      sum += cnt;
    }
    if (sum != e) FAIL("local lengths of request %d sum to %lld, not %d", i, (long long)sum, e);
  }

  /* Chunk plan: regions = prefill requests with q > 0 in order; budgets; greedy; shards
   * gathered rank-major and read through deinterleave give the tokens in order. */
  const int64_t budget = cfg->max_gathered_rows / N;
  if (N == 1) {
    if (plan->num_chunks != 0) FAIL("chunks without DCP");
  } else {
    int32_t g = 0;
    for (int32_t i = 0; i < n; i++) {
      if (!reqs[i].prefill || reqs[i].scheduled == 0) continue;
      if (g >= plan->num_regions || plan->regions[g].req != i) FAIL("region %d is not request %d", g, i);
      g++;
    }
    if (g != plan->num_regions) FAIL("%d regions, expected %d", plan->num_regions, g);
    for (int32_t c = 0; c < plan->num_chunks; c++) {
      const sc_plan_chunk *ch = &plan->chunks[c];
      const int32_t S = ch->shard_rows_total;
      if (S > budget) FAIL("chunk %d holds %d rows per rank > %lld", c, S, (long long)budget);
      if (ch->num_regions < 1) FAIL("chunk %d is empty", c);
      if (c + 1 < plan->num_chunks &&
          S + plan->regions[plan->chunks[c + 1].first_region].shard_rows <= budget)
        FAIL("chunk %d: the next region would have fit (not greedy)", c);
      free(ws);
      free(gathered);
      free(deint);
      ws = malloc(sizeof *ws * (size_t)N * (size_t)S + 1);
      gathered = malloc(sizeof *gathered * (size_t)N * (size_t)S + 1);
      deint = malloc(sizeof *deint * (size_t)ch->extent_total + 1);
      /* each DCP rank's shard: region g, position p at ws_g + j(p); padding = -1 */
      for (int64_t x = 0; x < (int64_t)N * S; x++) ws[x] = -1;
      int32_t ws_expected = 0;
      for (int32_t gi = ch->first_region; gi < ch->first_region + ch->num_regions; gi++) {
        const sc_plan_region *rg = &plan->regions[gi];
        if (rg->ws_start != ws_expected) FAIL("region %d ws_start %d != %d", gi, rg->ws_start, ws_expected);
        if (rg->shard_rows != sc_dcp_local_len(rg->extent, 0, N, I)) FAIL("region %d shard rows", gi);
        ws_expected += rg->shard_rows;
        for (int32_t p = 0; p < rg->extent; p++) {
          const int32_t o = sc_dcp_owner(p, N, I);
          const int64_t j = sc_dcp_local_index(p, N, I);
          if (j >= rg->shard_rows) FAIL("position %d of region %d past its shard", p, gi);
          ws[(int64_t)o * S + rg->ws_start + j] = gi * 1000003 + p; /* "rank o's shard" */
        }
      }
      if (ws_expected != S) FAIL("chunk %d: ΣS %d != %d", c, S, ws_expected);
      /* the all-gather is rank-major: rank o's shard block at o*S (already laid out so) */
      memcpy(gathered, ws, sizeof *ws * (size_t)N * (size_t)S);
      sc_plan_fill_deinterleave(plan, c, deint);
      int32_t pos = 0;
      for (int32_t gi = ch->first_region; gi < ch->first_region + ch->num_regions; gi++) {
        const sc_plan_region *rg = &plan->regions[gi];
        if (rg->cu_start != pos) FAIL("region %d cu_start", gi);
        for (int32_t p = 0; p < rg->extent; p++, pos++) {
          if (deint[pos] < 0 || deint[pos] >= N * S) FAIL("deinterleave[%d] out of range", pos);
          if (gathered[deint[pos]] != gi * 1000003 + p) FAIL("chunk %d: deinterleave[%d] reads the wrong row", c, pos);
          if (sc_plan_workspace_row(plan, gi, p) != deint[pos]) FAIL("workspace_row(%d, %d)", gi, p);
        }
      }
      if (pos != ch->extent_total) FAIL("chunk %d extent total", c);
    }
  }

  /* Collective plan: entries in §6 order with shapes that depend only on the batch. */
  {
    const int32_t T = cfg->tp;
    const int64_t hl = cfg->heads / T, hatt = P == 1 ? hl * N : hl;
    const int64_t kvw = cfg->kv_lora_rank + cfg->rope_dim;
    int32_t s = 0;
    const sc_coll *cl = plan->colls;
#define EXPECT(l, grp, op_, purp, rws, wid)                                                  \
  do {                                                                                       \
    if (s >= plan->num_colls) FAIL("plan ends before %s of layer %d", sc_coll_purpose_name(purp), l); \
    if (cl[s].seq != s || cl[s].layer != (l) || cl[s].group != (grp) || cl[s].op != (op_) || \
        cl[s].purpose != (purp) || cl[s].rows != (rws) || cl[s].width != (wid))              \
      FAIL("entry %d: %s/%s rows %lld width %lld, expected %s rows %lld width %lld", s,      \
           sc_coll_purpose_name(cl[s].purpose), sc_group_name(cl[s].group),                  \
           (long long)cl[s].rows, (long long)cl[s].width, sc_coll_purpose_name(purp),        \
           (long long)(rws), (long long)(wid));                                              \
    s++;                                                                                     \
  } while (0)
    for (int32_t l = 0; l < cfg->layers; l++) {
      if (has_prefill && P > 1) EXPECT(l, SC_GROUP_PCP, SC_OP_ALL_GATHER, SC_PURPOSE_PREFILL_KV, t_pad - decode, kvw + cfg->index_dim);
      if (has_prefill && N > 1)
        for (int32_t c = 0; c < plan->num_chunks; c++)
          EXPECT(l, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_PURPOSE_CONTEXT_KV, plan->chunks[c].shard_rows_total, kvw + cfg->index_dim);
      if (decode > 0 && N > 1 && P == 1) EXPECT(l, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_PURPOSE_DECODE_Q, decode, hl * kvw);
      if (decode > 0 && N > 1) {
        EXPECT(l, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_PURPOSE_TOPK_CANDIDATES, decode, 2 * cfg->topk);
        EXPECT(l, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_PURPOSE_DECODE_LSE, decode, hatt);
        EXPECT(l, SC_GROUP_DCP, P > 1 ? SC_OP_ALL_REDUCE : SC_OP_REDUCE_SCATTER, SC_PURPOSE_DECODE_OUT, decode, hatt * cfg->kv_lora_rank);
      }
      if (T > 1) {
        EXPECT(l, SC_GROUP_TP, SC_OP_ALL_REDUCE, SC_PURPOSE_ATTN_OUT, t_pad, cfg->hidden);
        EXPECT(l, SC_GROUP_TP, SC_OP_ALL_REDUCE, SC_PURPOSE_MLP_OUT, t_pad, cfg->hidden);
      }
    }
    if (P > 1) EXPECT(-1, SC_GROUP_PCP, SC_OP_ALL_GATHER, SC_PURPOSE_HIDDEN_RESTORE, t_pad, cfg->hidden);
#undef EXPECT
    if (s != plan->num_colls) FAIL("plan has %d entries, expected %d", plan->num_colls, s);
    if (plan->fingerprint != sc_coll_fingerprint(plan->colls, plan->num_colls)) FAIL("stale fingerprint");
  }

  /* Each rank's local view fits the planned (global) shapes. */
  for (int32_t g = 0; g < sc_plan_world_size(cfg); g++) {
    sc_rank_view v;
    sc_plan_rank_view(plan, g, &v);
    if (v.num_tokens > t_pad) FAIL("rank %d: %d local tokens > T_pad", g, v.num_tokens);
    if (v.num_prefill_tokens != v.num_tokens - decode || v.num_prefill_tokens < 0) FAIL("rank %d: prefill tokens", g);
  }
out:
  free(start);
  free(rows);
  free(rows0);
  free(owner_count);
  free(is_owner);
  free(gather);
  free(restore);
  free(mask);
  free(lens);
  free(ws);
  free(gathered);
  free(deint);
  free(expect);
  return rc;
}

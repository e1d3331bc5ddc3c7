/* Kernel tests: row gather and conversion, the workspace deinterleave against the
 * planner (SPEC.md §5), KV write/read by slot mapping with DCP ownership (§4), and the
 * cache key list from its ranges. */
#include <math.h>
#include <string.h>

#include "kernels/bf16.h"
#include "model/model_defaults.h"
#include "plan/dcp.h"
#include "plan/plan.h"
#include "test_kernels.h"

Test(kernels_rows, gather_converts_zero_fills_and_checks_bounds) {
  sc_kernels *k = tk_ctx(2);
  const int64_t rows = 5, width = 3, ld = 4;
  float src_h[20];
  for (int i = 0; i < 20; i++) src_h[i] = 0.5f + (float)i * 1.25f;
  float *src = tk_up(k, src_h, sizeof src_h);
  const int32_t idx_h[6] = {4, -1, 0, 0, 2, 1};
  int32_t *idx = tk_up(k, idx_h, sizeof idx_h);
  float *d32 = tk_zeros(k, 6 * 3 * sizeof(float));
  uint16_t *d16 = tk_zeros(k, 6 * 3 * sizeof(uint16_t));
  const sc_krows s = {src, SC_KFMT_F32, ld, rows};
  cr_assert_eq(k->ops->gather_rows(k, 6, width, s, idx, (sc_krows){d32, SC_KFMT_F32, 3, 6}), 0);
  cr_assert_eq(k->ops->gather_rows(k, 6, width, s, idx, (sc_krows){d16, SC_KFMT_BF16, 3, 6}), 0);
  float g32[18];
  uint16_t g16[18];
  tk_down(k, g32, d32, sizeof g32);
  tk_down(k, g16, d16, sizeof g16);
  for (int i = 0; i < 6; i++)
    for (int x = 0; x < 3; x++) {
      const float want = idx_h[i] < 0 ? 0.0f : src_h[idx_h[i] * ld + x];
      cr_assert_eq(g32[i * 3 + x], want);
      cr_assert_eq(g16[i * 3 + x], sc_f32_to_bf16(want));
    }
  /* bf16 -> f32 with identity index (a strided copy) */
  float *back = tk_zeros(k, 6 * 8 * sizeof(float));
  cr_assert_eq(k->ops->gather_rows(k, 6, 3, (sc_krows){d16, SC_KFMT_BF16, 3, 6}, NULL,
                                   (sc_krows){back, SC_KFMT_F32, 8, 6}),
               0);
  float bh[48];
  tk_down(k, bh, back, sizeof bh);
  for (int i = 0; i < 6; i++)
    for (int x = 0; x < 8; x++)
      cr_assert_eq(bh[i * 8 + x], x < 3 ? sc_bf16_to_f32(g16[i * 3 + x]) : 0.0f);
  /* out of range */
  int32_t *bad = tk_up(k, (int32_t[]){5}, sizeof(int32_t));
  cr_assert_eq(k->ops->gather_rows(k, 1, width, s, bad, (sc_krows){d32, SC_KFMT_F32, 3, 6}),
               SC_ERANGE);
  int32_t *neg = tk_up(k, (int32_t[]){-2}, sizeof(int32_t));
  cr_assert_eq(k->ops->gather_rows(k, 1, width, s, neg, (sc_krows){d32, SC_KFMT_F32, 3, 6}),
               SC_ERANGE);
  cr_assert_eq(k->ops->gather_rows(k, 7, width, s, NULL, (sc_krows){d32, SC_KFMT_F32, 3, 6}),
               SC_ERANGE, "dst too short");
  void *bufs[] = {src, idx, d32, d16, back, bad, neg};
  for (size_t i = 0; i < 7; i++) k->ops->free(k, bufs[i]);
  sc_kernels_destroy(k);
}

/* Row of a token: (region id, position, owner) in the first three columns. */
enum { WS_W = 3 };

static void check_deinterleave(int32_t pcp, int32_t dcp, int32_t tp, int32_t il,
                               uint64_t seed) {
  sc_kernels *k = tk_ctx(2);
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
  cfg.pcp = pcp;
  cfg.dcp = dcp;
  cfg.tp = tp;
  cfg.interleave = il;
  cfg.block_size = 8;
  cfg.max_gathered_rows = 160; /* small: several chunks */
  sc_diag d = {0};
  cr_assert_eq(sc_plan_config_validate(&cfg, &d), 0, "%s", sc_diag_message(&d));
  sc_batch_req reqs[7];
  for (int i = 0; i < 7; i++)
    reqs[i] = (sc_batch_req){.id = i, .computed = (int32_t)tk_int(&seed, 0, 40),
                             .scheduled = (int32_t)tk_int(&seed, 1, 30),
                             .prefill = i != 2};
  sc_plan plan;
  sc_plan_init(&plan);
  cr_assert_eq(sc_plan_build(&plan, &cfg, reqs, 7, &d), 0, "%s", sc_diag_message(&d));
  cr_assert_gt(plan.num_chunks, 1);
  for (int32_t c = 0; c < plan.num_chunks; c++) {
    const sc_plan_chunk *ch = &plan.chunks[c];
    const int32_t ss = ch->shard_rows_total;
    /* the all-gathered workspace: N shards, rank-major; padding rows hold -7 */
    float *ws = malloc(sizeof(float) * (size_t)(dcp * ss * WS_W));
    for (int64_t i = 0; i < (int64_t)dcp * ss * WS_W; i++) ws[i] = -7;
    for (int32_t g = ch->first_region; g < ch->first_region + ch->num_regions; g++) {
      const sc_plan_region *rg = &plan.regions[g];
      for (int32_t r = 0; r < dcp; r++)
        for (int64_t j = 0; j < sc_dcp_local_len(rg->extent, r, dcp, il); j++) {
          const int64_t p = (j / il) * dcp * il + (int64_t)r * il + j % il;
          float *row = ws + ((int64_t)r * ss + rg->ws_start + j) * WS_W;
          row[0] = (float)g;
          row[1] = (float)p;
          row[2] = (float)r;
        }
    }
    int32_t *di = malloc(sizeof(int32_t) * (size_t)ch->extent_total);
    sc_plan_fill_deinterleave(&plan, c, di);
    float *dws = tk_up(k, ws, sizeof(float) * (size_t)(dcp * ss * WS_W));
    int32_t *ddi = tk_up(k, di, sizeof(int32_t) * (size_t)ch->extent_total);
    float *ctx = tk_zeros(k, sizeof(float) * (size_t)ch->extent_total * WS_W);
    cr_assert_eq(k->ops->gather_rows(k, ch->extent_total, WS_W,
                                     (sc_krows){dws, SC_KFMT_F32, WS_W, (int64_t)dcp * ss}, ddi,
                                     (sc_krows){ctx, SC_KFMT_F32, WS_W, ch->extent_total}),
                 0);
    float *ch_h = malloc(sizeof(float) * (size_t)ch->extent_total * WS_W);
    tk_down(k, ch_h, ctx, sizeof(float) * (size_t)ch->extent_total * WS_W);
    /* round trip: token order, every region complete, owners as SPEC.md §4 says */
    for (int32_t g = ch->first_region; g < ch->first_region + ch->num_regions; g++) {
      const sc_plan_region *rg = &plan.regions[g];
      for (int32_t p = 0; p < rg->extent; p++) {
        const float *row = ch_h + (int64_t)(rg->cu_start + p) * WS_W;
        cr_assert(row[0] == (float)g && row[1] == (float)p &&
                      row[2] == (float)sc_dcp_owner(p, dcp, il),
                  "chunk %d region %d p %d: got (%g %g %g)", c, g, p, row[0], row[1], row[2]);
      }
    }
    /* top-K positions -> workspace rows (one query token per region), and the same with
     * n = 1 on the deinterleaved context */
    const int32_t nt = ch->num_regions, kk = 9;
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)(nt * kk));
    int32_t *base = malloc(sizeof(int32_t) * (size_t)nt), *cu = malloc(sizeof(int32_t) * (size_t)nt);
    for (int32_t t = 0; t < nt; t++) {
      const sc_plan_region *rg = &plan.regions[ch->first_region + t];
      base[t] = rg->ws_start;
      cu[t] = rg->cu_start;
      for (int32_t i = 0; i < kk; i++)
        pos[t * kk + i] = i == kk - 1 ? -1 : (int32_t)tk_int(&seed, 0, rg->extent - 1);
    }
    int32_t *dpos = tk_up(k, pos, sizeof(int32_t) * (size_t)(nt * kk));
    int32_t *dbase = tk_up(k, base, sizeof(int32_t) * (size_t)nt);
    int32_t *dcu = tk_up(k, cu, sizeof(int32_t) * (size_t)nt);
    int32_t *dout = tk_zeros(k, sizeof(int32_t) * (size_t)(nt * kk));
    int32_t *dout1 = tk_zeros(k, sizeof(int32_t) * (size_t)(nt * kk));
    cr_assert_eq(k->ops->topk_to_workspace(k, nt, kk, dpos, dbase, ss, dcp, il, dout), 0);
    cr_assert_eq(k->ops->topk_to_workspace(k, nt, kk, dpos, dcu, 0, 1, 1, dout1), 0);
    int32_t *out = malloc(sizeof(int32_t) * (size_t)(nt * kk));
    int32_t *out1 = malloc(sizeof(int32_t) * (size_t)(nt * kk));
    tk_down(k, out, dout, sizeof(int32_t) * (size_t)(nt * kk));
    tk_down(k, out1, dout1, sizeof(int32_t) * (size_t)(nt * kk));
    for (int32_t t = 0; t < nt; t++)
      for (int32_t i = 0; i < kk; i++) {
        const int32_t p = pos[t * kk + i];
        if (p < 0) {
          cr_assert(out[t * kk + i] == -1 && out1[t * kk + i] == -1);
          continue;
        }
        cr_assert_eq(out[t * kk + i], sc_plan_workspace_row(&plan, ch->first_region + t, p));
        cr_assert_eq(ws[(int64_t)out[t * kk + i] * WS_W + 1], (float)p);
        cr_assert_eq(out1[t * kk + i], di[cu[t] + p] == out[t * kk + i] ? cu[t] + p : -2);
      }
    free(ws);
    free(di);
    free(ch_h);
    free(pos);
    free(base);
    free(cu);
    free(out);
    free(out1);
    void *bufs[] = {dws, ddi, ctx, dpos, dbase, dcu, dout, dout1};
    for (size_t i = 0; i < 8; i++) k->ops->free(k, bufs[i]);
  }
  sc_plan_free(&plan);
  sc_kernels_destroy(k);
}

Test(kernels_rows, deinterleave_round_trip_p2_n2) { check_deinterleave(2, 2, 1, 1, 31); }
Test(kernels_rows, deinterleave_round_trip_p4_n4_i2) { check_deinterleave(4, 4, 1, 2, 32); }
Test(kernels_rows, deinterleave_round_trip_p1_n2_t2_i4) { check_deinterleave(1, 2, 2, 4, 33); }

/* KV write by slot mapping on every DCP rank, then read back through topk_to_slots:
 * each token is stored exactly once, on its owner, and comes back unchanged (rounded to
 * bf16 where the cache is bf16). The slot mapping is built here by counting (the k-th
 * owned token of a virtual block goes to the k-th row of its physical block), which is
 * independent of the closed form the kernel uses. */
static void check_kv_dcp(int32_t n, int32_t il, sc_kfmt fmt, uint64_t seed) {
  sc_kernels *k = tk_ctx(2);
  enum { R = 3, NB = 64, B = 8, W = 20, LD = 24 };
  int32_t ext[R], max_blocks = 0;
  int32_t tok0[R + 1] = {0};
  for (int r = 0; r < R; r++) {
    ext[r] = (int32_t)tk_int(&seed, 1, 90);
    tok0[r + 1] = tok0[r] + ext[r];
    const int32_t vb = (ext[r] + B * n - 1) / (B * n);
    max_blocks = vb > max_blocks ? vb : max_blocks;
  }
  const int32_t ntok = tok0[R];
  int32_t pool[NB];
  for (int i = 0; i < NB; i++) pool[i] = i;
  tk_shuffle_i32(&seed, pool, NB);
  int32_t *bt = malloc(sizeof(int32_t) * (size_t)(R * max_blocks));
  int used = 0;
  for (int r = 0; r < R; r++)
    for (int32_t v = 0; v < max_blocks; v++)
      bt[r * max_blocks + v] = v * B * n < ext[r] ? pool[used++] : -1;
  cr_assert_leq(used, NB);
  float *src = tk_rand_f32(&seed, (size_t)ntok * W, -3, 3);
  float *dsrc = tk_up(k, src, sizeof(float) * (size_t)ntok * W);
  int32_t *dbt = tk_up(k, bt, sizeof(int32_t) * (size_t)(R * max_blocks));
  const size_t esz = sc_kfmt_size(fmt);
  int32_t *seen = calloc((size_t)ntok, sizeof(int32_t));
  for (int32_t rank = 0; rank < n; rank++) {
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)ntok);
    for (int r = 0; r < R; r++) {
      int32_t count = 0;
      for (int32_t v = 0; v * B * n < ext[r]; v++) {
        int32_t kth = 0;
        for (int32_t p = v * B * n; p < (v + 1) * B * n && p < ext[r]; p++)
          slots[tok0[r] + p] =
              sc_dcp_owner(p, n, il) == rank ? bt[r * max_blocks + v] * B + kth++ : -1;
        cr_assert_leq(kth, B);
        count += kth;
      }
      cr_assert_eq(count, sc_dcp_local_len(ext[r], rank, n, il));
    }
    int32_t *dslots = tk_up(k, slots, sizeof(int32_t) * (size_t)ntok);
    void *cache = tk_zeros(k, esz * NB * B * LD);
    const sc_krows cr = {cache, fmt, LD, NB * B};
    cr_assert_eq(k->ops->kv_write(k, ntok, W, dsrc, W, dslots, cr), 0);

    /* read: one query row per request, K = its whole extent */
    int32_t kk = 0;
    for (int r = 0; r < R; r++) kk = ext[r] > kk ? ext[r] : kk;
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)(R * kk)), req[R];
    for (int r = 0; r < R; r++) {
      req[r] = r;
      for (int32_t i = 0; i < kk; i++) pos[r * kk + i] = i < ext[r] ? i : -1;
    }
    int32_t *dpos = tk_up(k, pos, sizeof(int32_t) * (size_t)(R * kk));
    int32_t *dreq = tk_up(k, req, sizeof req);
    cr_assert_eq(k->ops->topk_to_slots(k, R, kk, dpos, dreq, dbt, max_blocks, B, n, il, rank,
                                       dpos),
                 0, "in place");
    float *rows = tk_zeros(k, sizeof(float) * (size_t)(R * kk) * W);
    cr_assert_eq(k->ops->gather_rows(k, R * kk, W, cr, dpos,
                                     (sc_krows){rows, SC_KFMT_F32, W, R * kk}),
                 0);
    int32_t *got_slots = malloc(sizeof(int32_t) * (size_t)(R * kk));
    float *got = malloc(sizeof(float) * (size_t)(R * kk) * W);
    tk_down(k, got_slots, dpos, sizeof(int32_t) * (size_t)(R * kk));
    tk_down(k, got, rows, sizeof(float) * (size_t)(R * kk) * W);
    for (int r = 0; r < R; r++)
      for (int32_t p = 0; p < ext[r]; p++) {
        const int32_t s = got_slots[r * kk + p];
        cr_assert_eq(s, slots[tok0[r] + p], "rank %d req %d p %d", rank, r, p);
        if (s < 0) continue;
        seen[tok0[r] + p]++;
        for (int x = 0; x < W; x++) {
          const float v = src[(int64_t)(tok0[r] + p) * W + x];
          const float want = fmt == SC_KFMT_BF16 ? sc_bf16_to_f32(sc_f32_to_bf16(v)) : v;
          cr_assert_eq(got[((int64_t)r * kk + p) * W + x], want);
        }
      }
    /* a position past the block table is an error, not a wild read */
    int32_t *far = tk_up(k, (int32_t[]){max_blocks * B * n + rank * il}, sizeof(int32_t));
    cr_assert_eq(k->ops->topk_to_slots(k, 1, 1, far, dreq, dbt, max_blocks, B, n, il, rank,
                                       far),
                 SC_ERANGE);
    free(slots);
    free(pos);
    free(got_slots);
    free(got);
    void *bufs[] = {dslots, cache, dpos, dreq, rows, far};
    for (size_t i = 0; i < 6; i++) k->ops->free(k, bufs[i]);
  }
  for (int32_t t = 0; t < ntok; t++) cr_assert_eq(seen[t], 1, "token %d stored %d times", t, seen[t]);
  free(seen);
  free(src);
  free(bt);
  k->ops->free(k, dsrc);
  k->ops->free(k, dbt);
  sc_kernels_destroy(k);
}

Test(kernels_rows, kv_write_read_dcp_n2_i1_f32) { check_kv_dcp(2, 1, SC_KFMT_F32, 41); }
Test(kernels_rows, kv_write_read_dcp_n4_i2_bf16) { check_kv_dcp(4, 2, SC_KFMT_BF16, 42); }
Test(kernels_rows, kv_write_read_dcp_n3_i8_f32) { check_kv_dcp(3, 8, SC_KFMT_F32, 43); }
Test(kernels_rows, kv_write_read_single_rank_bf16) { check_kv_dcp(1, 1, SC_KFMT_BF16, 44); }

/* The cache key list from its ranges (cache_keys): entry j of a range is the rank's j-th
 * owned position and its slot (tests/unit/test_metadata.c checks the same on the lists
 * of random plans); ranges that do not tile the list and missing blocks are SC_ERANGE,
 * keys without a range SC_EINVAL. */
Test(kernels_rows, cache_keys_from_ranges) {
  sc_kernels *k = tk_ctx(1);
  enum { MAXB = 4 };
  const int32_t n = 2, il = 2, bs = 4, rank = 1;
  /* request 1 holds 5 local indices, request 0 none, request 2 three */
  int32_t req[3] = {1, 0, 2}, begin[3] = {0, 5, 5}, end[3] = {5, 5, 8};
  int32_t bt[3 * MAXB] = {-1, -1, -1, -1, 7, 3, -1, -1, 0, -1, -1, -1};
  int32_t pos[8], slot[8];
  cr_assert_eq(k->ops->cache_keys(k, 3, 8, req, begin, end, bt, MAXB, bs, n, il, rank, pos, slot), 0);
  /* rank 1 owns positions 2, 3, 6, 7, 10, ... (runs of il = 2 out of every n * il = 4) */
  const int32_t want_pos[8] = {2, 3, 6, 7, 10, 2, 3, 6};
  const int32_t want_slot[8] = {28, 29, 30, 31, 12, 0, 1, 2}; /* bt[j / 4] * 4 + j % 4 */
  for (int e = 0; e < 8; e++) {
    cr_assert_eq(pos[e], want_pos[e], "entry %d: position %d", e, pos[e]);
    cr_assert_eq(slot[e], want_slot[e], "entry %d: slot %d", e, slot[e]);
    const int r = e < 5 ? 0 : 2, j = e - begin[r];
    cr_assert_eq(slot[e], sc_kv_slot(bt + req[r] * MAXB, MAXB, pos[e], bs, n, il, rank));
    cr_assert_eq(sc_dcp_local_index(pos[e], n, il), j);
  }
  int32_t gap_begin[3] = {0, 6, 6}; /* entry 5 in no range */
  cr_assert_eq(k->ops->cache_keys(k, 3, 8, req, gap_begin, end, bt, MAXB, bs, n, il, rank, pos, slot),
               SC_ERANGE);
  int32_t short_end[3] = {5, 5, 7}; /* the last range ends before n_keys */
  cr_assert_eq(k->ops->cache_keys(k, 3, 8, req, begin, short_end, bt, MAXB, bs, n, il, rank, pos, slot),
               SC_ERANGE);
  bt[1 * MAXB + 1] = -1; /* request 1's local indices 4.. have no block */
  cr_assert_eq(k->ops->cache_keys(k, 3, 8, req, begin, end, bt, MAXB, bs, n, il, rank, pos, slot),
               SC_ERANGE);
  cr_assert_eq(k->ops->cache_keys(k, 0, 8, req, begin, end, bt, MAXB, bs, n, il, rank, pos, slot),
               SC_EINVAL);
  sc_kernels_destroy(k);
}

/* test_metadata.c - per-rank step inputs: the SPEC.md §3/§5 worked example, and
 * properties over random batches for every layout (each rank writes exactly the
 * positions of the step it owns, once, into distinct slots; cache key lists hold exactly
 * the owned context; shard sources fill the shard with the owned rows in order). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/model_defaults.h"
#include "plan/dcp.h"
#include "plan/metadata.h"

static sc_plan_config layout(int P, int N, int T, int I, int B) {
  sc_plan_config c;
  sc_model_plan_config_default(&c);
  c.pcp = P, c.dcp = N, c.tp = T, c.interleave = I, c.block_size = B;
  cr_assert_eq(sc_plan_config_validate(&c, NULL), 0);
  return c;
}

/* Block tables: request i gets blocks 16*i, 16*i+1, ... (distinct across requests). */
static int32_t *tables(const sc_plan *p, int32_t max_blocks) {
  int32_t *t = malloc(sizeof(int32_t) * (size_t)p->num_reqs * (size_t)max_blocks);
  for (int32_t i = 0; i < p->num_reqs; i++)
    for (int32_t v = 0; v < max_blocks; v++) t[i * max_blocks + v] = 16 * i + (v * 7) % 16;
  return t;
}

Test(metadata, spec_worked_example) {
  const sc_plan_config c = layout(2, 2, 1, 1, 4);
  const sc_batch_req reqs[2] = {{.computed = 0, .scheduled = 11, .prefill = true},
                                {.computed = 6, .scheduled = 8, .prefill = true}};
  sc_plan p;
  sc_plan_init(&p);
  cr_assert_eq(sc_plan_build(&p, &c, reqs, 2, NULL), 0);
  int32_t *bt = tables(&p, 16);
  const sc_meta_blocks mb = {.table = bt, .max_blocks = 16, .num_blocks = 64};
  sc_meta m0, m1;
  sc_diag d = {0};
  cr_assert_eq(sc_meta_build(&p, 0, &mb, &m0, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_meta_build(&p, 1, &mb, &m1, &d), 0, "%s", d.msg);

  const int32_t g0[10] = {0, 1, 2, 9, 10, 11, 12, 17, 18, -1};
  const int32_t pos0[10] = {0, 1, 2, 9, 10, 6, 7, 12, 13, 0};
  const int32_t g1[10] = {3, 4, 5, 6, 7, 8, 13, 14, 15, 16};
  cr_assert_eq(m0.t_pad, 10);
  cr_assert_eq(m0.num_tokens, 9);
  cr_assert_eq(m1.num_tokens, 10);
  cr_assert_eq(memcmp(m0.tok_global, g0, sizeof g0), 0);
  cr_assert_eq(memcmp(m0.tok_pos, pos0, sizeof pos0), 0);
  cr_assert_eq(memcmp(m1.tok_global, g1, sizeof g1), 0);
  const int32_t restore[19] = {0, 1, 2, 10, 11, 12, 13, 14, 15, 3, 4, 5, 6, 16, 17, 18, 19, 7, 8};
  cr_assert_eq(memcmp(m0.hidden_restore, restore, sizeof restore), 0);
  cr_assert_eq(m0.last_token[0], 10);
  cr_assert_eq(m0.last_token[1], 18);

  /* one context chunk: S = (6, 7), ws = (0, 6), ΣS = 13 */
  cr_assert_eq(m0.num_chunks, 1);
  const int32_t deint[25] = {0, 13, 1, 14, 2, 15, 3, 16, 4, 17, 5, 6, 19, 7, 20, 8, 21, 9, 22,
                             10, 23, 11, 24, 12, 25};
  cr_assert_eq(m0.chunks[0].shard_rows_total, 13);
  cr_assert_eq(memcmp(m0.chunks[0].deinterleave, deint, sizeof deint), 0);
  /* rank 1 holds 5 rows of A (positions 1, 3, ..., 9) and 7 of B: one padding row */
  cr_assert_eq(m1.chunks[0].shard_src[5], -1);
  cr_assert_neq(m0.chunks[0].shard_src[5], -1);
  for (int32_t j = 0; j < 5; j++)
    cr_assert_eq(m1.chunks[0].shard_src[j], sc_kv_slot(bt, 16, 2 * j + 1, 4, 2, 1, 1));
  for (int32_t j = 0; j < 7; j++)
    cr_assert_eq(m0.chunks[0].shard_src[6 + j], sc_kv_slot(bt + 16, 16, 2 * j, 4, 2, 1, 0));
  /* token B@9: owner 1, j = 4, row 13 + 6 + 4 = 23 */
  int32_t pos[3] = {9, -1, 0}, rows[3];
  sc_meta_topk_to_workspace(&p, 1, pos, 3, rows);
  cr_assert_eq(rows[0], 23);
  cr_assert_eq(rows[1], -1);
  cr_assert_eq(rows[2], 6);
  /* workspace path rows: all of them (N > 1, no decode) */
  cr_assert_eq(m0.cache_tok_end, 0);
  cr_assert_eq(m0.chunks[0].tok_begin, 0);
  cr_assert_eq(m0.chunks[0].tok_end, 9);
  cr_assert_eq(m0.tok_ws_base[5], 6);
  cr_assert_eq(m0.tok_key_begin[5], 11);
  cr_assert_eq(m0.tok_key_end[5], 18); /* B@6 sees B's positions 0..6 of 0..13 */
  cr_assert_eq(m0.tok_key_end[8], 25); /* B@13 sees them all */
  cr_assert_eq(m0.tok_key_end[3], 10); /* A@9 sees A's 0..9 of 0..10 */
  /* DCP local lengths (request-major): A 6/5, B 7/7 */
  const int32_t lens[4] = {6, 5, 7, 7};
  int32_t got_lens[4];
  sc_plan_fill_dcp_local_lens(&p, got_lens);
  cr_assert_eq(memcmp(got_lens, lens, sizeof lens), 0);
  sc_meta_free(&m0);
  sc_meta_free(&m1);
  free(bt);
  sc_plan_free(&p);
}

Test(metadata, missing_block_is_an_error) {
  const sc_plan_config c = layout(1, 2, 2, 1, 4);
  const sc_batch_req reqs[1] = {{.computed = 0, .scheduled = 20, .prefill = true}};
  sc_plan p;
  sc_plan_init(&p);
  cr_assert_eq(sc_plan_build(&p, &c, reqs, 1, NULL), 0);
  int32_t bt[3] = {0, 1, -1}; /* 20 tokens need 3 virtual blocks of 8 */
  const sc_meta_blocks mb = {.table = bt, .max_blocks = 3, .num_blocks = 4};
  sc_meta m;
  sc_diag d = {0};
  cr_assert_eq(sc_meta_build(&p, 0, &mb, &m, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "virtual block 2 is -1"), "%s", d.msg);
  const sc_meta_blocks narrow = {.table = bt, .max_blocks = 2, .num_blocks = 4};
  cr_assert_eq(sc_meta_build(&p, 0, &narrow, &m, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "needs 3 virtual blocks"), "%s", d.msg);
  bt[2] = 4;
  cr_assert_eq(sc_meta_build(&p, 0, &mb, &m, &d), SC_EINVAL);
  bt[2] = 3;
  cr_assert_eq(sc_meta_build(&p, 0, &mb, &m, &d), 0, "%s", d.msg);
  sc_meta_free(&m);
  sc_plan_free(&p);
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng % n);
}

/* Checks one rank's metadata against first principles. */
static void check_rank(const sc_plan *p, const sc_meta_blocks *mb, int32_t g) {
  const sc_plan_config *c = &p->cfg;
  sc_meta m;
  sc_diag d = {0};
  cr_assert_eq(sc_meta_build(p, g, mb, &m, &d), 0, "%s", d.msg);
  const int32_t me = m.coords.dcp_rank, N = c->dcp, I = c->interleave, B = c->block_size;
  /* positions written this step: exactly the owned ones of [c_i, E_i), once each */
  const int64_t slots = sc_plan_gather_slots(p);
  int32_t *gather = malloc(sizeof(int32_t) * (size_t)(slots + 1));
  uint8_t *mask = malloc((size_t)slots + 1);
  sc_plan_fill_gather(p, gather, NULL, mask);
  uint8_t *written = calloc((size_t)mb->num_blocks * B, 1);
  int32_t nwritten = 0, nexpected = 0;
  for (int32_t k = 0; k < m.num_decode + m.num_prefill_src; k++) {
    const bool dec = k < m.num_decode;
    const int32_t s = dec ? m.decode_slots[k] : m.prefill_slots[k - m.num_decode];
    int32_t req, pos;
    if (dec) {
      req = m.tok_req[k], pos = m.tok_pos[k];
    } else {
      const int32_t i = k - m.num_decode, r = i / m.prefill_rows;
      const int32_t slot = r * m.t_pad + m.num_decode + i % m.prefill_rows;
      if (!mask[slot]) {
        cr_assert_eq(s, -1);
        continue;
      }
      const int32_t t = gather[slot];
      for (req = 0; !(t >= p->reqs[req].start && t < p->reqs[req].start + p->reqs[req].q); req++) {
      }
      pos = p->reqs[req].extent - p->reqs[req].q + (t - p->reqs[req].start);
    }
    const int64_t want = sc_kv_slot(mb->table + req * mb->max_blocks, mb->max_blocks, pos, B, N,
                                    I, me);
    cr_assert_eq(s, want, "rank %d row %d (req %d pos %d): slot %d, want %lld", g, k, req, pos, s,
                 (long long)want);
    if (s < 0) continue;
    cr_assert_eq(written[s], 0, "rank %d writes slot %d twice", g, s);
    written[s] = 1;
    nwritten++;
  }
  for (int32_t i = 0; i < p->num_reqs; i++)
    for (int32_t q = 0; q < p->reqs[i].q; q++)
      nexpected += sc_dcp_owner(p->reqs[i].extent - p->reqs[i].q + q, N, I) == me;
  cr_assert_eq(nwritten, nexpected, "rank %d writes %d positions, owns %d", g, nwritten, nexpected);

  /* cache key lists: the owned positions of [0, E) with their slots, ascending, as the
   * kernels' cache_keys op fills them from the ranges (CPU backend) */
  cr_assert_leq(m.num_key_ranges, p->num_reqs);
  for (int32_t r = 0; r < m.num_key_ranges; r++)
    cr_assert_eq(m.key_range_begin[r], r == 0 ? 0 : m.key_range_end[r - 1], "ranges tile the list");
  cr_assert_eq(m.num_key_ranges ? m.key_range_end[m.num_key_ranges - 1] : 0, m.num_keys);
  int32_t *key_pos = malloc(sizeof(int32_t) * ((size_t)m.num_keys + 1));
  int32_t *key_slots = malloc(sizeof(int32_t) * ((size_t)m.num_keys + 1));
  sc_kernels *kc = NULL;
  cr_assert_eq(sc_kernels_cpu_create(&kc, 1), 0);
  const int crc = kc->ops->cache_keys(kc, m.num_key_ranges, m.num_keys, m.key_range_req,
                                      m.key_range_begin, m.key_range_end, mb->table,
                                      mb->max_blocks, B, N, I, me, key_pos, key_slots);
  cr_assert_eq(crc, 0, "cache_keys: %d", crc);
  sc_kernels_destroy(kc);
  for (int32_t k = 0; k < m.cache_tok_end; k++) {
    const int32_t req = m.tok_req[k];
    const int32_t b = m.tok_key_begin[k], e = m.tok_key_end[k];
    /* the request's keys up to the token's own position (the later ones are masked) */
    cr_assert_eq(e - b, sc_dcp_local_len((int64_t)m.tok_pos[k] + 1, me, N, I));
    const int32_t req_end = b + (int32_t)sc_dcp_local_len(p->reqs[req].extent, me, N, I);
    for (int32_t x = b; x < req_end; x++)
      cr_assert_eq(x < e, key_pos[x] <= m.tok_pos[k], "entry %d of token %d", x, k);
    int32_t prev = -1;
    for (int32_t x = b; x < e; x++) {
      const int32_t ps = key_pos[x];
      cr_assert_gt(ps, prev);
      prev = ps;
      cr_assert_eq(sc_dcp_owner(ps, N, I), me);
      cr_assert_eq(key_slots[x],
                   sc_kv_slot(mb->table + req * mb->max_blocks, mb->max_blocks, ps, B, N, I, me));
    }
  }
  free(key_pos);
  free(key_slots);
  /* workspace rows: shard rows are this rank's owned positions in order, then padding */
  for (int32_t ci = 0; ci < m.num_chunks; ci++) {
    const sc_plan_chunk *pc = &p->chunks[ci];
    for (int32_t gi = pc->first_region; gi < pc->first_region + pc->num_regions; gi++) {
      const sc_plan_region *rg = &p->regions[gi];
      const int32_t *row = mb->table + rg->req * mb->max_blocks;
      int32_t j = 0;
      for (int32_t ps = 0; ps < rg->extent; ps++) {
        if (sc_dcp_owner(ps, N, I) != me) continue;
        cr_assert_eq(m.chunks[ci].shard_src[rg->ws_start + j],
                     sc_kv_slot(row, mb->max_blocks, ps, B, N, I, me));
        cr_assert_eq(m.chunks[ci].key_pos[rg->cu_start + ps], ps);
        j++;
      }
      for (; j < rg->shard_rows; j++) cr_assert_eq(m.chunks[ci].shard_src[rg->ws_start + j], -1);
    }
    for (int32_t k = m.chunks[ci].tok_begin; k < m.chunks[ci].tok_end; k++)
      cr_assert_eq(p->regions[p->reqs[m.tok_req[k]].region].chunk, ci);
  }
  /* every workspace row lies in its chunk's row range */
  for (int32_t k = m.cache_tok_end; k < m.num_tokens; k++) {
    const sc_meta_chunk *mc = &m.chunks[p->regions[p->reqs[m.tok_req[k]].region].chunk];
    cr_assert(k >= mc->tok_begin && k < mc->tok_end, "rank %d row %d outside its chunk", g, k);
  }
  free(gather);
  free(mask);
  free(written);
  sc_meta_free(&m);
}

Test(metadata, properties_over_random_batches) {
  const int layouts[][3] = {{1, 1, 1}, {1, 2, 2}, {1, 1, 2}, {2, 1, 1}, {2, 2, 1},
                            {2, 2, 2}, {4, 1, 2}, {4, 4, 1}, {4, 4, 2}, {1, 4, 4}};
  int checked = 0;
  for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
    for (int I = 1; I <= 2; I++)
      for (int iter = 0; iter < 40; iter++) {
        sc_plan_config c = layout(layouts[l][0], layouts[l][1], layouts[l][2], I, 4);
        c.max_gathered_rows = 16 + rnd(64);
        sc_batch_req reqs[6];
        const int32_t n = 1 + (int32_t)rnd(6);
        for (int32_t i = 0; i < n; i++) {
          const bool pre = rnd(2);
          reqs[i] = (sc_batch_req){.id = i, .computed = (int32_t)rnd(30),
                                   .scheduled = pre ? (int32_t)rnd(20) : 1, .prefill = pre};
          if (reqs[i].computed + reqs[i].scheduled == 0) reqs[i].scheduled = 1;
        }
        sc_plan p;
        sc_plan_init(&p);
        if (sc_plan_build(&p, &c, reqs, n, NULL) != 0) { /* e.g. a region over M/N */
          sc_plan_free(&p);
          continue;
        }
        int32_t *bt = tables(&p, 16);
        const sc_meta_blocks mb = {.table = bt, .max_blocks = 16, .num_blocks = 16 * n};
        for (int32_t g = 0; g < sc_plan_world_size(&c); g++) check_rank(&p, &mb, g);
        checked++;
        free(bt);
        sc_plan_free(&p);
      }
  cr_assert_gt(checked, 500);
}

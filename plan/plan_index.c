/* plan_index.c - per-token index arrays derived from the compact plan (SPEC.md §3-5),
 * the collective fingerprint, and per-rank views. Nothing here allocates. */
#include <string.h>

#include "plan/dcp.h"
#include "plan/plan.h"

/* Writes one row of `len` tokens starting at global token `base` into slot `slot`. */
static inline void put_row(int32_t *gather, int32_t *restore, uint8_t *mask, int32_t slot,
                           int32_t base, int32_t len, bool owner) {
  if (len == 1) { /* decode rows: skip the loop and memset call overhead */
    if (gather) gather[slot] = base;
    if (owner && restore) restore[base] = slot;
    if (mask) mask[slot] = owner;
    return;
  }
  if (gather)
    for (int32_t t = 0; t < len; t++) gather[slot + t] = base + t;
  if (owner) {
    if (restore)
      for (int32_t t = 0; t < len; t++) restore[base + t] = slot + t;
    if (mask) memset(mask + slot, 1, (size_t)len);
  } else if (mask) {
    memset(mask + slot, 0, (size_t)len);
  }
}

void sc_plan_fill_gather(const sc_plan *plan, int32_t *gather, int32_t *restore,
                         uint8_t *mask) {
  const int32_t P = plan->cfg.pcp, C = 2 * P, t_pad = plan->t_pad;
  for (int32_t r = 0; r < P; r++) {
    int32_t slot = r * t_pad;
    /* The row walk of sc_plan_req_rows, inlined: this loop runs once per row and rank,
     * and decode-heavy steps have one-token rows, so call overhead would dominate. */
    for (int32_t k = 0; k < plan->num_ordered; k++) {
      const sc_plan_req *q = &plan->reqs[plan->order[k]];
      if (!(q->flags & SC_REQ_SPLIT)) {
        /* Replicated: rank 0 holds the owner copy. */
        put_row(gather, restore, mask, slot, q->start, q->q, r == 0);
        slot += q->q;
        continue;
      }
      const int32_t ks[2] = {r, C - 1 - r};
      for (int i = 0; i < 2; i++) {
        const int64_t lo = (int64_t)ks[i] * q->cs;
        if (lo >= q->q) continue; /* empty chunk, only without DCP */
        const int32_t len = (int32_t)(lo + q->cs <= q->q ? q->cs : q->q - lo);
        put_row(gather, restore, mask, slot, q->start + (int32_t)lo, len, true);
        slot += len;
      }
    }
    const int32_t pad = (r + 1) * t_pad - slot;
    if (gather) memset(gather + slot, 0, (size_t)pad * sizeof *gather);
    if (mask) memset(mask + slot, 0, (size_t)pad);
  }
}

void sc_plan_fill_deinterleave(const sc_plan *plan, int32_t chunk, int32_t *out) {
  const sc_plan_chunk *c = &plan->chunks[chunk];
  const int32_t N = plan->cfg.dcp, I = plan->cfg.interleave, S = c->shard_rows_total;
  const int32_t span = N * I;
  for (int32_t gi = c->first_region; gi < c->first_region + c->num_regions; gi++) {
    const sc_plan_region *g = &plan->regions[gi];
    int32_t *o = out + g->cu_start;
    /* Whole ownership rounds of N*I positions without a division per entry: round b,
     * rank r, offset i maps to row r*S + ws + b*I + i. */
    const int32_t rounds = g->extent / span;
    for (int32_t b = 0; b < rounds; b++)
      for (int32_t r = 0; r < N; r++) {
        const int32_t row0 = r * S + g->ws_start + b * I;
        for (int32_t i = 0; i < I; i++) *o++ = row0 + i;
      }
    for (int32_t p = rounds * span; p < g->extent; p++)
      *o++ = sc_dcp_owner(p, N, I) * S + g->ws_start + (int32_t)sc_dcp_local_index(p, N, I);
  }
}

void sc_plan_fill_dcp_local_lens(const sc_plan *plan, int32_t *out) {
  const int32_t N = plan->cfg.dcp, I = plan->cfg.interleave, span = N * I;
  for (int32_t i = 0; i < plan->num_reqs; i++) {
    /* local_len(L, r) = full rounds * I + clamp(rem - r*I, 0, I), with the division
     * done once per request rather than once per (request, rank). */
    const int32_t extent = plan->reqs[i].extent;
    const int32_t base = extent / span * I, rem = extent % span;
    int32_t *o = out + (size_t)i * N;
    for (int32_t r = 0; r < N; r++) {
      const int32_t extra = rem - r * I;
      o[r] = base + (extra < 0 ? 0 : extra > I ? I : extra);
    }
  }
}

/* FNV-1a over 64-bit words (one multiply per word rather than per byte), then a final
 * avalanche so that nearby plans give unrelated fingerprints. */
#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull
static inline uint64_t mix(uint64_t h, uint64_t w) { return (h ^ w) * FNV_PRIME; }

uint64_t sc_coll_fingerprint(const sc_coll *colls, int32_t n) {
  uint64_t h = mix(FNV_OFFSET, (uint64_t)n);
  for (int32_t i = 0; i < n; i++) {
    const sc_coll *c = &colls[i];
    h = mix(h, (uint64_t)(uint32_t)c->seq << 32 | (uint32_t)c->layer);
    h = mix(h, (uint64_t)c->group | (uint64_t)c->op << 8 | (uint64_t)c->dtype << 16 |
                   (uint64_t)c->purpose << 24 | (uint64_t)(uint32_t)c->chunk << 32);
    h = mix(h, (uint64_t)c->rows);
    h = mix(h, (uint64_t)c->width);
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

bool sc_coll_matches(const sc_coll *p, const sc_coll *q) {
  return p->layer == q->layer && p->group == q->group && p->op == q->op &&
         p->dtype == q->dtype && p->purpose == q->purpose && p->rows == q->rows &&
         p->width == q->width;
}

void sc_plan_rank_view(const sc_plan *plan, int32_t global_rank, sc_rank_view *v) {
  memset(v, 0, sizeof *v);
  v->coords = sc_plan_rank_coords(&plan->cfg, global_rank);
  const int32_t r = v->coords.pcp_rank;
  for (int32_t k = 0; k < plan->num_ordered; k++) {
    sc_plan_row rows[2];
    v->num_rows += sc_plan_req_rows(plan, plan->order[k], r, rows);
  }
  v->num_tokens = plan->rank_tokens[r];
  v->num_prefill_tokens = v->num_tokens - plan->num_decode_tokens;
}

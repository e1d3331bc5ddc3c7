/* plan_index.c - per-token index arrays derived from the compact plan (SPEC.md §3-5),
 * the collective fingerprint, and per-rank views. Nothing here allocates. */
#include <string.h>

#include "actors/partitioner/dcp.h"
#include "actors/partitioner/plan.h"

void sc_plan_fill_gather(const sc_plan *plan, int32_t *gather, int32_t *restore,
                         uint8_t *mask) {
  const int32_t P = plan->cfg.pcp, t_pad = plan->t_pad;
  const size_t slots = (size_t)P * (size_t)t_pad;
  if (gather) memset(gather, 0, slots * sizeof *gather);
  if (mask) memset(mask, 0, slots);
  for (int32_t r = 0; r < P; r++) {
    int32_t slot = r * t_pad;
    for (int32_t k = 0; k < plan->num_ordered; k++) {
      const int32_t req = plan->order[k];
      sc_plan_row rows[2];
      const int nrows = sc_plan_req_rows(plan, req, r, rows);
      for (int i = 0; i < nrows; i++) {
        const int32_t base = plan->reqs[req].start + rows[i].offset;
        const int32_t len = rows[i].len;
        /* The owner copy: the unique copy of a split row, rank 0's of a replicated one. */
        const bool owner = rows[i].split || r == 0;
        if (gather)
          for (int32_t t = 0; t < len; t++) gather[slot + t] = base + t;
        if (owner) {
          if (restore)
            for (int32_t t = 0; t < len; t++) restore[base + t] = slot + t;
          if (mask) memset(mask + slot, 1, (size_t)len);
        }
        slot += len;
      }
    }
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
  const int32_t N = plan->cfg.dcp, I = plan->cfg.interleave;
  for (int32_t i = 0; i < plan->num_reqs; i++)
    for (int32_t r = 0; r < N; r++)
      out[(size_t)i * N + r] = (int32_t)sc_dcp_local_len(plan->reqs[i].extent, r, N, I);
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

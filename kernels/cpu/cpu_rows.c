/* cpu_rows.c - row movement: gather (with format conversion; fp8 rows copied), KV write by
 * slot mapping (fp8_index keys and fp8_ds_mla rows quantized), and the maps from top-K
 * positions to workspace rows and to local KV cache slots.
 * Every index is checked against its row set (SC_ERANGE), because on the CPU an
 * out-of-range index would silently corrupt memory. */
#include <math.h>
#include <string.h>

#include "base/tempered_draw.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/fp8_e4m3.h"
#include "plan/dcp.h"

/* dst[0..width) = src row in src_fmt, converted to dst_fmt (an fp8 row, fp8_index or
 * fp8_ds_mla, is copied as it is, or quantized into from f32 by kv_write; the checks
 * leave no other conversion into them). */
static void convert_row(const void *src, sc_kfmt sf, void *dst, sc_kfmt df, int64_t width) {
  if (sf == df) {
    memcpy(dst, src, (size_t)sc_kfmt_row_bytes(sf, width));
  } else if (df == SC_KFMT_FP8_INDEX) {
    sc_kfp8_index_quantize(src, (int32_t)width, dst);
  } else if (df == SC_KFMT_FP8_DS_MLA) {
    sc_kfp8_ds_mla_quantize(src, dst);
  } else if (df == SC_KFMT_F32) {
    sc_kcpu_row_to_f32(src, sf, width, dst);
  } else { /* bf16 from f32, or from fp8_ds_mla's values (576) */
    float deq[SC_KFP8_DS_MLA_NOPE + SC_KFP8_DS_MLA_ROPE];
    const float *s = src;
    if (sf == SC_KFMT_FP8_DS_MLA) {
      sc_kfp8_ds_mla_dequantize(src, deq);
      s = deq;
    }
    uint16_t *d = dst;
    for (int64_t i = 0; i < width; i++) d[i] = sc_f32_to_bf16(s[i]);
  }
}

typedef struct {
  int64_t width;
  sc_krows src, dst;
  const int32_t *idx;
} gather_job;

static int gather_part(void *p, int64_t b, int64_t e, int worker) {
  (void)worker;
  const gather_job *j = p;
  for (int64_t i = b; i < e; i++) {
    void *d = (char *)j->dst.data + i * sc_krows_stride(&j->dst);
    const int64_t r = j->idx ? j->idx[i] : i;
    if (r == -1) {
      memset(d, 0, (size_t)sc_kfmt_row_bytes(j->dst.fmt, j->width));
      continue;
    }
    if (r < 0 || r >= j->src.rows) return SC_ERANGE;
    convert_row(sc_kcpu_row(&j->src, r), j->src.fmt, d, j->dst.fmt, j->width);
  }
  return 0;
}

int sc_kcpu_gather_rows(sc_kernels *k, int64_t n, int64_t width, sc_krows src,
                        const int32_t *idx, sc_krows dst) {
  SC_KCHECK(sc_kcheck_gather_rows(n, width, &src, &dst));
  gather_job j = {width, src, dst, idx};
  return sc_kcpu_parallel(sc_kcpu_of(k), n, 256, gather_part, &j);
}

typedef struct {
  int64_t width;
  const float *src;
  int64_t ld_src;
  const int32_t *slots;
  sc_krows cache;
} kvw_job;

static int kvw_part(void *p, int64_t b, int64_t e, int worker) {
  (void)worker;
  const kvw_job *j = p;
  for (int64_t i = b; i < e; i++) {
    const int64_t s = j->slots[i];
    if (s == -1) continue;
    if (s < 0 || s >= j->cache.rows) return SC_ERANGE;
    convert_row(j->src + i * j->ld_src, SC_KFMT_F32,
                (char *)j->cache.data + s * sc_krows_stride(&j->cache), j->cache.fmt,
                j->width);
  }
  return 0;
}

int sc_kcpu_kv_write(sc_kernels *k, int64_t n, int64_t width, const float *src,
                     int64_t ld_src, const int32_t *slots, sc_krows cache) {
  SC_KCHECK(sc_kcheck_kv_write(n, width, src, ld_src, slots, &cache));
  kvw_job j = {width, src, ld_src, slots, cache};
  /* rows run in parallel: the API requires distinct slots (one owner copy per token) */
  return sc_kcpu_parallel(sc_kcpu_of(k), n, 256, kvw_part, &j);
}

int sc_kcpu_topk_to_workspace(sc_kernels *k, int32_t n_tok, int32_t topk,
                              const int32_t *pos, const int32_t *base,
                              int32_t shard_rows_total, int32_t n, int32_t il,
                              int32_t *out) {
  (void)k;
  SC_KCHECK(sc_kcheck_topk_to_workspace(n_tok, topk, pos, base, shard_rows_total, n, il, out));
  for (int64_t t = 0; t < n_tok; t++)
    for (int64_t i = 0; i < topk; i++) {
      const int32_t p = pos[t * topk + i];
      if (p < 0) {
        out[t * topk + i] = -1;
        continue;
      }
      const int64_t row = (int64_t)sc_dcp_owner(p, n, il) * shard_rows_total + base[t] +
                          sc_dcp_local_index(p, n, il);
      if (row > INT32_MAX) return SC_ERANGE;
      out[t * topk + i] = (int32_t)row;
    }
  return 0;
}

int sc_kcpu_cache_keys(sc_kernels *k, int32_t n_ranges, int32_t n_keys, const int32_t *req,
                       const int32_t *begin, const int32_t *end, const int32_t *bt,
                       int32_t max_blocks, int32_t block_size, int32_t n, int32_t il,
                       int32_t dcp_rank, int32_t *pos, int32_t *slot) {
  (void)k;
  SC_KCHECK(sc_kcheck_cache_keys(n_ranges, n_keys, req, begin, end, bt, max_blocks, block_size,
                                 n, il, dcp_rank, pos, slot));
  if (end[n_ranges - 1] != n_keys) return SC_ERANGE;
  for (int32_t r = 0; r < n_ranges; r++) {
    if (begin[r] != (r ? end[r - 1] : 0) || end[r] < begin[r]) return SC_ERANGE; /* tiling */
    if (end[r] > begin[r] && req[r] < 0) return SC_ERANGE;
    /* The interleave runs and the blocks are walked with counters, not two divisions a
     * key (with them, the host spent 1.0 ms a step on a 128k context: bench/long-context.md).
     * block_size is a multiple of il (checked), so a block holds whole runs. */
    const int32_t *row = bt + (int64_t)req[r] * max_blocks;
    const int64_t skip = (int64_t)n * il - il + 1; /* from a run's last position to the next run */
    int64_t p = (int64_t)dcp_rank * il, v = 0;
    int32_t in_run = 0, in_block = 0;
    for (int32_t e = begin[r]; e < end[r]; e++) {
      if (in_block == 0 && (v >= max_blocks || row[v] < 0)) return SC_ERANGE;
      const int64_t s = (int64_t)row[v] * block_size + in_block;
      if (s > INT32_MAX) return SC_ERANGE;
      pos[e] = (int32_t)p;
      slot[e] = (int32_t)s;
      p += ++in_run == il ? skip : 1;
      in_run = in_run == il ? 0 : in_run;
      if (++in_block == block_size) in_block = 0, v++;
    }
  }
  return 0;
}

int sc_kcpu_topk_to_slots(sc_kernels *k, int32_t n_tok, int32_t topk, const int32_t *pos,
                          const int32_t *req, const int32_t *bt, int32_t max_blocks,
                          int32_t block_size, int32_t n, int32_t il, int32_t dcp_rank,
                          int32_t *out) {
  (void)k;
  SC_KCHECK(sc_kcheck_topk_to_slots(n_tok, topk, pos, req, bt, max_blocks, block_size, n, il,
                                    dcp_rank, out));
  const int64_t vblock = (int64_t)block_size * n;
  for (int64_t t = 0; t < n_tok; t++) {
    const int32_t *row = bt + (int64_t)req[t] * max_blocks;
    for (int64_t i = 0; i < topk; i++) {
      const int32_t p = pos[t * topk + i];
      if (p < 0 || sc_dcp_owner(p, n, il) != dcp_rank) {
        out[t * topk + i] = -1;
        continue;
      }
      const int64_t v = p / vblock;
      if (v >= max_blocks || row[v] < 0) return SC_ERANGE;
      const int64_t slot =
          (int64_t)row[v] * block_size + sc_dcp_local_index(p, n, il) - v * block_size;
      if (slot > INT32_MAX) return SC_ERANGE;
      out[t * topk + i] = (int32_t)slot;
    }
  }
  return 0;
}

/* The rules of model/sampling.c's sc_logits_top2 (this layer cannot call it; the GPU
 * test compares the three to the bit): the first index of the largest value, a NaN below
 * every number; the top two values with repeats, NaN never entering; their difference,
 * a zero always +0. */
int sc_kcpu_argmax_rows(sc_kernels *k, int64_t n, int64_t width, const float *x, int64_t ld,
                        int32_t *out, float *margin) {
  (void)k;
  if (n < 0 || width < 1 || width > INT32_MAX || ld < width || (n > 0 && (x == NULL || out == NULL)))
    return SC_EINVAL;
  for (int64_t r = 0; r < n; r++) {
    const float *row = x + r * ld;
    int32_t bi = 0;
    float a = -INFINITY, b = -INFINITY;
    for (int32_t i = 0; i < (int32_t)width; i++) {
      const float v = row[i];
      if (v > row[bi] || (isnan(row[bi]) && !isnan(v))) bi = i;
      if (v > a) {
        b = a;
        a = v;
      } else if (v > b) {
        b = v;
      }
    }
    out[r] = bi;
    if (margin != NULL) {
      const float m = a - b;
      margin[r] = width < 2 || m == 0.0f ? 0.0f : m;
    }
  }
  return 0;
}

int sc_kcpu_draw_rows(sc_kernels *k, int64_t n, int64_t width, const float *x, int64_t ld,
                      const float *temperature, const uint64_t *seed, const int32_t *index,
                      int32_t *tokens) {
  (void)k;
  if (n < 0 || width < 1 || width > INT32_MAX || ld < width ||
      (n > 0 && (x == NULL || temperature == NULL || seed == NULL || index == NULL ||
                 tokens == NULL)))
    return SC_EINVAL;
  for (int64_t r = 0; r < n; r++) {
    if (tokens[r] < 0 || tokens[r] >= width) return SC_ERANGE;
    tokens[r] = sc_draw_tempered(x + r * ld, (int32_t)width, temperature[r], seed[r], index[r],
                                 tokens[r]);
  }
  return 0;
}

int sc_kcpu_take_tokens(sc_kernels *k, int32_t n, const int32_t *at, const int32_t *row,
                        const int32_t *src, int32_t *ids) {
  (void)k;
  if (n < 0 || (n > 0 && (at == NULL || row == NULL || src == NULL || ids == NULL)))
    return SC_EINVAL;
  for (int32_t j = 0; j < n; j++) ids[at[j]] = src[row[j]];
  return 0;
}

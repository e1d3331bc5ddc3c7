/* Kernel tests: the lightning indexer's top-K against brute force (with ties), and the
 * DCP candidate merge against the single-shard top-K (SPEC.md §7). */
#include <math.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/fp8_e4m3.h"
#include "plan/dcp.h"
#include "test_kernels.h"

typedef struct {
  double score;
  int32_t pos;
} bf_cand;

static int bf_cmp(const void *pa, const void *pb) {
  const bf_cand *a = pa, *b = pb;
  if (a->score != b->score) return a->score > b->score ? -1 : 1;
  return (a->pos > b->pos) - (a->pos < b->pos);
}

/* The heads of a token's q as the indexer rounds them over fp8_index keys (kernels.h). */
static void round_heads(const float *q, int nh, int dim, float *out) {
  for (int h = 0; h < nh; h++) {
    float amax = 0.0f;
    for (int x = 0; x < dim; x++) amax = fmaxf(amax, fabsf(q[h * dim + x]));
    const float sc = sc_kfp8_index_scale(amax);
    for (int x = 0; x < dim; x++) out[h * dim + x] = sc_kfp8_index_round(q[h * dim + x], sc);
  }
}

/* Small-integer inputs make every f32 product and sum exact, so brute force in double
 * computes exactly the kernel's scores, and ties (many, with values in [-2, 2]) must be
 * broken exactly as SPEC.md says: higher score, then lower position. fp8_index keys hold
 * such values exactly (as 128 x their value, scale 2^-7; a row of zeros scale 1), and the
 * scale times the score of the e4m3 values is then exact too. */
static void check_indexer_exact(sc_kfmt fmt, int threads, uint64_t seed) {
  sc_kernels *k = tk_ctx(threads);
  const int32_t n_tok = 12, nh = 4, dim = 8, topk = 16, nkeys = 600, rows = 700;
  const int64_t ldk = dim + 3;
  float *qh = malloc(sizeof(float) * (size_t)(n_tok * nh * dim));
  float *wh = malloc(sizeof(float) * (size_t)(n_tok * nh));
  float *kh = calloc((size_t)(rows * ldk), sizeof(float));
  for (int32_t i = 0; i < n_tok * nh * dim; i++) qh[i] = (float)tk_int(&seed, -2, 2);
  for (int32_t i = 0; i < n_tok * nh; i++) wh[i] = (float)tk_int(&seed, -1, 2);
  for (int64_t i = 0; i < rows * ldk; i++) kh[i] = (float)tk_int(&seed, -2, 2);
  int32_t key_pos[600], key_rows[600], row_perm[700];
  for (int32_t i = 0; i < nkeys; i++) key_pos[i] = i;
  tk_shuffle_i32(&seed, key_pos, nkeys);
  for (int32_t i = 0; i < rows; i++) row_perm[i] = i;
  tk_shuffle_i32(&seed, row_perm, rows);
  memcpy(key_rows, row_perm, sizeof key_rows);
  int32_t qpos[12], kb[12], ke[12];
  for (int32_t t = 0; t < n_tok; t++) {
    qpos[t] = t < 3 ? (int32_t)tk_int(&seed, 0, 12) : (int32_t)tk_int(&seed, 0, nkeys - 1);
    kb[t] = t % 2 ? (int32_t)tk_int(&seed, 0, 200) : 0;
    ke[t] = t % 2 ? (int32_t)tk_int(&seed, kb[t], nkeys) : nkeys;
  }
  ke[5] = kb[5]; /* an empty key range: all padding */

  void *keys;
  int64_t ld = ldk; /* the row set's: elements, or bytes for fp8_index */
  if (fmt == SC_KFMT_FP8_INDEX) {
    ld = SC_KFP8_INDEX_ROW_STEP(dim);
    uint8_t *b = calloc((size_t)(rows * ld), 1);
    for (int64_t r = 0; r < rows; r++) sc_kfp8_index_quantize(kh + r * ldk, dim, b + r * ld);
    float s;
    memcpy(&s, b + SC_KFP8_INDEX_SCALE_AT(dim), sizeof s); /* row 0's scale: 2^-7 or 1 */
    cr_assert(s == 0.0078125f || s == 1.0f, "scale %g", s);
    keys = tk_up(k, b, (size_t)(rows * ld));
    free(b);
  } else if (fmt == SC_KFMT_BF16) {
    uint16_t *b = malloc(sizeof(uint16_t) * (size_t)(rows * ldk));
    for (int64_t i = 0; i < rows * ldk; i++) b[i] = sc_f32_to_bf16(kh[i]);
    keys = tk_up(k, b, sizeof(uint16_t) * (size_t)(rows * ldk));
    free(b);
  } else {
    keys = tk_up(k, kh, sizeof(float) * (size_t)(rows * ldk));
  }
  float *q = tk_up(k, qh, sizeof(float) * (size_t)(n_tok * nh * dim));
  float *w = tk_up(k, wh, sizeof(float) * (size_t)(n_tok * nh));
  int32_t *dqpos = tk_up(k, qpos, sizeof qpos), *dkb = tk_up(k, kb, sizeof kb),
          *dke = tk_up(k, ke, sizeof ke), *dkp = tk_up(k, key_pos, sizeof key_pos),
          *dkr = tk_up(k, key_rows, sizeof key_rows);
  int32_t *opos = tk_zeros(k, sizeof(int32_t) * (size_t)(n_tok * topk));
  sc_kcand *ocand = tk_zeros(k, sizeof(sc_kcand) * (size_t)(n_tok * topk));
  const sc_indexer_args a = {.n_tok = n_tok, .n_heads = nh, .dim = dim, .topk = topk,
                             .q = q, .ld_q = nh * dim, .w = w, .ld_w = nh, .q_pos = dqpos,
                             .keys = {keys, fmt, ld, rows}, .key_rows = dkr,
                             .key_pos = dkp, .key_begin = dkb, .key_end = dke,
                             .out_pos = opos, .out_cand = ocand};
  cr_assert_eq(k->ops->indexer_topk(k, &a), 0);
  int32_t got_pos[12 * 16];
  sc_kcand got[12 * 16];
  tk_down(k, got_pos, opos, sizeof got_pos);
  tk_down(k, got, ocand, sizeof got);

  bf_cand all[600];
  int ties = 0;
  for (int32_t t = 0; t < n_tok; t++) {
    int32_t n = 0;
    for (int32_t e = kb[t]; e < ke[t]; e++) {
      if (key_pos[e] > qpos[t]) continue;
      double s = 0;
      for (int32_t h = 0; h < nh; h++) {
        double d = 0;
        for (int32_t x = 0; x < dim; x++)
          d += (double)qh[(t * nh + h) * dim + x] * kh[key_rows[e] * ldk + x];
        s += wh[t * nh + h] * (d > 0 ? d : 0);
      }
      all[n++] = (bf_cand){s, key_pos[e]};
    }
    qsort(all, (size_t)n, sizeof all[0], bf_cmp);
    for (int32_t i = 0; i < topk; i++) {
      const sc_kcand c = got[t * topk + i];
      cr_assert_eq(got_pos[t * topk + i], c.pos);
      if (i < n) {
        cr_assert_eq(c.pos, all[i].pos, "t=%d i=%d: pos %d, want %d (score %g vs %g)", t, i,
                     c.pos, all[i].pos, c.score, all[i].score);
        cr_assert_eq((double)c.score, all[i].score);
        if (i + 1 < n && all[i + 1].score == all[i].score) ties++;
      } else {
        cr_assert_eq(c.pos, -1, "t=%d i=%d must be padding", t, i);
        cr_assert(isinf(c.score) && c.score < 0);
      }
    }
  }
  cr_assert_gt(ties, 10, "the inputs must exercise the tie rule (%d ties)", ties);
  free(qh);
  free(wh);
  free(kh);
  void *bufs[] = {keys, q, w, dqpos, dkb, dke, dkp, dkr, opos, ocand};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) k->ops->free(k, bufs[i]);
  sc_kernels_destroy(k);
}

Test(kernels_topk, indexer_f32_matches_brute_force_with_ties) {
  check_indexer_exact(SC_KFMT_F32, 1, 11);
}

Test(kernels_topk, indexer_bf16_matches_brute_force_threads) {
  check_indexer_exact(SC_KFMT_BF16, 2, 12);
}

Test(kernels_topk, indexer_fp8_index_keys_match_brute_force) {
  check_indexer_exact(SC_KFMT_FP8_INDEX, 2, 13);
}

/* The quantizer of fp8_index rows: the least power-of-two scale that fits the largest
 * value, each value its nearest e4m3 byte (the encoder agrees with the nearest of all 254
 * finite bytes, ties to even, on random and on halfway values), the scale after the
 * values, and a row of zeros with scale 1. And the score of an fp8_index key is its scale
 * times the score of its e4m3 values against q's heads rounded alike, in one rounding. */
static int nearest_e4m3(float f) { /* by search: the byte whose value is nearest, even on ties */
  int best = -1;
  double bd = INFINITY;
  for (int b = 0; b < 256; b++) {
    if ((b & 0x7f) == 0x7f) continue;
    const float v = sc_e4m3_value((uint8_t)b);
    if (v == 0.0f && (b & 0x80) != (signbit(f) ? 0x80 : 0)) continue; /* the zero of f's sign */
    const double d = fabs((double)v - (double)f);
    if (d < bd || (d == bd && (b & 1) == 0 && (best & 1) == 1)) bd = d, best = b;
  }
  return best;
}

Test(kernels_topk, fp8_index_quantizer) {
  uint64_t seed = 21;
  for (int i = 0; i < 20000; i++) {
    const float f = (float)ldexp((double)tk_int(&seed, -100000, 100000) / 1e5,
                                 (int)tk_int(&seed, -12, 9));
    if (fabsf(f) >= 448.0f) continue;
    cr_assert_eq(sc_e4m3_encode(f), nearest_e4m3(f), "%a", (double)f);
  }
  for (int b = 0; b < 0x7e; b++) { /* halfway between neighbours: to the even byte */
    const float lo = sc_e4m3_value((uint8_t)b), hi = sc_e4m3_value((uint8_t)(b + 1));
    const float mid = (lo + hi) / 2;
    cr_assert_eq(sc_e4m3_encode(mid), (b & 1) ? b + 1 : b, "between 0x%02x and 0x%02x", b, b + 1);
    cr_assert_eq(sc_e4m3_encode(-mid), 0x80 | ((b & 1) ? b + 1 : b));
  }
  cr_assert_eq(sc_e4m3_encode(460.0f), 0x7e);
  const float k[5] = {3.0f, -0.5f, 104.0f, 0.0f, 1e-6f};
  uint8_t row[SC_KFP8_INDEX_ROW_BYTES(5)];
  sc_kfp8_index_quantize(k, 5, row);
  float s;
  memcpy(&s, row + SC_KFP8_INDEX_SCALE_AT(5), sizeof s);
  cr_assert_eq(s, 0.25f, "104 / 448 = 0.232: scale 2^-2, got %g", s);
  cr_assert_eq(sc_e4m3_value(row[2]) * s, 104.0f); /* 416 = 1.625 * 2^8 */
  cr_assert_eq(sc_e4m3_value(row[0]) * s, 3.0f);
  cr_assert_eq(row[5], 0, "padding before the scale");
  const float z[3] = {0.0f, -0.0f, 0.0f};
  sc_kfp8_index_quantize(z, 3, row);
  memcpy(&s, row + SC_KFP8_INDEX_SCALE_AT(3), sizeof s);
  cr_assert_eq(s, 1.0f);
  cr_assert(row[0] == 0 && row[1] == 0x80 && row[2] == 0);
}

Test(kernels_topk, fp8_index_score_is_the_scale_times_the_e4m3_score) {
  sc_kernels *k = tk_ctx(1);
  enum { NH = 3, DIM = 16, NK = 40 };
  const int64_t ld = SC_KFP8_INDEX_ROW_BYTES(DIM);
  uint64_t seed = 5;
  float q[NH * DIM], w[NH], kv[NK * DIM];
  for (int i = 0; i < NH * DIM; i++) q[i] = (float)tk_int(&seed, -1000, 1000) / 997.0f;
  for (int i = 0; i < NH; i++) w[i] = (float)tk_int(&seed, 1, 1000) / 991.0f;
  for (int i = 0; i < NK * DIM; i++) kv[i] = (float)tk_int(&seed, -1000, 1000) / 83.0f;
  uint8_t rows[NK * SC_KFP8_INDEX_ROW_BYTES(DIM)];
  for (int r = 0; r < NK; r++) sc_kfp8_index_quantize(kv + r * DIM, DIM, rows + r * ld);
  float qr[NH * DIM]; /* q as the indexer rounds it over fp8_index keys, a scale a head */
  round_heads(q, NH, DIM, qr);
  int32_t pos[NK], qpos = NK, kb = 0, ke = NK;
  for (int i = 0; i < NK; i++) pos[i] = i;
  void *dk = tk_up(k, rows, sizeof rows);
  float *dq = tk_up(k, q, sizeof q), *dw = tk_up(k, w, sizeof w);
  int32_t *dp = tk_up(k, pos, sizeof pos), *dqp = tk_up(k, &qpos, sizeof qpos),
          *dkb = tk_up(k, &kb, sizeof kb), *dke = tk_up(k, &ke, sizeof ke);
  sc_kcand *oc = tk_zeros(k, sizeof(sc_kcand) * NK);
  const sc_indexer_args a = {.n_tok = 1, .n_heads = NH, .dim = DIM, .topk = NK, .q = dq,
                             .ld_q = NH * DIM, .w = dw, .ld_w = NH, .q_pos = dqp,
                             .keys = {dk, SC_KFMT_FP8_INDEX, ld, NK}, .key_pos = dp,
                             .key_begin = dkb, .key_end = dke, .out_cand = oc};
  cr_assert_eq(k->ops->indexer_topk(k, &a), 0);
  sc_kcand got[NK];
  tk_down(k, got, oc, sizeof got);
  for (int i = 0; i < NK; i++) {
    const int r = got[i].pos;
    float s;
    memcpy(&s, rows + r * ld + SC_KFP8_INDEX_SCALE_AT(DIM), sizeof s);
    double e4 = 0, deq = 0; /* over the e4m3 values, and over the dequantized key */
    for (int h = 0; h < NH; h++) {
      double d = 0;
      for (int x = 0; x < DIM; x++) d += (double)qr[h * DIM + x] * sc_e4m3_value(rows[r * ld + x]);
      e4 += w[h] * (d > 0 ? d : 0);
      deq += w[h] * (d > 0 ? d : 0) * s;
    }
    cr_assert(fabs(got[i].score - s * e4) <= 1e-5 * (1 + fabs(s * e4)), "key %d: %g, want %g", r,
              got[i].score, s * e4);
    cr_assert(fabs(deq - s * e4) <= 1e-12 * (1 + fabs(deq)), "a power-of-two scale is exact");
  }
  void *bufs[] = {dk, dq, dw, dp, dqp, dkb, dke, oc};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) k->ops->free(k, bufs[i]);
  sc_kernels_destroy(k);
}

/* The fp8_index keys a KV cache holds: kv_write quantizes f32 keys into them as
 * sc_kfp8_index_quantize does (skipped slots untouched); they score as f32 and bf16 keys
 * of their values (scale times e4m3 value, exact in both) to the bit; gather_rows copies
 * them as they are (a DCP shard's keys) and makes no other format of them. */
Test(kernels_topk, fp8_index_keys_written_copied_and_scored_alike) {
  sc_kernels *k = tk_ctx(2);
  enum { NH = 4, DIM = 40, NK = 300, NT = 5, TOPK = 24 };
  const int64_t ld = SC_KFP8_INDEX_ROW_STEP(DIM), ldx = DIM + 3;
  uint64_t seed = 77;
  float *x = tk_rand_f32(&seed, (size_t)NK * ldx, -3.0, 3.0);
  for (int r = 0; r < NK; r += 7) /* rows of other magnitudes: other scales */
    for (int i = 0; i < DIM; i++) x[r * ldx + i] *= r % 2 ? 900.0f : 1e-3f;
  for (int i = 0; i < DIM; i++) x[14 * ldx + i] = 0.0f; /* scale 1 */
  int32_t slots[NK];
  for (int i = 0; i < NK; i++) slots[i] = i;
  tk_shuffle_i32(&seed, slots, NK);
  const int32_t skipped[2] = {slots[3], slots[10]};
  slots[3] = slots[10] = -1; /* rows not this rank's: their slots keep what they held */
  float *dx = tk_up(k, x, sizeof(float) * (size_t)NK * ldx);
  int32_t *dslots = tk_up(k, slots, sizeof slots);
  uint8_t *fill = malloc((size_t)(NK * ld));
  memset(fill, 0xab, (size_t)(NK * ld));
  void *cache = tk_up(k, fill, (size_t)(NK * ld));
  const sc_krows keys = {cache, SC_KFMT_FP8_INDEX, ld, NK};
  cr_assert_eq(k->ops->kv_write(k, NK, DIM, dx, ldx, dslots, keys), 0);
  uint8_t *got = malloc((size_t)(NK * ld)), want[SC_KFP8_INDEX_ROW_BYTES(DIM)];
  tk_down(k, got, cache, (size_t)(NK * ld));
  for (int i = 0; i < NK; i++) {
    if (slots[i] < 0) continue;
    sc_kfp8_index_quantize(x + i * ldx, DIM, want);
    cr_assert_eq(memcmp(got + slots[i] * ld, want, sizeof want), 0, "row %d", i);
  }
  for (int j = 0; j < 2; j++)
    cr_assert_eq(memcmp(got + skipped[j] * ld, fill, (size_t)ld), 0, "slot %d", skipped[j]);
  /* the skipped slots hold no key: give them some, as an older step would have */
  for (int j = 0; j < 2; j++) sc_kfp8_index_quantize(x + 3 * ldx, DIM, got + skipped[j] * ld);
  cr_assert_eq(k->ops->copy(k, cache, got, (size_t)(NK * ld), SC_KCOPY_H2D), 0);

  /* the keys' values (scale times e4m3 value), every slot in a shuffled order, as f32 and
   * bf16 rows: exact in both */
  int32_t order[NK];
  for (int i = 0; i < NK; i++) order[i] = i;
  tk_shuffle_i32(&seed, order, NK);
  int32_t *dorder = tk_up(k, order, sizeof order);
  float *g32 = malloc(sizeof(float) * (size_t)NK * DIM);
  uint16_t *g16 = malloc(sizeof(uint16_t) * (size_t)NK * DIM);
  for (int i = 0; i < NK; i++) {
    const uint8_t *row = got + order[i] * ld;
    float s;
    memcpy(&s, row + SC_KFP8_INDEX_SCALE_AT(DIM), sizeof s);
    for (int c = 0; c < DIM; c++) {
      g32[i * DIM + c] = s * sc_e4m3_value(row[c]);
      g16[i * DIM + c] = sc_f32_to_bf16(g32[i * DIM + c]);
      cr_assert_eq(sc_bf16_to_f32(g16[i * DIM + c]), g32[i * DIM + c], "bf16 holds it exactly");
    }
  }
  float *w32 = tk_up(k, g32, sizeof(float) * (size_t)NK * DIM);
  uint16_t *w16 = tk_up(k, g16, sizeof(uint16_t) * (size_t)NK * DIM);

  /* scored: over the fp8 cache (key e at slot order[e]) and over those values */
  float *q = tk_rand_f32(&seed, (size_t)NT * NH * DIM, -1.0, 1.0);
  float *wt = tk_rand_f32(&seed, (size_t)NT * NH, 0.1, 1.0);
  int32_t pos[NK], qpos[NT], kb[NT], ke[NT], ident[NK];
  for (int i = 0; i < NK; i++) pos[i] = i, ident[i] = i;
  for (int t = 0; t < NT; t++) qpos[t] = NK - 1 - 37 * t, kb[t] = 0, ke[t] = NK;
  /* the f32 and bf16 keys' queries rounded as the indexer rounds them over fp8_index keys
   * (rounding again is exact: the fp8 run sees the same values) */
  for (int t = 0; t < NT; t++) round_heads(q + t * NH * DIM, NH, DIM, q + t * NH * DIM);
  float *dq = tk_up(k, q, sizeof(float) * (size_t)NT * NH * DIM);
  float *dw = tk_up(k, wt, sizeof(float) * (size_t)NT * NH);
  int32_t *dpos = tk_up(k, pos, sizeof pos), *dqpos = tk_up(k, qpos, sizeof qpos),
          *dkb = tk_up(k, kb, sizeof kb), *dke = tk_up(k, ke, sizeof ke),
          *dident = tk_up(k, ident, sizeof ident);
  sc_kcand res[3][NT * TOPK];
  const sc_krows srcs[3] = {keys, {w32, SC_KFMT_F32, DIM, NK}, {w16, SC_KFMT_BF16, DIM, NK}};
  for (int v = 0; v < 3; v++) {
    sc_kcand *oc = tk_zeros(k, sizeof res[v]);
    const sc_indexer_args a = {
        .n_tok = NT, .n_heads = NH, .dim = DIM, .topk = TOPK, .q = dq, .ld_q = NH * DIM,
        .w = dw, .ld_w = NH, .q_pos = dqpos, .keys = srcs[v],
        .key_rows = v == 0 ? dorder : dident, .key_pos = dpos, .key_begin = dkb,
        .key_end = dke, .out_cand = oc};
    cr_assert_eq(k->ops->indexer_topk(k, &a), 0, "keys %d", v);
    tk_down(k, res[v], oc, sizeof res[v]);
    k->ops->free(k, oc);
  }
  for (int v = 1; v < 3; v++)
    cr_assert_eq(memcmp(res[0], res[v], sizeof res[0]), 0, "keys of format %d score otherwise", v);
  cr_assert_neq(res[0][0].pos, -1);

  /* copied as they are, into rows of another stride (a DCP shard's key room), -1: zeros */
  const int64_t ldc = 4 * DIM;
  uint8_t *cp = tk_zeros(k, (size_t)(NK * ldc));
  order[1] = -1;
  cr_assert_eq(k->ops->copy(k, dorder, order, sizeof order, SC_KCOPY_H2D), 0);
  cr_assert_eq(k->ops->gather_rows(k, NK, DIM, keys, dorder,
                                   (sc_krows){cp, SC_KFMT_FP8_INDEX, ldc, NK}), 0);
  uint8_t *gc = malloc((size_t)(NK * ldc)), zero[SC_KFP8_INDEX_ROW_BYTES(DIM)] = {0};
  tk_down(k, got, cache, (size_t)(NK * ld));
  tk_down(k, gc, cp, (size_t)(NK * ldc));
  for (int i = 0; i < NK; i++)
    cr_assert_eq(memcmp(gc + i * ldc, order[i] < 0 ? zero : got + order[i] * ld, sizeof zero), 0,
                 "copied row %d", i);
  free(gc);
  k->ops->free(k, cp);

  /* made only by kv_write (not gathered from nor into another format), and its rows must
   * hold their bytes */
  cr_assert_eq(k->ops->gather_rows(k, NK, DIM, srcs[1], NULL, keys), SC_ENOTSUP);
  cr_assert_eq(k->ops->gather_rows(k, NK, DIM, keys, NULL, srcs[1]), SC_ENOTSUP);
  cr_assert_eq(k->ops->kv_write(k, NK, DIM, dx, ldx, dslots,
                                (sc_krows){cache, SC_KFMT_FP8_INDEX, DIM, NK}),
               SC_EINVAL);
  free(x), free(fill), free(got), free(g32), free(g16), free(q), free(wt);
  void *bufs[] = {dx, dslots, cache, dorder, w32, w16, dq, dw, dpos, dqpos, dkb, dke, dident};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) k->ops->free(k, bufs[i]);
  sc_kernels_destroy(k);
}

Test(kernels_topk, merge_orders_by_score_then_position) {
  sc_kernels *k = tk_ctx(1);
  /* 2 shards x 1 token x K = 3, rank-major */
  const sc_kcand c[6] = {{5, 10}, {3, 2}, {-INFINITY, -1}, {5, 4}, {3, 1}, {NAN, 7}};
  sc_kcand *dc = tk_up(k, c, sizeof c);
  int32_t *op = tk_zeros(k, 3 * sizeof(int32_t));
  cr_assert_eq(k->ops->topk_merge(k, 1, 2, 3, dc, op, NULL), 0);
  int32_t got[3];
  tk_down(k, got, op, sizeof got);
  cr_assert(got[0] == 4 && got[1] == 10 && got[2] == 1, "%d %d %d", got[0], got[1], got[2]);
  /* K larger than the real candidates: NaN ranks last, then padding */
  const sc_kcand c2[4] = {{NAN, 7}, {1, 3}, {-INFINITY, -1}, {-INFINITY, -1}};
  sc_kcand *dc2 = tk_up(k, c2, sizeof c2);
  int32_t *op4 = tk_zeros(k, 4 * sizeof(int32_t));
  cr_assert_eq(k->ops->topk_merge(k, 1, 1, 4, dc2, op4, NULL), 0);
  int32_t got4[4];
  tk_down(k, got4, op4, sizeof got4);
  cr_assert(got4[0] == 3 && got4[1] == 7 && got4[2] == -1 && got4[3] == -1);
  k->ops->free(k, dc);
  k->ops->free(k, op);
  k->ops->free(k, dc2);
  k->ops->free(k, op4);
  sc_kernels_destroy(k);
}

/* DCP decode: every shard scores only the keys it owns (SPEC.md §4 ownership), keeps its
 * local top-K candidates, and the merge of the gathered candidates must be exactly the
 * single-rank top-K (same positions, bitwise-equal scores) on random float inputs. */
static void check_merge_vs_single(int32_t n, int32_t il, int32_t topk, uint64_t seed) {
  sc_kernels *k = tk_ctx(2);
  const int32_t n_tok = 8, nh = 6, dim = 32, len = 900;
  float *qh = tk_rand_f32(&seed, (size_t)(n_tok * nh * dim), -1, 1);
  float *wh = tk_rand_f32(&seed, (size_t)(n_tok * nh), -0.2, 1);
  const int64_t ldk = dim + 3; /* the single-rank run reads rows in place at this stride */
  float *kh = tk_rand_f32(&seed, (size_t)(len * ldk), -1, 1);
  int32_t qpos[8], kb[8], ke[8];
  for (int32_t t = 0; t < n_tok; t++) {
    qpos[t] = t == 0 ? 3 : (int32_t)tk_int(&seed, topk / 2, len - 1);
    kb[t] = 0;
    ke[t] = len;
  }
  int32_t *all_pos = malloc(sizeof(int32_t) * len);
  for (int32_t p = 0; p < len; p++) all_pos[p] = p;
  float *q = tk_up(k, qh, sizeof(float) * (size_t)(n_tok * nh * dim));
  float *w = tk_up(k, wh, sizeof(float) * (size_t)(n_tok * nh));
  float *keys = tk_up(k, kh, sizeof(float) * (size_t)(len * ldk));
  int32_t *dqpos = tk_up(k, qpos, sizeof qpos), *dkb = tk_up(k, kb, sizeof kb),
          *dke = tk_up(k, ke, sizeof ke), *dall = tk_up(k, all_pos, sizeof(int32_t) * len);
  const size_t ncand = (size_t)n_tok * topk;
  sc_kcand *single = tk_zeros(k, sizeof(sc_kcand) * ncand);
  sc_indexer_args a = {.n_tok = n_tok, .n_heads = nh, .dim = dim, .topk = topk, .q = q,
                       .ld_q = nh * dim, .w = w, .ld_w = nh, .q_pos = dqpos,
                       .keys = {keys, SC_KFMT_F32, ldk, len}, .key_rows = NULL,
                       .key_pos = dall, .key_begin = dkb, .key_end = dke,
                       .out_cand = single};
  cr_assert_eq(k->ops->indexer_topk(k, &a), 0);

  /* per shard: the owned positions, read through key_rows (as from a local cache) */
  sc_kcand *gathered = tk_zeros(k, sizeof(sc_kcand) * ncand * (size_t)n);
  int32_t *own = malloc(sizeof(int32_t) * len);
  for (int32_t r = 0; r < n; r++) {
    int32_t m = 0;
    for (int32_t p = 0; p < len; p++)
      if (sc_dcp_owner(p, n, il) == r) own[m++] = p;
    cr_assert_eq(m, sc_dcp_local_len(len, r, n, il));
    int32_t ends[8] = {0}, begins[8] = {0};
    for (int32_t t = 0; t < n_tok; t++) ends[t] = m;
    int32_t *downs = tk_up(k, own, sizeof(int32_t) * (size_t)m);
    int32_t *db = tk_up(k, begins, sizeof begins), *de = tk_up(k, ends, sizeof ends);
    sc_indexer_args s = a;
    s.key_rows = downs; /* rows of the full key matrix = the positions themselves */
    s.key_pos = downs;
    s.key_begin = db;
    s.key_end = de;
    s.out_cand = gathered + (size_t)r * ncand;
    cr_assert_eq(k->ops->indexer_topk(k, &s), 0);
    k->ops->free(k, downs);
    k->ops->free(k, db);
    k->ops->free(k, de);
  }
  sc_kcand *merged = tk_zeros(k, sizeof(sc_kcand) * ncand);
  int32_t *mpos = tk_zeros(k, sizeof(int32_t) * ncand);
  cr_assert_eq(k->ops->topk_merge(k, n_tok, n, topk, gathered, mpos, merged), 0);
  sc_kcand *x = malloc(sizeof(sc_kcand) * ncand), *y = malloc(sizeof(sc_kcand) * ncand);
  int32_t *yp = malloc(sizeof(int32_t) * ncand);
  tk_down(k, x, single, sizeof(sc_kcand) * ncand);
  tk_down(k, y, merged, sizeof(sc_kcand) * ncand);
  tk_down(k, yp, mpos, sizeof(int32_t) * ncand);
  for (size_t i = 0; i < ncand; i++) {
    cr_assert_eq(x[i].pos, y[i].pos, "entry %zu: single %d, merged %d", i, x[i].pos, y[i].pos);
    cr_assert_eq(yp[i], y[i].pos);
    cr_assert(memcmp(&x[i].score, &y[i].score, sizeof(float)) == 0, "score bits differ");
  }
  cr_assert_eq(x[4].pos, -1, "token 0 has 4 causal keys, the rest is padding");

  /* the same candidates in arbitrary order (not as indexer_topk writes them) take the
   * general path of the merge and must give the same answer */
  sc_kcand *sh = malloc(sizeof(sc_kcand) * ncand * (size_t)n);
  tk_down(k, sh, gathered, sizeof(sc_kcand) * ncand * (size_t)n);
  for (size_t l = 0; l < (size_t)n * n_tok; l++)
    for (int32_t i = topk - 1; i > 0; i--) {
      const int32_t o = (int32_t)tk_int(&seed, 0, i);
      const sc_kcand tmp = sh[l * topk + i];
      sh[l * topk + i] = sh[l * topk + o];
      sh[l * topk + o] = tmp;
    }
  sc_kcand *dsh = tk_up(k, sh, sizeof(sc_kcand) * ncand * (size_t)n);
  cr_assert_eq(k->ops->topk_merge(k, n_tok, n, topk, dsh, mpos, NULL), 0);
  tk_down(k, yp, mpos, sizeof(int32_t) * ncand);
  for (size_t i = 0; i < ncand; i++) cr_assert_eq(x[i].pos, yp[i], "shuffled entry %zu", i);
  free(sh);
  k->ops->free(k, dsh);
  free(qh);
  free(wh);
  free(kh);
  free(all_pos);
  free(own);
  free(x);
  free(y);
  free(yp);
  void *bufs[] = {q, w, keys, dqpos, dkb, dke, dall, single, gathered, merged, mpos};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) k->ops->free(k, bufs[i]);
  sc_kernels_destroy(k);
}

Test(kernels_topk, merge_equals_single_shard_n2_i1) { check_merge_vs_single(2, 1, 64, 21); }
Test(kernels_topk, merge_equals_single_shard_n4_i2) { check_merge_vs_single(4, 2, 100, 22); }
Test(kernels_topk, merge_equals_single_shard_n3_i4_k300) {
  check_merge_vs_single(3, 4, 300, 23);
}

Test(kernels_topk, rejects_rows_outside_the_key_set) {
  sc_kernels *k = tk_ctx(1);
  float *q = tk_zeros(k, 4 * sizeof(float)), *w = tk_zeros(k, sizeof(float));
  float *keys = tk_zeros(k, 8 * sizeof(float));
  int32_t *z = tk_zeros(k, sizeof(int32_t)), *one = tk_up(k, (int32_t[]){1}, sizeof(int32_t));
  int32_t *rows = tk_up(k, (int32_t[]){2}, sizeof(int32_t)), *out = tk_zeros(k, 8);
  sc_indexer_args a = {.n_tok = 1, .n_heads = 1, .dim = 4, .topk = 2, .q = q, .ld_q = 4,
                       .w = w, .ld_w = 1, .q_pos = z, .keys = {keys, SC_KFMT_F32, 4, 2},
                       .key_rows = rows, .key_pos = z, .key_begin = z, .key_end = one,
                       .out_pos = out};
  cr_assert_eq(k->ops->indexer_topk(k, &a), SC_ERANGE);
  a.out_pos = NULL;
  cr_assert_eq(k->ops->indexer_topk(k, &a), SC_EINVAL, "no output at all");
  a.out_pos = out;
  a.max_keys = -1;
  cr_assert_eq(k->ops->indexer_topk(k, &a), SC_EINVAL, "a negative bound of the keys");
  void *bufs[] = {q, w, keys, z, one, rows, out};
  for (size_t i = 0; i < 7; i++) k->ops->free(k, bufs[i]);
  sc_kernels_destroy(k);
}

/* cuda_indexer_few.cuh - the scoring kernel's tile for tokens of few head rows (hp < 16:
 * model-long's and the default model's 4 index heads), scored and appended in one go:
 * each lane compares the sums it holds after the transposed fold with its token's
 * threshold and appends the keys that reach it, where tc_score_tile wrote every sum to
 * shared memory and tc_append read them back, a half-warp a token, two tokens a round.
 * The appends were a third of a 32k prompt's full pass's 3.5 G instructions and the fold's
 * branches on hp, a runtime value, much of the rest (ncu, H100, 2026-12-06: 6.5
 * instructions a pair where the products and the fold take about one); here hp is a
 * template parameter and a lane holds whole sums only.
 *
 * The sums are tc_score_tile's to the bit (the same mma steps, products, adds and
 * shuffles; an xor shuffle's add gives both lanes the same sum, IEEE addition being
 * commutative), each key's score and threshold test are tc_append's, and a list holds the
 * same keys after every tile (in another order within the tile's appends, which no cut or
 * select depends on: both keep sets by value). Not a public header: cuda_indexer.cu's. */
#ifndef SC_KERNELS_CUDA_INDEXER_FEW_CUH
#define SC_KERNELS_CUDA_INDEXER_FEW_CUH

#include "kernels/cuda/cuda_indexer_tile.cuh"

/* The kernel instances that compile the fused tile: rows of 64 values in 16-byte pieces
 * (model-long's and the default model's index keys). With the key fragments of wider rows
 * (KS 8) or the loads of unaligned ones beside it, the tile no longer fit 128 registers
 * (ptxas: spills, or 180-194 registers and one block an SM where two were), so those keep
 * tc_score_tile and tc_append. */
__host__ __device__ constexpr bool tc_few_fits(int dimp, bool vec, bool wg) {
  return !wg && dimp == 64 && vec;
}

/* What a lane knows of the two keys whose sums it holds: keys g and g + 8 of its warp's
 * 16 (g = lane / 4), their token masks, positions and scales (1 but for fp8_index keys). */
typedef struct tc_lane_keys {
  unsigned mask[2];
  int32_t pos[2];
  float scale[2];
} tc_lane_keys;

/* Appends the sums that reach their token's threshold, of every token an m-tile's fold
 * leaves this lane: NT tokens j[t] of VPT sums each, s[t VPT + u] (of key g + 8 u, or with
 * KEY_BY_LANE of key g + 8 (lane & 1): one sum a token). The lanes holding a token's sums
 * are tmask (the masks partition the warp); a token's count is taken by one lane, the
 * first of its group (lane & 3 == lane & cmask) in the group's row t of the warp (lane
 * 4 t + that), so that one shared atomic instruction serves every token of the call (of
 * an m-tile at 4 and 8 head rows; of a half at 1 and 2, called a half at a time); a
 * lane's keys follow its lower lanes' in the list. */
template <int NT, int VPT, bool KEY_BY_LANE>
__device__ inline void tc_few_append(const float (&s)[NT * VPT], const int (&j)[NT], int gn,
                                     unsigned tmask, int cmask, const tc_lane_keys &kk,
                                     const unsigned long long *thr, unsigned *top,
                                     bool track_top, int *fill, uint64_t *cb, int room,
                                     int *flag, int lane) {
  constexpr int NV = NT * VPT;
  uint64_t k[NV];
  bool want[NV];
  unsigned bal[NV], any = 0;
#pragma unroll
  for (int t = 0; t < NT; t++) {
    const bool in = j[t] < gn; /* (gn <= TC_GROUP_MAX = 32: the mask's shift stays in range) */
    const unsigned long long th = in ? thr[j[t]] : ~0ull;
#pragma unroll
    for (int u = 0; u < VPT; u++) {
      const int v = t * VPT + u;
      /* (selects, not kk's arrays indexed at run time: those would go to local memory) */
      const bool hi = KEY_BY_LANE ? (lane & 1) != 0 : u != 0;
      const bool sees = in && (((hi ? kk.mask[1] : kk.mask[0]) >> j[t]) & 1u);
      k[v] = sees ? sc_dev_topk_key(s[v] * (hi ? kk.scale[1] : kk.scale[0]),
                                    hi ? kk.pos[1] : kk.pos[0])
                  : 0;
      want[v] = sees && k[v] >= th;
      bal[v] = __ballot_sync(0xffffffffu, want[v]);
      any |= bal[v];
    }
  }
  if (any == 0) return; /* (uniform) */
  const int row = lane >> 2, lead = lane & 3 & cmask;     /* this lane's group's first c */
  const bool leader = (lane & 3) == lead && row < NT;     /* counts token row's group */
  int n = 0, jl = 0;
#pragma unroll
  for (int t = 0; t < NT; t++)
    if (t == row) {
      jl = j[t];
#pragma unroll
      for (int u = 0; u < VPT; u++) n += __popc(bal[t * VPT + u] & tmask);
    }
  int mine = 0;
  if (leader && n > 0) mine = atomicAdd(&fill[jl], n);
  if (track_top) { /* (uniform) each token's largest high word appended, over its lanes */
#pragma unroll
    for (int t = 0; t < NT; t++) {
      unsigned hw = 0;
#pragma unroll
      for (int u = 0; u < VPT; u++)
        if (want[t * VPT + u] && (unsigned)(k[t * VPT + u] >> 32) > hw)
          hw = (unsigned)(k[t * VPT + u] >> 32);
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) { /* xor steps that stay in tmask */
        const unsigned other = __shfl_xor_sync(0xffffffffu, hw, o);
        if ((tmask >> (lane ^ o)) & 1u) hw = other > hw ? other : hw;
      }
      if (leader && t == row && n > 0) atomicMax(&top[jl], hw);
    }
  }
  const unsigned below = (1u << lane) - 1u;
#pragma unroll
  for (int t = 0; t < NT; t++) {
    int slot = __shfl_sync(0xffffffffu, mine, 4 * t + lead);
#pragma unroll
    for (int u = 0; u < VPT; u++) {
      const int v = t * VPT + u;
      const int at = slot + __popc(bal[v] & tmask & below);
      slot += __popc(bal[v] & tmask);
      /* (a list holds under 2^31 keys: 32-bit offsets into the block's lists) */
      if (want[v] && at < room) cb[(unsigned)(j[t] * room + at)] = k[v];
      if (want[v] && at >= room) sc_dev_raise(flag, SC_EINVAL); /* duplicate positions: a
                                                                 * cut leaves room otherwise */
    }
  }
}

/* Scores this warp's TC_KW keys of the tile in shared memory `kw` against the group's gn
 * tokens of HP head rows each (HP a power of two below 16) and appends those that reach a
 * token's threshold (tc_append's contract). The mma and the fold are tc_score_tile's
 * transposed ones: lane (g, c) holds, per half h of an m-tile, keys g and g + 8 against q
 * rows 2c and 2c + 1 of the half. After the fold a token's sum sits in
 *   HP 1: every lane, two tokens (rows 2c, 2c + 1) x two keys;
 *   HP 2: every lane, one token (c) x two keys;
 *   HP 4: lanes c and c ^ 1 both (the xor 1 add); lane c takes key g + 8 (c & 1);
 *   HP 8: all four lanes of g (xor 1, 2); lane c takes half c >> 1, key g + 8 (c & 1);
 * so a lane holds only sums no other lane appends. */
template <int DIMP, int FMT, int HP>
__device__ inline void tc_score_append_few(const unsigned char *kw, const uint16_t *q_s,
                                           const float *w_s, int gn, const tc_lane_keys &kk,
                                           const unsigned long long *thr, unsigned *top,
                                           bool track_top, int *fill, uint64_t *cb, int room,
                                           int *flag, int lane) {
  static_assert(HP == 1 || HP == 2 || HP == 4 || HP == 8, "few head rows: 1, 2, 4 or 8");
  constexpr int ES = FMT == SC_KFMT_F32 ? 4 : 2;
  constexpr int LD = DIMP + TC_PAD;
  constexpr int KS = DIMP / 16;
  constexpr int PER = 16 / HP; /* tokens of an m-tile */
  const int g = lane >> 2, c = lane & 3;
  /* The warp's keys as the A operand, in its register order (keys g and g + 8 at k 2c,
   * then at 2c + 8: tc_b_frag's halves of the two column tiles), and q's rows loaded by
   * one ldmatrix in the B operands' order (matrices: rows 0-7 at k 0 and 8, then rows
   * 8-15): the same values as tc_score_tile's, without the register moves its operand
   * orders cost (a twelfth of the full pass's instructions, ncu). */
  uint32_t ka[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ks++) {
    uint32_t lo[2], hi[2]; /* keys g, g + 8 */
    tc_b_frag<FMT>(lo, kw + (size_t)g * LD * ES, ks * 16, c);
    tc_b_frag<FMT>(hi, kw + (size_t)(8 + g) * LD * ES, ks * 16, c);
    ka[ks][0] = lo[0], ka[ks][1] = hi[0], ka[ks][2] = lo[1], ka[ks][3] = hi[1];
  }
  const int qrow = (lane & 7) + ((lane >> 4) << 3), qcol = ((lane >> 3) & 1) * 8;
  for (int mt = 0; mt * PER < gn; mt++) {
    float acc[2][4];
#pragma unroll
    for (int h = 0; h < 2; h++) acc[h][0] = acc[h][1] = acc[h][2] = acc[h][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
      uint32_t qf[4]; /* q0 = qf[0..1] (rows 0-7), q1 = qf[2..3] (rows 8-15) */
      ldsm_x4(qf, q_s + (size_t)(mt * 16 + qrow) * LD + ks * 16 + qcol);
      mma_bf16_16816(acc[0], ka[ks], qf);
      mma_bf16_16816(acc[1], ka[ks], qf + 2);
    }
    float e[2][2][2]; /* [h][key g, g + 8][q row 2c, 2c + 1]: w x ReLU, each rounded alone */
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = mt * 16 + h * 8 + 2 * c;
      const float w0 = w_s[row], w1 = w_s[row + 1];
#pragma unroll
      for (int y = 0; y < 2; y++) {
        e[h][y][0] = __fmul_rn(w0, fmaxf(acc[h][2 * y], 0.0f));
        e[h][y][1] = __fmul_rn(w1, fmaxf(acc[h][2 * y + 1], 0.0f));
      }
    }
    const unsigned same_c = 0x11111111u << c; /* the lanes of one c */
    if constexpr (HP == 1) { /* tokens rows 2c + x, two keys each; a half at a time
                              * (eight sums in one call spilled registers) */
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const float sv[4] = {e[h][0][0], e[h][1][0], e[h][0][1], e[h][1][1]};
        const int jv[2] = {mt * 16 + h * 8 + 2 * c, mt * 16 + h * 8 + 2 * c + 1};
        tc_few_append<2, 2, false>(sv, jv, gn, same_c, 3, kk, thr, top, track_top, fill, cb,
                                   room, flag, lane);
      }
    } else if constexpr (HP == 2) { /* token c of each half, two keys */
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const float sv[2] = {e[h][0][0] + e[h][0][1], e[h][1][0] + e[h][1][1]};
        const int jv[1] = {mt * 8 + h * 4 + c};
        tc_few_append<1, 2, false>(sv, jv, gn, same_c, 3, kk, thr, top, track_top, fill, cb,
                                   room, flag, lane);
      }
    } else {
      float p[2][2]; /* [h][key g, g + 8] */
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int y = 0; y < 2; y++) {
          p[h][y] = e[h][y][0] + e[h][y][1];
          p[h][y] += __shfl_xor_sync(0xffffffffu, p[h][y], 1);
          if (HP == 8) p[h][y] += __shfl_xor_sync(0xffffffffu, p[h][y], 2);
        }
      const unsigned pair = 0x33333333u << (c & 2); /* lanes c and c ^ 1 */
      if constexpr (HP == 4) { /* token c / 2 of each half, key c & 1 */
        const float sv[2] = {(c & 1) ? p[0][1] : p[0][0], (c & 1) ? p[1][1] : p[1][0]};
        const int jv[2] = {mt * 4 + (c >> 1), mt * 4 + 2 + (c >> 1)};
        tc_few_append<2, 1, true>(sv, jv, gn, pair, 2, kk, thr, top, track_top, fill, cb,
                                  room, flag, lane);
      } else { /* HP 8: half c / 2 (its token), key c & 1 */
        const float sv[1] = {(c & 2) ? ((c & 1) ? p[1][1] : p[1][0])
                                     : ((c & 1) ? p[0][1] : p[0][0])};
        const int jv[1] = {mt * 2 + (c >> 1)};
        tc_few_append<1, 1, true>(sv, jv, gn, pair, 2, kk, thr, top, track_top, fill, cb,
                                  room, flag, lane);
      }
    }
  }
}

/* tc_score_append_few of the block's hp (uniform; HP a template parameter). */
template <int DIMP, int FMT>
__device__ inline void tc_score_few(int hp, const unsigned char *kw, const uint16_t *q_s,
                                    const float *w_s, int gn, const tc_lane_keys &kk,
                                    const unsigned long long *thr, unsigned *top, bool track_top,
                                    int *fill, uint64_t *cb, int room, int *flag, int lane) {
  switch (hp) {
  case 1:
    tc_score_append_few<DIMP, FMT, 1>(kw, q_s, w_s, gn, kk, thr, top, track_top, fill, cb, room,
                                      flag, lane);
    break;
  case 2:
    tc_score_append_few<DIMP, FMT, 2>(kw, q_s, w_s, gn, kk, thr, top, track_top, fill, cb, room,
                                      flag, lane);
    break;
  case 4:
    tc_score_append_few<DIMP, FMT, 4>(kw, q_s, w_s, gn, kk, thr, top, track_top, fill, cb, room,
                                      flag, lane);
    break;
  default:
    tc_score_append_few<DIMP, FMT, 8>(kw, q_s, w_s, gn, kk, thr, top, track_top, fill, cb, room,
                                      flag, lane);
  }
}

#endif

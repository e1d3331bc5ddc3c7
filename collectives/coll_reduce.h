/* coll_reduce.h - the element-wise sum every host-side backend uses for all_reduce and
 * reduce_scatter. Sums run in f32 over the group members in group-rank order 0..G-1 on
 * every member, so all members get bit-identical results; bf16 data is widened, summed
 * in f32 and rounded once (to nearest even). Pure inline functions; any thread. */
#ifndef SC_COLL_REDUCE_H
#define SC_COLL_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/bf16.h"
#include "plan/coll_types.h"

/* acc[i] = (first ? 0 : acc[i]) + src[i] for n elements of type dt (f32 or bf16). */
static inline void sc_coll_accumulate(sc_dtype dt, float *acc, const void *src, size_t n,
                                      bool first) {
  if (dt == SC_DT_BF16) {
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) acc[i] = (first ? 0.0f : acc[i]) + sc_bf16_to_f32(s[i]);
  } else {
    const float *s = src;
    for (size_t i = 0; i < n; i++) acc[i] = (first ? 0.0f : acc[i]) + s[i];
  }
}

/* dst = acc converted to dt. */
static inline void sc_coll_store(sc_dtype dt, const float *acc, void *dst, size_t n) {
  if (dt == SC_DT_BF16) {
    uint16_t *o = dst;
    for (size_t i = 0; i < n; i++) o[i] = sc_f32_to_bf16(acc[i]);
  } else {
    float *o = dst;
    for (size_t i = 0; i < n; i++) o[i] = acc[i];
  }
}

#endif

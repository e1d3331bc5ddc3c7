/* coll_types.h - the vocabulary of collectives: groups, operations, element types and
 * the purposes named by the collective plan (SPEC.md §6).
 *
 * The numeric values are part of the plan fingerprint and of the wire format: append,
 * never renumber.
 */
#ifndef SC_COLL_TYPES_H
#define SC_COLL_TYPES_H

#include <stddef.h>
#include <stdint.h>

typedef enum sc_group {
  SC_GROUP_TP = 0,
  SC_GROUP_PCP = 1,
  SC_GROUP_DCP = 2,
  SC_GROUP_COUNT
} sc_group;

typedef enum sc_coll_op {
  SC_OP_ALL_GATHER = 0,
  SC_OP_ALL_REDUCE = 1,
  SC_OP_REDUCE_SCATTER = 2,
  SC_OP_COUNT
} sc_coll_op;

/* Element types of collective buffers. SC_DT_W32 is an opaque 32-bit word (the top-K
 * candidates pack a float score and an int position into two words). */
typedef enum sc_dtype {
  SC_DT_F32 = 0,
  SC_DT_BF16 = 1,
  SC_DT_W32 = 2,
  SC_DT_COUNT
} sc_dtype;

typedef enum sc_coll_purpose {
  SC_PURPOSE_PREFILL_KV = 0,
  SC_PURPOSE_CONTEXT_KV = 1,
  SC_PURPOSE_DECODE_Q = 2,
  SC_PURPOSE_TOPK_CANDIDATES = 3,
  SC_PURPOSE_DECODE_LSE = 4,
  SC_PURPOSE_DECODE_OUT = 5,
  SC_PURPOSE_ATTN_OUT = 6,
  SC_PURPOSE_MLP_OUT = 7,
  SC_PURPOSE_HIDDEN_RESTORE = 8,
  SC_PURPOSE_COUNT
} sc_coll_purpose;

const char *sc_group_name(int group);
const char *sc_coll_op_name(int op);
const char *sc_dtype_name(int dtype);
size_t sc_dtype_size(int dtype);
const char *sc_coll_purpose_name(int purpose);

#endif

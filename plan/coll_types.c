#include "plan/coll_types.h"

#define NAME_OF(table, i) \
  ((unsigned)(i) < sizeof(table) / sizeof(table[0]) ? table[(i)] : "?")

static const char *const k_groups[] = {"tp", "pcp", "dcp"};
static const char *const k_ops[] = {"all_gather", "all_reduce", "reduce_scatter"};
static const char *const k_dtypes[] = {"f32", "bf16", "w32"};
static const size_t k_dtype_sizes[] = {4, 2, 4};
static const char *const k_purposes[] = {
    "prefill_kv", "context_kv", "decode_q",  "topk_candidates", "decode_lse",
    "decode_out", "attn_out",   "mlp_out",   "hidden_restore"};

const char *sc_group_name(int group) { return NAME_OF(k_groups, group); }
const char *sc_coll_op_name(int op) { return NAME_OF(k_ops, op); }
const char *sc_dtype_name(int dtype) { return NAME_OF(k_dtypes, dtype); }
const char *sc_coll_purpose_name(int purpose) { return NAME_OF(k_purposes, purpose); }

size_t sc_dtype_size(int dtype) {
  return (unsigned)dtype < SC_DT_COUNT ? k_dtype_sizes[dtype] : 0;
}

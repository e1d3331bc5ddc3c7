/* plan_config.c - defaults and validation of the parallel configuration (SPEC.md §1). */
#include <stdio.h>

#include "plan/plan.h"

bool sc_plan_config_same(const sc_plan_config *a, const sc_plan_config *b, char *out,
                         size_t len) {
#define SC_SAME(f)                                                                       \
  if (a->f != b->f) {                                                                  \
    snprintf(out, len, "%s %lld/%lld", #f, (long long)a->f, (long long)b->f);          \
    return false;                                                                      \
  }
  SC_SAME(pcp) SC_SAME(dcp) SC_SAME(tp) SC_SAME(interleave) SC_SAME(block_size)
  SC_SAME(pad_multiple) SC_SAME(max_gathered_rows) SC_SAME(layers) SC_SAME(heads)
  SC_SAME(kv_lora_rank) SC_SAME(rope_dim) SC_SAME(index_dim) SC_SAME(topk) SC_SAME(hidden)
  SC_SAME(dtype)
#undef SC_SAME
  if (a->engine_digest != b->engine_digest) {
    snprintf(out, len, "engine %016llx/%016llx: the model, its weights or the KV "
             "format", (unsigned long long)a->engine_digest,
             (unsigned long long)b->engine_digest);
    return false;
  }
  if (len) out[0] = '\0';
  return true;
}

void sc_plan_config_default(sc_plan_config *cfg) {
  *cfg = (sc_plan_config){
      .pcp = 1,
      .dcp = 1,
      .tp = 1,
      .interleave = 1,
      .block_size = 64,
      .pad_multiple = 1,
      .max_gathered_rows = SC_PLAN_DEFAULT_MAX_GATHERED_ROWS,
      .layers = 1,
      .dtype = SC_DT_F32,
  };
}

static int check_range(sc_diag *d, const char *name, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    return sc_fail(d, SC_EINVAL, "%s = %lld is out of range: it must be in [%lld, %lld]",
                   name, (long long)v, (long long)lo, (long long)hi);
  return 0;
}

int sc_plan_config_validate(const sc_plan_config *c, sc_diag *d) {
  int rc;
  const struct {
    const char *name;
    int64_t v, lo, hi;
  } ranges[] = {
      {"pcp", c->pcp, 1, SC_PLAN_MAX_PARALLEL},
      {"dcp", c->dcp, 1, SC_PLAN_MAX_PARALLEL},
      {"tp", c->tp, 1, SC_PLAN_MAX_PARALLEL},
      {"interleave", c->interleave, 1, SC_PLAN_MAX_DIM},
      {"block_size", c->block_size, 1, SC_PLAN_MAX_DIM},
      {"pad_multiple", c->pad_multiple, 1, SC_PLAN_MAX_DIM},
      /* (extents and workspace rows are int32: up to INT32_MAX of them, not 2^31) */
      {"max_gathered_rows", c->max_gathered_rows, 1, INT32_MAX},
      {"layers", c->layers, 1, 4096},
      {"heads", c->heads, 1, SC_PLAN_MAX_DIM},
      {"kv_lora_rank", c->kv_lora_rank, 1, SC_PLAN_MAX_DIM},
      {"rope_dim", c->rope_dim, 0, SC_PLAN_MAX_DIM},
      {"index_dim", c->index_dim, 1, SC_PLAN_MAX_DIM},
      {"topk", c->topk, 1, SC_PLAN_MAX_DIM},
      {"hidden", c->hidden, 1, SC_PLAN_MAX_DIM},
  };
  for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
    if ((rc = check_range(d, ranges[i].name, ranges[i].v, ranges[i].lo, ranges[i].hi)))
      return rc;
  if ((unsigned)c->dtype >= SC_DT_COUNT || c->dtype == SC_DT_W32)
    return sc_fail(d, SC_EINVAL, "dtype must be f32 or bf16");

  const int32_t P = c->pcp, N = c->dcp, T = c->tp;
  if ((int64_t)P * T > SC_PLAN_MAX_PARALLEL)
    return sc_fail(d, SC_EINVAL, "world size pcp*tp = %lld exceeds %d", (long long)P * T,
                   SC_PLAN_MAX_PARALLEL);
  if (P > 1) {
    if (T > 1 && N == P * T)
      return sc_fail(d, SC_ENOTSUP,
                     "dcp = pcp*tp = %d is not supported yet: with pcp > 1, dcp must be "
                     "1 or equal to pcp",
                     N);
    if (N != 1 && N != P)
      return sc_fail(d, SC_EINVAL,
                     "pcp = %d with dcp = %d: with pcp > 1, dcp must be 1 or equal to pcp "
                     "(the DCP group is the PCP group)",
                     P, N);
  } else if (T % N != 0) {
    return sc_fail(d, SC_EINVAL,
                   "dcp = %d does not divide tp = %d: with pcp = 1, dcp must divide tp "
                   "(DCP groups are runs of dcp TP ranks)",
                   N, T);
  }
  if (c->block_size % c->interleave != 0)
    return sc_fail(d, SC_EINVAL,
                   "interleave = %d does not divide block_size = %d: the DCP ownership "
                   "grain must divide the KV block",
                   c->interleave, c->block_size);
  if (c->heads % T != 0)
    return sc_fail(d, SC_EINVAL, "heads = %d is not divisible by tp = %d", c->heads, T);
  if (c->max_gathered_rows < N)
    return sc_fail(d, SC_EINVAL,
                   "max_gathered_rows = %lld is smaller than dcp = %d: every DCP rank needs "
                   "at least one workspace row",
                   (long long)c->max_gathered_rows, N);
  return 0;
}

sc_rank_coords sc_plan_rank_coords(const sc_plan_config *cfg, int32_t g) {
  sc_rank_coords rc = {.global = g, .pcp_rank = g / cfg->tp, .tp_rank = g % cfg->tp};
  if (cfg->pcp > 1)
    rc.dcp_rank = cfg->dcp == cfg->pcp ? rc.pcp_rank : 0;
  else
    rc.dcp_rank = rc.tp_rank % cfg->dcp;
  return rc;
}

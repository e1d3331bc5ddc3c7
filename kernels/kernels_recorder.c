/* kernels_recorder.c - recordings by keeping the calls (see kernels_recorder.h).
 *
 * Each op has an argument struct, a wrapper that either forwards the call or keeps a
 * copy of its arguments (keep), and a runner that makes the call again from that copy. A
 * recording is the list of (runner, arguments) in call order. */
#include "kernels/kernels_recorder.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

typedef int (*run_fn)(sc_kernels *in, const void *args);

typedef struct rec_call {
  run_fn run;
  void *args;
} rec_call;

struct sc_krecording {
  rec_call *calls;
  int32_t n;
  uint64_t epoch; /* the recorder's when it was made */
};

typedef struct recorder {
  sc_kernels k;
  sc_kernels *in;
  bool recording;
  int failed; /* the first refusal or keeping failure while recording (0: none) */
  rec_call *calls;
  int32_t n, cap;
  uint64_t epoch; /* bumped by sc_kernels_recorder_invalidate */
} recorder;

static recorder *rec_of(sc_kernels *k) { return (recorder *)k->impl; }

static void drop_calls(rec_call *calls, int32_t n) {
  for (int32_t i = 0; i < n; i++) free(calls[i].args);
  free(calls);
}

/* Notes the recording's first failure; returns rc. */
static int fail(recorder *r, int rc) {
  if (r->failed == 0) r->failed = rc;
  return rc;
}

/* Forgets the calls kept so far. */
static void forget(recorder *r) {
  for (int32_t i = 0; i < r->n; i++) free(r->calls[i].args);
  r->n = 0;
}

/* Keeps one call; the op "succeeds" (it runs at the replay). */
static int keep(recorder *r, run_fn run, const void *args, size_t bytes) {
  if (r->n == r->cap) {
    const int32_t cap = r->cap ? 2 * r->cap : 256;
    rec_call *c = realloc(r->calls, sizeof *c * (size_t)cap);
    if (c == NULL) return fail(r, SC_ENOMEM);
    r->calls = c;
    r->cap = cap;
  }
  void *a = malloc(bytes);
  if (a == NULL) return fail(r, SC_ENOMEM);
  memcpy(a, args, bytes);
  r->calls[r->n++] = (rec_call){run, a};
  return 0;
}

/* A call that cannot be recorded: it fails, and so does the recording. */
static int refuse(recorder *r) { return fail(r, SC_EAGAIN); }

/* ---- recordings ---- */

static int w_record_begin(sc_kernels *k) {
  recorder *r = rec_of(k);
  if (r->recording) return SC_EINVAL;
  r->recording = true;
  r->failed = 0;
  forget(r);
  return 0;
}

static int w_record_end(sc_kernels *k, sc_krecording **out) {
  recorder *r = rec_of(k);
  *out = NULL;
  if (!r->recording) return SC_EINVAL;
  r->recording = false;
  if (r->failed) {
    forget(r);
    return r->failed; /* (SC_EAGAIN for a refused call) */
  }
  sc_krecording *rec = malloc(sizeof *rec);
  if (rec == NULL) {
    forget(r);
    return SC_ENOMEM;
  }
  *rec = (sc_krecording){r->calls, r->n, r->epoch};
  r->calls = NULL;
  r->n = r->cap = 0;
  *out = rec;
  return 0;
}

static int w_replay(sc_kernels *k, sc_krecording *rec) {
  recorder *r = rec_of(k);
  if (rec == NULL || r->recording) return SC_EINVAL;
  if (rec->epoch != r->epoch) return SC_EAGAIN;
  for (int32_t i = 0; i < rec->n; i++) {
    const int rc = rec->calls[i].run(r->in, rec->calls[i].args);
    if (rc) return rc;
  }
  return 0;
}

static void w_recording_free(sc_kernels *k, sc_krecording *rec) {
  (void)k;
  if (rec == NULL) return;
  drop_calls(rec->calls, rec->n);
  free(rec);
}

/* ---- context and memory: forwarded, refused while recording ---- */

static void w_destroy(sc_kernels *k) {
  recorder *r = rec_of(k);
  drop_calls(r->calls, r->n);
  sc_kernels_destroy(r->in);
  free(r);
}

static int w_alloc(sc_kernels *k, size_t bytes, void **out) {
  recorder *r = rec_of(k);
  if (r->recording) return *out = NULL, refuse(r);
  return r->in->ops->alloc(r->in, bytes, out);
}

static void w_free(sc_kernels *k, void *buf) {
  recorder *r = rec_of(k);
  if (r->recording) { /* (the buffer stays: kernels.h) */
    (void)refuse(r);
    return;
  }
  r->in->ops->free(r->in, buf);
}

static int w_sync(sc_kernels *k) {
  recorder *r = rec_of(k);
  return r->recording ? refuse(r) : r->in->ops->sync(r->in);
}

static int w_notify(sc_kernels *k, sc_knotify_fn fn, void *arg) {
  recorder *r = rec_of(k);
  return r->recording ? refuse(r) : r->in->ops->notify(r->in, fn, arg);
}

static int w_inject_fault(sc_kernels *k) {
  recorder *r = rec_of(k);
  return r->recording ? refuse(r) : r->in->ops->inject_fault(r->in);
}

static int w_marks_read(sc_kernels *k, int32_t n, uint64_t *ns) {
  recorder *r = rec_of(k);
  return r->recording ? refuse(r) : r->in->ops->marks_read(r->in, n, ns);
}

static int w_busy_read(sc_kernels *k, sc_kbusy *out) {
  recorder *r = rec_of(k);
  return r->recording ? refuse(r) : r->in->ops->busy_read(r->in, out);
}

static int w_stamp(sc_kernels *k, int32_t i) {
  recorder *r = rec_of(k);
  return r->recording ? refuse(r) : r->in->ops->stamp(r->in, i);
}

static int w_stamp_gap(sc_kernels *k, int32_t i, int32_t j, int64_t *ns) {
  recorder *r = rec_of(k);
  return r->recording ? refuse(r) : r->in->ops->stamp_gap(r->in, i, j, ns);
}

/* ---- the recordable ops: forwarded, or kept while recording ---- */

typedef struct a_memset {
  void *buf;
  int value;
  size_t bytes;
} a_memset;
static int run_memset(sc_kernels *in, const void *p) {
  const a_memset *a = p;
  return in->ops->memset(in, a->buf, a->value, a->bytes);
}
static int w_memset(sc_kernels *k, void *buf, int value, size_t bytes) {
  recorder *r = rec_of(k);
  if (!r->recording) return r->in->ops->memset(r->in, buf, value, bytes);
  const a_memset a = {buf, value, bytes};
  return keep(r, run_memset, &a, sizeof a);
}

typedef struct a_copy {
  void *dst;
  const void *src;
  size_t bytes;
} a_copy;
static int run_copy(sc_kernels *in, const void *p) {
  const a_copy *a = p;
  return in->ops->copy(in, a->dst, a->src, a->bytes, SC_KCOPY_D2D);
}
static int w_copy(sc_kernels *k, void *dst, const void *src, size_t bytes, sc_kcopy kind) {
  recorder *r = rec_of(k);
  if (!r->recording || bytes == 0 || (unsigned)kind > SC_KCOPY_D2H_DEFERRED)
    return r->in->ops->copy(r->in, dst, src, bytes, kind); /* (nothing, or its EINVAL) */
  if (kind != SC_KCOPY_D2D) return refuse(r); /* (host memory: read at call time) */
  const a_copy a = {dst, src, bytes};
  return keep(r, run_copy, &a, sizeof a);
}

typedef struct a_mark {
  int32_t i;
} a_mark;
static int run_mark(sc_kernels *in, const void *p) {
  return in->ops->mark(in, ((const a_mark *)p)->i);
}
static int w_mark(sc_kernels *k, int32_t i) {
  recorder *r = rec_of(k);
  if (!r->recording) return r->in->ops->mark(r->in, i);
  const a_mark a = {i};
  return keep(r, run_mark, &a, sizeof a);
}

static int run_gemm(sc_kernels *in, const void *p) { return in->ops->gemm(in, p); }
static int w_gemm(sc_kernels *k, const sc_gemm *g) {
  recorder *r = rec_of(k);
  return r->recording ? keep(r, run_gemm, g, sizeof *g) : r->in->ops->gemm(r->in, g);
}

typedef struct a_add_rmsnorm {
  int64_t n_rows, dim;
  const float *x;
  int64_t ld_x;
  float *y;
  int64_t ld_y;
  const float *w;
  float eps;
  float *out;
  int64_t ld_out;
} a_add_rmsnorm;
static int run_add_rmsnorm(sc_kernels *in, const void *p) {
  const a_add_rmsnorm *a = p;
  return in->ops->add_rmsnorm(in, a->n_rows, a->dim, a->x, a->ld_x, a->y, a->ld_y, a->w, a->eps,
                              a->out, a->ld_out);
}
static int w_add_rmsnorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                         int64_t ld_x, float *y, int64_t ld_y, const float *w, float eps,
                         float *out, int64_t ld_out) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->add_rmsnorm(r->in, n_rows, dim, x, ld_x, y, ld_y, w, eps, out, ld_out);
  const a_add_rmsnorm a = {n_rows, dim, x, ld_x, y, ld_y, w, eps, out, ld_out};
  return keep(r, run_add_rmsnorm, &a, sizeof a);
}

static int run_linears(sc_kernels *in, const void *p) { return in->ops->linears(in, p); }
static int w_linears(sc_kernels *k, const sc_linears *a) {
  recorder *r = rec_of(k);
  return r->recording ? keep(r, run_linears, a, sizeof *a) : r->in->ops->linears(r->in, a);
}

static int run_indexer(sc_kernels *in, const void *p) { return in->ops->indexer_topk(in, p); }
static int w_indexer_topk(sc_kernels *k, const sc_indexer_args *a) {
  recorder *r = rec_of(k);
  return r->recording ? keep(r, run_indexer, a, sizeof *a) : r->in->ops->indexer_topk(r->in, a);
}

static int run_attn(sc_kernels *in, const void *p) { return in->ops->sparse_attn(in, p); }
static int w_sparse_attn(sc_kernels *k, const sc_attn_args *a) {
  recorder *r = rec_of(k);
  return r->recording ? keep(r, run_attn, a, sizeof *a) : r->in->ops->sparse_attn(r->in, a);
}

typedef struct a_rmsnorm {
  int64_t n_rows, dim;
  const float *x;
  int64_t ld_x;
  const float *w;
  float eps;
  float *out;
  int64_t ld_out;
} a_rmsnorm;
static int run_rmsnorm(sc_kernels *in, const void *p) {
  const a_rmsnorm *a = p;
  return in->ops->rmsnorm(in, a->n_rows, a->dim, a->x, a->ld_x, a->w, a->eps, a->out, a->ld_out);
}
static int w_rmsnorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x, int64_t ld_x,
                     const float *w, float eps, float *out, int64_t ld_out) {
  recorder *r = rec_of(k);
  if (!r->recording) return r->in->ops->rmsnorm(r->in, n_rows, dim, x, ld_x, w, eps, out, ld_out);
  const a_rmsnorm a = {n_rows, dim, x, ld_x, w, eps, out, ld_out};
  return keep(r, run_rmsnorm, &a, sizeof a);
}

static int run_rmsnorms(sc_kernels *in, const void *p) { return in->ops->rmsnorms(in, p); }
static int w_rmsnorms(sc_kernels *k, const sc_rmsnorms *a) {
  recorder *r = rec_of(k);
  return r->recording ? keep(r, run_rmsnorms, a, sizeof *a) : r->in->ops->rmsnorms(r->in, a);
}

typedef struct a_rope {
  int64_t n_tok;
  int32_t n_heads, rot_dim;
  float *x;
  int64_t ld_tok, ld_head;
  const int32_t *pos;
  float theta;
  const double *inv_freq; /* rope_freq */
  float attn_factor;
} a_rope;
static int run_rope(sc_kernels *in, const void *p) {
  const a_rope *a = p;
  return in->ops->rope(in, a->n_tok, a->n_heads, a->rot_dim, a->x, a->ld_tok, a->ld_head, a->pos,
                       a->theta);
}
static int w_rope(sc_kernels *k, int64_t n_tok, int32_t n_heads, int32_t rot_dim, float *x,
                  int64_t ld_tok, int64_t ld_head, const int32_t *pos, float theta) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->rope(r->in, n_tok, n_heads, rot_dim, x, ld_tok, ld_head, pos, theta);
  const a_rope a = {n_tok, n_heads, rot_dim, x, ld_tok, ld_head, pos, theta, NULL, 0};
  return keep(r, run_rope, &a, sizeof a);
}
static int run_rope_freq(sc_kernels *in, const void *p) {
  const a_rope *a = p;
  return in->ops->rope_freq(in, a->n_tok, a->n_heads, a->rot_dim, a->x, a->ld_tok, a->ld_head,
                            a->pos, a->inv_freq, a->attn_factor);
}
static int w_rope_freq(sc_kernels *k, int64_t n_tok, int32_t n_heads, int32_t rot_dim, float *x,
                       int64_t ld_tok, int64_t ld_head, const int32_t *pos,
                       const double *inv_freq, float attn_factor) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->rope_freq(r->in, n_tok, n_heads, rot_dim, x, ld_tok, ld_head, pos,
                                 inv_freq, attn_factor);
  const a_rope a = {n_tok, n_heads, rot_dim, x, ld_tok, ld_head, pos, 0, inv_freq, attn_factor};
  return keep(r, run_rope_freq, &a, sizeof a);
}

static int run_ropes(sc_kernels *in, const void *p) { return in->ops->ropes(in, p); }
static int w_ropes(sc_kernels *k, const sc_ropes *a) {
  recorder *r = rec_of(k);
  return r->recording ? keep(r, run_ropes, a, sizeof *a) : r->in->ops->ropes(r->in, a);
}

typedef struct a_layernorm {
  int64_t n_rows, dim;
  const float *x;
  int64_t ld_x;
  const float *w, *b;
  float eps;
  float *out;
  int64_t ld_out;
} a_layernorm;
static int run_layernorm(sc_kernels *in, const void *p) {
  const a_layernorm *a = p;
  return in->ops->layernorm(in, a->n_rows, a->dim, a->x, a->ld_x, a->w, a->b, a->eps, a->out,
                            a->ld_out);
}
static int w_layernorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x, int64_t ld_x,
                       const float *w, const float *b, float eps, float *out, int64_t ld_out) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->layernorm(r->in, n_rows, dim, x, ld_x, w, b, eps, out, ld_out);
  const a_layernorm a = {n_rows, dim, x, ld_x, w, b, eps, out, ld_out};
  return keep(r, run_layernorm, &a, sizeof a);
}

typedef struct a_wsum {
  int64_t n_tok;
  int32_t topk;
  int64_t width;
  const float *src;
  int64_t ld_src, src_rows;
  const int32_t *rows;
  const float *weight, *add;
  int64_t ld_add;
  float *out;
  int64_t ld_out;
} a_wsum;
static int run_wsum(sc_kernels *in, const void *p) {
  const a_wsum *a = p;
  return in->ops->weighted_sum_rows(in, a->n_tok, a->topk, a->width, a->src, a->ld_src,
                                    a->src_rows, a->rows, a->weight, a->add, a->ld_add, a->out,
                                    a->ld_out);
}
static int w_weighted_sum_rows(sc_kernels *k, int64_t n_tok, int32_t topk, int64_t width,
                               const float *src, int64_t ld_src, int64_t src_rows,
                               const int32_t *rows, const float *weight, const float *add,
                               int64_t ld_add, float *out, int64_t ld_out) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->weighted_sum_rows(r->in, n_tok, topk, width, src, ld_src, src_rows, rows,
                                         weight, add, ld_add, out, ld_out);
  const a_wsum a = {n_tok, topk, width, src, ld_src, src_rows, rows, weight, add, ld_add, out,
                    ld_out};
  return keep(r, run_wsum, &a, sizeof a);
}

typedef struct a_dequant {
  int32_t mats;
  int64_t rows, cols;
  const uint8_t *q;
  const float *scale;
  int64_t srows, scols;
  int32_t r_off, c_off, block_rows, block_cols;
  float *out;
} a_dequant;
static int run_dequant(sc_kernels *in, const void *p) {
  const a_dequant *a = p;
  return in->ops->dequant_fp8(in, a->mats, a->rows, a->cols, a->q, a->scale, a->srows, a->scols,
                              a->r_off, a->c_off, a->block_rows, a->block_cols, a->out);
}
static int w_dequant_fp8(sc_kernels *k, int32_t mats, int64_t rows, int64_t cols,
                         const uint8_t *q, const float *scale, int64_t srows, int64_t scols,
                         int32_t r_off, int32_t c_off, int32_t block_rows, int32_t block_cols,
                         float *out) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->dequant_fp8(r->in, mats, rows, cols, q, scale, srows, scols, r_off, c_off,
                                   block_rows, block_cols, out);
  const a_dequant a = {mats, rows, cols, q, scale, srows, scols, r_off, c_off, block_rows,
                       block_cols, out};
  return keep(r, run_dequant, &a, sizeof a);
}

typedef struct a_swiglu {
  int64_t n_rows, inter;
  const float *gate;
  int64_t ld_gate;
  const float *up;
  int64_t ld_up;
  float *out;
  int64_t ld_out;
} a_swiglu;
static int run_swiglu(sc_kernels *in, const void *p) {
  const a_swiglu *a = p;
  return in->ops->swiglu(in, a->n_rows, a->inter, a->gate, a->ld_gate, a->up, a->ld_up, a->out,
                         a->ld_out);
}
static int w_swiglu(sc_kernels *k, int64_t n_rows, int64_t inter, const float *gate,
                    int64_t ld_gate, const float *up, int64_t ld_up, float *out, int64_t ld_out) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->swiglu(r->in, n_rows, inter, gate, ld_gate, up, ld_up, out, ld_out);
  const a_swiglu a = {n_rows, inter, gate, ld_gate, up, ld_up, out, ld_out};
  return keep(r, run_swiglu, &a, sizeof a);
}

typedef struct a_add {
  int64_t n_rows, width;
  const float *x;
  int64_t ld_x;
  float *y;
  int64_t ld_y;
} a_add;
static int run_add(sc_kernels *in, const void *p) {
  const a_add *a = p;
  return in->ops->add(in, a->n_rows, a->width, a->x, a->ld_x, a->y, a->ld_y);
}
static int w_add(sc_kernels *k, int64_t n_rows, int64_t width, const float *x, int64_t ld_x,
                 float *y, int64_t ld_y) {
  recorder *r = rec_of(k);
  if (!r->recording) return r->in->ops->add(r->in, n_rows, width, x, ld_x, y, ld_y);
  const a_add a = {n_rows, width, x, ld_x, y, ld_y};
  return keep(r, run_add, &a, sizeof a);
}

typedef struct a_argmax {
  int64_t n, width;
  const float *x;
  int64_t ld;
  int32_t *out;
  float *margin;
} a_argmax;
static int run_argmax(sc_kernels *in, const void *p) {
  const a_argmax *a = p;
  return in->ops->argmax_rows(in, a->n, a->width, a->x, a->ld, a->out, a->margin);
}
typedef struct a_draw {
  int64_t n, width;
  const float *x;
  int64_t ld;
  const float *temperature;
  const uint64_t *seed;
  const int32_t *index;
  int32_t *tokens;
} a_draw;
static int run_draw(sc_kernels *in, const void *p) {
  const a_draw *a = p;
  return in->ops->draw_rows(in, a->n, a->width, a->x, a->ld, a->temperature, a->seed, a->index,
                            a->tokens);
}
static int w_draw_rows(sc_kernels *k, int64_t n, int64_t width, const float *x, int64_t ld,
                       const float *temperature, const uint64_t *seed, const int32_t *index,
                       int32_t *tokens) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->draw_rows(r->in, n, width, x, ld, temperature, seed, index, tokens);
  const a_draw a = {n, width, x, ld, temperature, seed, index, tokens};
  return keep(r, run_draw, &a, sizeof a);
}
static int w_argmax_rows(sc_kernels *k, int64_t n, int64_t width, const float *x, int64_t ld,
                         int32_t *out, float *margin) {
  recorder *r = rec_of(k);
  if (!r->recording) return r->in->ops->argmax_rows(r->in, n, width, x, ld, out, margin);
  const a_argmax a = {n, width, x, ld, out, margin};
  return keep(r, run_argmax, &a, sizeof a);
}

typedef struct a_take {
  int32_t n;
  const int32_t *at, *row, *src;
  int32_t *ids;
} a_take;
static int run_take(sc_kernels *in, const void *p) {
  const a_take *a = p;
  return in->ops->take_tokens(in, a->n, a->at, a->row, a->src, a->ids);
}
static int w_take_tokens(sc_kernels *k, int32_t n, const int32_t *at, const int32_t *row,
                         const int32_t *src, int32_t *ids) {
  recorder *r = rec_of(k);
  if (!r->recording) return r->in->ops->take_tokens(r->in, n, at, row, src, ids);
  const a_take a = {n, at, row, src, ids};
  return keep(r, run_take, &a, sizeof a);
}

typedef struct a_gather {
  int64_t n, width;
  sc_krows src;
  const int32_t *idx;
  sc_krows dst;
} a_gather;
static int run_gather(sc_kernels *in, const void *p) {
  const a_gather *a = p;
  return in->ops->gather_rows(in, a->n, a->width, a->src, a->idx, a->dst);
}
static int w_gather_rows(sc_kernels *k, int64_t n, int64_t width, sc_krows src,
                         const int32_t *idx, sc_krows dst) {
  recorder *r = rec_of(k);
  if (!r->recording) return r->in->ops->gather_rows(r->in, n, width, src, idx, dst);
  const a_gather a = {n, width, src, idx, dst};
  return keep(r, run_gather, &a, sizeof a);
}

typedef struct a_kv_write {
  int64_t n, width;
  const float *src;
  int64_t ld_src;
  const int32_t *slots;
  sc_krows cache;
} a_kv_write;
static int run_kv_write(sc_kernels *in, const void *p) {
  const a_kv_write *a = p;
  return in->ops->kv_write(in, a->n, a->width, a->src, a->ld_src, a->slots, a->cache);
}
static int w_kv_write(sc_kernels *k, int64_t n, int64_t width, const float *src, int64_t ld_src,
                      const int32_t *slots, sc_krows cache) {
  recorder *r = rec_of(k);
  if (!r->recording) return r->in->ops->kv_write(r->in, n, width, src, ld_src, slots, cache);
  const a_kv_write a = {n, width, src, ld_src, slots, cache};
  return keep(r, run_kv_write, &a, sizeof a);
}

typedef struct a_topk_merge {
  int32_t n_tok, n_shards, topk;
  const sc_kcand *cand;
  int32_t *out_pos;
  sc_kcand *out_cand;
} a_topk_merge;
static int run_topk_merge(sc_kernels *in, const void *p) {
  const a_topk_merge *a = p;
  return in->ops->topk_merge(in, a->n_tok, a->n_shards, a->topk, a->cand, a->out_pos,
                             a->out_cand);
}
static int w_topk_merge(sc_kernels *k, int32_t n_tok, int32_t n_shards, int32_t topk,
                        const sc_kcand *cand, int32_t *out_pos, sc_kcand *out_cand) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->topk_merge(r->in, n_tok, n_shards, topk, cand, out_pos, out_cand);
  const a_topk_merge a = {n_tok, n_shards, topk, cand, out_pos, out_cand};
  return keep(r, run_topk_merge, &a, sizeof a);
}

typedef struct a_topk_ws {
  int32_t n_tok, topk;
  const int32_t *pos, *base;
  int32_t shard_rows_total, n, il;
  int32_t *out;
} a_topk_ws;
static int run_topk_ws(sc_kernels *in, const void *p) {
  const a_topk_ws *a = p;
  return in->ops->topk_to_workspace(in, a->n_tok, a->topk, a->pos, a->base, a->shard_rows_total,
                                    a->n, a->il, a->out);
}
static int w_topk_to_workspace(sc_kernels *k, int32_t n_tok, int32_t topk, const int32_t *pos,
                               const int32_t *base, int32_t shard_rows_total, int32_t n,
                               int32_t il, int32_t *out) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->topk_to_workspace(r->in, n_tok, topk, pos, base, shard_rows_total, n, il,
                                         out);
  const a_topk_ws a = {n_tok, topk, pos, base, shard_rows_total, n, il, out};
  return keep(r, run_topk_ws, &a, sizeof a);
}

/* topk_to_slots and cache_keys share their block-table arguments */
typedef struct a_slots {
  int32_t n_tok, topk, n_keys;
  const int32_t *pos, *req, *begin, *end, *bt;
  int32_t max_blocks, block_size, n, il, dcp_rank;
  int32_t *out, *slot;
} a_slots;
static int run_topk_slots(sc_kernels *in, const void *p) {
  const a_slots *a = p;
  return in->ops->topk_to_slots(in, a->n_tok, a->topk, a->pos, a->req, a->bt, a->max_blocks,
                                a->block_size, a->n, a->il, a->dcp_rank, a->out);
}
static int w_topk_to_slots(sc_kernels *k, int32_t n_tok, int32_t topk, const int32_t *pos,
                           const int32_t *req, const int32_t *bt, int32_t max_blocks,
                           int32_t block_size, int32_t n, int32_t il, int32_t dcp_rank,
                           int32_t *out) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->topk_to_slots(r->in, n_tok, topk, pos, req, bt, max_blocks, block_size, n,
                                     il, dcp_rank, out);
  const a_slots a = {.n_tok = n_tok, .topk = topk, .pos = pos, .req = req, .bt = bt,
                     .max_blocks = max_blocks, .block_size = block_size, .n = n, .il = il,
                     .dcp_rank = dcp_rank, .out = out};
  return keep(r, run_topk_slots, &a, sizeof a);
}
static int run_cache_keys(sc_kernels *in, const void *p) {
  const a_slots *a = p; /* (n_tok: the ranges; pos, out: the key list's positions, slots) */
  return in->ops->cache_keys(in, a->n_tok, a->n_keys, a->req, a->begin, a->end, a->bt,
                             a->max_blocks, a->block_size, a->n, a->il, a->dcp_rank, a->out,
                             a->slot);
}
static int w_cache_keys(sc_kernels *k, int32_t n_ranges, int32_t n_keys, const int32_t *req,
                        const int32_t *begin, const int32_t *end, const int32_t *bt,
                        int32_t max_blocks, int32_t block_size, int32_t n, int32_t il,
                        int32_t dcp_rank, int32_t *pos, int32_t *slot) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->cache_keys(r->in, n_ranges, n_keys, req, begin, end, bt, max_blocks,
                                  block_size, n, il, dcp_rank, pos, slot);
  const a_slots a = {.n_tok = n_ranges, .n_keys = n_keys, .req = req, .begin = begin,
                     .end = end, .bt = bt, .max_blocks = max_blocks, .block_size = block_size,
                     .n = n, .il = il, .dcp_rank = dcp_rank, .out = pos, .slot = slot};
  return keep(r, run_cache_keys, &a, sizeof a);
}

typedef struct a_lse {
  int32_t n_shards, shard;
  int64_t n_rows, width;
  const float *lse, *out_in;
  float *out, *lse_out;
} a_lse;
static int run_lse_merge(sc_kernels *in, const void *p) {
  const a_lse *a = p;
  return in->ops->lse_merge(in, a->n_shards, a->n_rows, a->width, a->lse, a->out_in, a->out,
                            a->lse_out);
}
static int w_lse_merge(sc_kernels *k, int32_t n_shards, int64_t n_rows, int64_t width,
                       const float *lse, const float *out_in, float *out, float *lse_out) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->lse_merge(r->in, n_shards, n_rows, width, lse, out_in, out, lse_out);
  const a_lse a = {.n_shards = n_shards, .n_rows = n_rows, .width = width, .lse = lse,
                   .out_in = out_in, .out = out, .lse_out = lse_out};
  return keep(r, run_lse_merge, &a, sizeof a);
}
static int run_lse_scale(sc_kernels *in, const void *p) {
  const a_lse *a = p;
  return in->ops->lse_scale(in, a->n_shards, a->shard, a->n_rows, a->width, a->lse, a->out,
                            a->lse_out);
}
static int w_lse_scale(sc_kernels *k, int32_t n_shards, int32_t shard, int64_t n_rows,
                       int64_t width, const float *lse, float *out, float *lse_out) {
  recorder *r = rec_of(k);
  if (!r->recording)
    return r->in->ops->lse_scale(r->in, n_shards, shard, n_rows, width, lse, out, lse_out);
  const a_lse a = {.n_shards = n_shards, .shard = shard, .n_rows = n_rows, .width = width,
                   .lse = lse, .out = out, .lse_out = lse_out};
  return keep(r, run_lse_scale, &a, sizeof a);
}

static const sc_kernels_ops k_recorder_ops = {
    .destroy = w_destroy,
    .alloc = w_alloc,
    .free = w_free,
    .memset = w_memset,
    .copy = w_copy,
    .sync = w_sync,
    .notify = w_notify,
    .inject_fault = w_inject_fault,
    .mark = w_mark,
    .marks_read = w_marks_read,
    .busy_read = w_busy_read,
    .stamp = w_stamp,
    .stamp_gap = w_stamp_gap,
    .record_begin = w_record_begin,
    .record_end = w_record_end,
    .replay = w_replay,
    .recording_free = w_recording_free,
    .gemm = w_gemm,
    .linears = w_linears,
    .rmsnorm = w_rmsnorm,
    .rmsnorms = w_rmsnorms,
    .rope = w_rope,
    .rope_freq = w_rope_freq,
    .ropes = w_ropes,
    .layernorm = w_layernorm,
    .weighted_sum_rows = w_weighted_sum_rows,
    .dequant_fp8 = w_dequant_fp8,
    .swiglu = w_swiglu,
    .add_rmsnorm = w_add_rmsnorm,
    .add = w_add,
    .gather_rows = w_gather_rows,
    .kv_write = w_kv_write,
    .argmax_rows = w_argmax_rows,
    .draw_rows = w_draw_rows,
    .take_tokens = w_take_tokens,
    .indexer_topk = w_indexer_topk,
    .topk_merge = w_topk_merge,
    .topk_to_workspace = w_topk_to_workspace,
    .topk_to_slots = w_topk_to_slots,
    .cache_keys = w_cache_keys,
    .sparse_attn = w_sparse_attn,
    .lse_merge = w_lse_merge,
    .lse_scale = w_lse_scale,
};

int sc_kernels_recorder_wrap(sc_kernels *inner, sc_kernels **out) {
  *out = NULL;
  if (inner == NULL || inner->ops->record_begin != NULL) return SC_EINVAL;
  /* every op the inner backend has must be one this table forwards */
  const sc_kernels_ops *o = inner->ops;
  if (!o->linears || !o->add_rmsnorm || !o->rope_freq || !o->ropes || !o->rmsnorms || !o->layernorm ||
      !o->weighted_sum_rows || !o->dequant_fp8)
    return SC_ENOTSUP;
  recorder *r = calloc(1, sizeof *r);
  if (r == NULL) return SC_ENOMEM;
  r->in = inner;
  r->k = (sc_kernels){.ops = &k_recorder_ops, .device = inner->device, .impl = r};
  *out = &r->k;
  return 0;
}

/* A kept host call: the function, then a copy of its arguments. */
typedef struct host_call {
  int (*fn)(const void *args);
  max_align_t args[]; /* (aligned for whatever the caller's struct holds) */
} host_call;

static int run_host_call(sc_kernels *in, const void *p) {
  (void)in;
  const host_call *h = p;
  return h->fn(h->args);
}

int sc_kernels_recorder_call(sc_kernels *k, int (*fn)(const void *args), const void *args,
                             size_t size) {
  if (k == NULL || k->ops != &k_recorder_ops || fn == NULL) return SC_EINVAL;
  recorder *r = rec_of(k);
  if (!r->recording) return fn(args);
  host_call *h = malloc(sizeof *h + size);
  if (h == NULL) return fail(r, SC_ENOMEM);
  h->fn = fn;
  memcpy(h->args, args, size);
  const int rc = keep(r, run_host_call, h, sizeof *h + size);
  free(h);
  return rc;
}

int sc_kernels_recorder_invalidate(sc_kernels *k) {
  if (k == NULL || k->ops != &k_recorder_ops) return SC_EINVAL;
  rec_of(k)->epoch++;
  return 0;
}

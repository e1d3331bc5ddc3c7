/* kernels.h - the one compute API of sparsecp: an ops table plus a context.
 *
 * Model code calls every kernel through `k->ops->NAME(k, ...)`, so the same model runs on
 * the CPU reference backend (kernels/cpu/, sc_kernels_cpu_create) and on the CUDA backend
 * (kernels/cuda/, issue 7) without knowing which. The math of every op is normative in
 * SPEC.md §7; docs/kernels.md gives the conventions with examples.
 *
 * Buffers. Every tensor argument is a *buffer pointer*: memory obtained from
 * k->ops->alloc (device memory on CUDA, host memory on the CPU backend), possibly offset
 * by pointer arithmetic in elements (`buf + row * ld + col` is fine; dereferencing is
 * not). Callers never read or write buffer contents directly: they move data with
 * k->ops->copy (host <-> buffer, buffer <-> buffer) and k->ops->memset. Index arrays
 * (int32) are buffers too. Scalars and shapes are passed by value from the host. Ops
 * never read buffer contents on the host to decide what to do, so a CUDA backend can
 * queue them asynchronously; per-op scratch memory belongs to the context.
 *
 * Layout. Row-major everywhere. `ld*` arguments are the distance in *elements* between
 * consecutive rows (tokens); within a row, heads are contiguous and exactly one head
 * width apart. Row sets of KV or index keys (sc_krows) carry their element format.
 *
 * Errors. Every op returns 0 or a negative SC_E* code (base/error.h):
 * SC_EINVAL for impossible shapes or NULL required pointers, SC_ENOTSUP for a format the
 * backend lacks, SC_ERANGE when an index array points outside its row set (the CPU
 * backend checks every index; a GPU backend may report it at the next sync), SC_ENOMEM
 * when scratch cannot grow.
 *
 * Ordering. Ops run in call order on the context's queue (a CUDA stream; on the CPU
 * backend every op has finished when it returns). copy to host returns once the host
 * memory holds the data; sync waits for everything queued.
 *
 * Threads. A context is used by one thread at a time (the executor that owns it). Several
 * contexts may run concurrently in one process (the threaded test harness runs one per
 * rank). The CPU backend's worker threads are private to its context.
 *
 * Ownership. The context owns its scratch and worker threads; buffers from alloc belong
 * to the caller until passed to free; destroy frees the context but not live buffers.
 *
 * Extension. Argument structs may gain fields at the end; initialise them with designated
 * initialisers so new fields start at 0 (their neutral value).
 */
#ifndef SC_KERNELS_H
#define SC_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Element format of KV / index-key rows. Values equal sc_dtype's (coll_types.h) for the
 * formats they share, so a row set can travel through a collective unchanged. */
typedef enum sc_kfmt {
  SC_KFMT_F32 = 0,
  SC_KFMT_BF16 = 1, /* upper 16 bits of an IEEE f32; conversion rounds to nearest even */
  /* DeepSeek-V3.2's fp8 KV rows (SPEC.md §7): a 576-wide MLA row (dc 512 + dr 64) packed
   * into SC_KFP8_DS_MLA_ROW_BYTES bytes: 512 e4m3 values, 4 f32 scales (one per 128
   * values, value = e4m3 * scale), then the 64 rope values as bf16. Not a per-element
   * format: sc_kfmt_size is 0 and an sc_krows of this format counts ld in bytes (at
   * least the row's 656; 4-byte aligned rows: the scales are f32 words). kv_write
   * quantizes into it (sc_kfp8_ds_mla_quantize of fp8_e4m3.h, on every backend the same
   * bytes), sparse_attn reads it, gather_rows converts it to f32 or bf16 rows or copies
   * it to rows of its own format. Value 3: 2 is sc_dtype's W32. */
  SC_KFMT_FP8_DS_MLA = 3,
  /* Index keys in e4m3 with one scale a row, as DeepSeek-V3.2's indexer keeps its keys
   * (SPEC.md §7): `dim` e4m3 bytes, then the f32 scale at byte SC_KFP8_INDEX_SCALE_AT(dim)
   * (dim rounded up to 4). A key is its scale times its e4m3 values, and its indexer
   * score is the scale times the score of its e4m3 values (sc_indexer_args). Not a
   * per-element format: sc_kfmt_size is 0, ld counts bytes (at least
   * SC_KFP8_INDEX_ROW_BYTES(dim); the CUDA backend wants 4-byte aligned rows, and reads
   * 16-byte aligned ones fastest), the op's width is dim. indexer_topk scores it,
   * kv_write quantizes into it (sc_kfp8_index_quantize of fp8_e4m3.h: a power-of-two
   * scale, so that the values are exact) and gather_rows copies it to rows of the same
   * format. */
  SC_KFMT_FP8_INDEX = 4,
} sc_kfmt;

#define SC_KFP8_DS_MLA_ROW_BYTES 656 /* 512 + 4*4 + 64*2 */
#define SC_KFP8_DS_MLA_NOPE 512      /* e4m3 values at byte 0 */
#define SC_KFP8_DS_MLA_TILE 128      /* values a scale */
#define SC_KFP8_DS_MLA_SCALE_AT 512  /* the 4 f32 scales */
#define SC_KFP8_DS_MLA_ROPE_AT 528   /* the 64 bf16 rope values */
#define SC_KFP8_DS_MLA_ROPE 64
#define SC_KFP8_INDEX_SCALE_AT(dim) (((int64_t)(dim) + 3) / 4 * 4)
#define SC_KFP8_INDEX_ROW_BYTES(dim) (SC_KFP8_INDEX_SCALE_AT(dim) + 4)
/* The row step of fp8_index rows in whole 16-byte pieces, which the CUDA indexer stages
 * by cp.async (a 128-value key: 132 bytes, in 144): how the KV cache lays them out. */
#define SC_KFP8_INDEX_ROW_STEP(dim) ((SC_KFP8_INDEX_ROW_BYTES(dim) + 15) / 16 * 16)

/* Bytes per element of a format (0 for an unknown one, and for the fp8 layouts, whose
 * rows are counted in bytes). */
static inline size_t sc_kfmt_size(sc_kfmt fmt) {
  return fmt == SC_KFMT_F32 ? 4 : fmt == SC_KFMT_BF16 ? 2 : 0;
}

/* The bytes of one row of `width` values in fmt (an fp8_ds_mla row's width is its 576, an
 * fp8_index row's the key's dim: SC_KFP8_INDEX_ROW_BYTES, before any padding to a step). */
static inline int64_t sc_kfmt_row_bytes(sc_kfmt fmt, int64_t width) {
  return fmt == SC_KFMT_FP8_DS_MLA ? SC_KFP8_DS_MLA_ROW_BYTES
         : fmt == SC_KFMT_FP8_INDEX ? SC_KFP8_INDEX_ROW_BYTES(width)
                                    : width * (int64_t)sc_kfmt_size(fmt);
}

/* Whether a format's rows are counted in bytes (ld): the fp8 layouts. */
static inline bool sc_kfmt_bytes(sc_kfmt fmt) {
  return fmt == SC_KFMT_FP8_DS_MLA || fmt == SC_KFMT_FP8_INDEX;
}

/* A set of rows in a buffer: row r starts at element r * ld of data. */
typedef struct sc_krows {
  void *data;    /* buffer pointer to element 0 of row 0 */
  sc_kfmt fmt;
  int64_t ld;    /* elements between consecutive rows (bytes for the fp8 layouts) */
  int64_t rows;  /* number of valid rows: every index into the set must be < rows */
} sc_krows;

/* Bytes between consecutive rows of r. */
static inline int64_t sc_krows_stride(const sc_krows *r) {
  return sc_kfmt_bytes(r->fmt) ? r->ld : r->ld * (int64_t)sc_kfmt_size(r->fmt);
}

/* The same rows starting `col` elements further into each row (a column slice, e.g.
 * the index keys stored after the 576 KV values of a workspace row). */
static inline sc_krows sc_krows_col(sc_krows r, int64_t col) {
  r.data = (char *)r.data + col * (int64_t)sc_kfmt_size(r.fmt);
  return r;
}

/* One top-K candidate: what the topk_candidates all-gather carries (SPEC.md §6 entry 4,
 * two 32-bit words per candidate). Padding candidates have pos = -1, score = -inf. */
typedef struct sc_kcand {
  float score;
  int32_t pos;
} sc_kcand;

typedef enum sc_kcopy {
  SC_KCOPY_H2D = 0, /* host memory -> buffer */
  SC_KCOPY_D2H = 1, /* buffer -> host memory */
  SC_KCOPY_D2D = 2, /* buffer -> buffer (ranges must not overlap) */
  /* buffer -> host memory, queued like a kernel: the bytes are in dst once a later
   * `notify` fires or a later `sync` has drained the stream (on the CPU at once). dst
   * must stay valid until then. The CUDA backend reads through pinned memory it owns, so
   * the host never waits here. */
  SC_KCOPY_D2H_DEFERRED = 3,
} sc_kcopy;

/* What the device ran of this process's work between two busy_read calls. */
typedef struct sc_kbusy {
  uint64_t busy_ns; /* the time some kernel, copy or set ran (their union) */
  uint64_t span_ns; /* the first one's start to the last one's end */
  uint64_t idle_before_ns; /* from the last one of the previous read to the first one of
                              this read: how long the device sat idle in between (between
                              two steps: the host's time from one step's end to the next
                              one's first op); 0 on the first read */
  int32_t ops;      /* how many ran */
} sc_kbusy;

/* Timing marks a context holds (kernels ops mark / marks_read). */
#define SC_KMARK_MAX 4096
/* Step stamps a context holds (kernels ops stamp / stamp_gap). */
#define SC_KSTAMP_MAX 8

/* notify callback: every operation queued before it has finished. status is 0, or the
 * first error the kernels reported meanwhile (SC_ERANGE: a bad index on the device).
 * Runs on any thread (CUDA: the driver's callback thread), so it must not call the
 * kernels API; sending a message (sc_node_send) is the intended use. */
typedef void (*sc_knotify_fn)(void *arg, int status);

/* Dense product C = alpha * op(A) * op(B) + beta * C, row-major, op(X) = X or X^T;
 * op(A) is m x k, op(B) is k x n, C is m x n. With batch > 1 it is repeated for
 * b = 0..batch-1 on a + b*stride_a, b + b*stride_b, c + b*stride_c (the per-head W_UK
 * absorption and W_UV projection). CPU: cblas_sgemm; CUDA: cuBLAS. */
typedef struct sc_gemm {
  bool trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
  const float *a;
  int64_t lda, stride_a;
  const float *b;
  int64_t ldb, stride_b;
  float *c;
  int64_t ldc, stride_c;
  int64_t batch; /* 0 or 1: a single product */
} sc_gemm;

/* Linear layers that read one input (the projections of a normed hidden row):
 * out_j[r][0..n_j) = alpha_j * x[r] W_j^T for every part j, W_j row-major [n_j][k] with
 * leading dimension ld_w. `gated` (two parts: gate, then up) is SwiGLU's first half:
 * out_0[r][i] = g / (1 + exp(-g)) * u with g, u part 0's and 1's values, as swiglu
 * computes it; part 1's out is scratch then (its contents are undefined afterwards).
 *
 * One op instead of one gemm a part, because a decode step's products are a few rows
 * each and cost their launches more than their arithmetic (bench/gpu-step.md). CPU: the
 * parts' gemms (and swiglu) in order, exactly what separate calls compute. CUDA: for a
 * few rows one kernel over all parts, whose every output sums its k products in one
 * fixed order whatever the row count, the parts and the launch shape (docs/cuda.md);
 * otherwise the CPU's sequence, on cuBLAS. The outputs must not overlap the input or
 * each other. */
#define SC_LINEARS_MAX 4
typedef struct sc_linear_part {
  const float *w;
  int64_t n, ld_w;
  float alpha;
  float *out;
  int64_t ld_out;
} sc_linear_part;

typedef struct sc_linears {
  int64_t rows, k;
  const float *x;
  int64_t ld_x;
  int32_t n_parts; /* 1..SC_LINEARS_MAX; 2 when gated */
  bool gated;
  sc_linear_part part[SC_LINEARS_MAX];
} sc_linears;

/* Two RMSNorms of the same rows in one op (a layer's q latent and c_kv after their
 * projections: one launch where two took ~4 us each on the GPU): part p exactly as
 * rmsnorm(n_rows, part[p].dim, x, ld_x, w, eps, out, ld_out) alone. Parts must not
 * overlap (each may be in place). */
#define SC_RMSNORMS_MAX 2
typedef struct sc_rmsnorm_part {
  int64_t dim;
  const float *x;
  int64_t ld_x;
  const float *w; /* NULL = ones */
  float *out;
  int64_t ld_out;
} sc_rmsnorm_part;

typedef struct sc_rmsnorms {
  int64_t n_rows;
  float eps;
  int32_t n_parts; /* 0..SC_RMSNORMS_MAX */
  sc_rmsnorm_part part[SC_RMSNORMS_MAX];
} sc_rmsnorms;

/* Several rotary embeddings of the same tokens in one op (a decode step's q, k, index key
 * and index query: one launch where four took ~4 us each on the GPU). Part p rotates
 * part[p].n_heads heads of rot_dim values as the rope op does (rope_freq's when inv_freq
 * is set), each part exactly as the rope op alone would, in place or into its out; parts
 * (and outs) must not overlap. */
#define SC_ROPES_MAX 4
typedef struct sc_rope_part {
  int32_t n_heads, rot_dim;
  float *x;
  int64_t ld_tok, ld_head;
  /* NULL: in place; else the rotated values go here (rows as x's, by these strides) and x
   * is left as it was (the MLA query's rotary part goes straight after its absorbed
   * latent part) */
  float *out;
  int64_t ld_tok_out, ld_head_out;
} sc_rope_part;

typedef struct sc_ropes {
  int64_t n_tok;
  const int32_t *pos;
  float theta;              /* the rope op's, when inv_freq is NULL */
  const double *inv_freq;   /* rope_freq's table (device memory) and factor, or NULL */
  float attn_factor;
  int32_t n_parts;          /* 0..SC_ROPES_MAX */
  sc_rope_part part[SC_ROPES_MAX];
} sc_ropes;

/* Lightning indexer scores and top-K (SPEC.md §7), one query token per row:
 *   score(t, s) = Σ_h w[t,h] * ReLU(<q[t,h], key(s)>)
 * over the keys of token t that satisfy key_pos <= q_pos[t]; the top-K by score, ties to
 * the lower position, fewer candidates than topk -> the rest padded (pos -1, score -inf).
 * Output order is a function of the selected set alone, so every layout lists a set
 * alike: the CPU reference sorts by (score desc, pos asc), CUDA lists by ascending
 * position (no sort: cuda_select.cuh); padding last in both.
 *
 * The keys of token t are the key-list entries e in [key_begin[t], key_end[t]): row
 * key_rows[e] of `keys` (or row e itself when key_rows is NULL) at position key_pos[e].
 * So the same op serves prefill rows over a gathered, deinterleaved workspace (one range
 * per request, identity rows) and decode rows over a rank's local shard (rows = cache
 * slots, positions = global token positions). Positions in one token's range must be
 * distinct. The score of a (t, s) pair does not depend on which other keys are in the
 * list, so shards and the single-rank run rank the same pairs identically. */
typedef struct sc_indexer_args {
  int32_t n_tok, n_heads, dim, topk;
  const float *q;          /* [n_tok][n_heads][dim] index queries, ld_q between tokens */
  int64_t ld_q;
  const float *w;          /* [n_tok][n_heads] head weights (already scaled), ld_w */
  int64_t ld_w;
  const int32_t *q_pos;    /* [n_tok] position of each query token */
  sc_krows keys;           /* index-key rows, dim wide (f32, bf16, or fp8_index: then
                            * score(t, s) is scale(s) times the score of s's e4m3
                            * values, the product rounded once, and each head of q is
                            * first rounded as an fp8_index row would hold it,
                            * sc_kfp8_index_round with its own sc_kfp8_index_scale, as
                            * DeepSeek-V3.2 rounds its index queries) */
  const int32_t *key_rows; /* [key list] row of each entry, or NULL for identity */
  const int32_t *key_pos;  /* [key list] position of each entry */
  const int32_t *key_begin, *key_end; /* [n_tok] range of the key list per token
                                       * (0 <= begin; an empty range if end <= begin) */
  int32_t *out_pos;        /* [n_tok][topk] selected positions, or NULL */
  sc_kcand *out_cand;      /* [n_tok][topk] (score, position), or NULL */
  int32_t max_keys;        /* a bound of every token's range the caller knows on the host
                            * (0: none). It shapes the launch, never what is selected;
                            * a range longer than a nonzero bound is an error (SC_EINVAL,
                            * from the device) where a kernel sizes its buffers by it
                            * (CUDA's dense path of decode steps; its fused path of few
                            * tokens over long ranges where a range outgrows its blocks),
                            * else harmless */
  int32_t keys_shared;     /* a hint the caller knows on the host (0 or 1): consecutive
                            * tokens mostly share their key list (the same key_begin: a
                            * prompt's tokens over their request's keys, not a batch of
                            * decode tokens), so a kernel may score them from keys loaded
                            * once. It shapes the launch, never what is selected: tokens
                            * that do not share are scored apart */
} sc_indexer_args;

/* Sparse MLA attention with absorbed weights (SPEC.md §7), per token t and head h:
 *   s_j = scale * <q[t,h], kv_j> over the selected rows j = sel[t][0..topk) != -1,
 *   out[t,h] = Σ_j softmax(s)_j * c_kv_j   (the first dc values of the row),
 *   lse[t,h] = ln Σ_j exp(s_j)             (natural log)
 * q and KV rows are dc + dr wide ([c_kv ; k_rope]). No selected row: out 0, lse -inf.
 * Prefill (rows of a gathered workspace) and decode (slots of a local KV shard) are the
 * same op; a backend may pick different kernels by shape, by `decode` and by
 * `model_heads`, so results may differ in rounding between decode = true and false: a
 * caller passes the same values for a token in every layout (the forward pass: true for
 * decode rows, which are decode rows whatever P, N, T and batch, and the model's head
 * count, which T does not change while n_heads does). */
typedef struct sc_attn_args {
  int32_t n_tok, n_heads, dc, dr, topk;
  float scale;
  const float *q;      /* [n_tok][n_heads][dc + dr], ld_q between tokens */
  int64_t ld_q;
  sc_krows kv;         /* KV rows, at least dc + dr wide (f32 or bf16) */
  const int32_t *sel;  /* [n_tok][topk] rows of kv, -1 = skip, ld_sel between tokens */
  int64_t ld_sel;
  float *out;          /* [n_tok][n_heads][dc], ld_out between tokens */
  int64_t ld_out;
  float *lse;          /* [n_tok][n_heads], ld_lse between tokens */
  int64_t ld_lse;
  bool decode;         /* the rows are decode tokens (one query of a request each) */
  int32_t model_heads; /* the model's heads over all TP ranks (0: n_heads) */
} sc_attn_args;

typedef struct sc_kernels sc_kernels;
/* A recording of queued ops (record_begin), replayed with replay. Owned by the caller. */
typedef struct sc_krecording sc_krecording;

typedef struct sc_kernels_ops {
  /* ---- context and memory ---- */
  void (*destroy)(sc_kernels *k);
  /* A buffer of `bytes` (aligned to 256 bytes; contents undefined). bytes 0 is allowed
   * and gives a non-NULL pointer that must still be freed. */
  int (*alloc)(sc_kernels *k, size_t bytes, void **out);
  void (*free)(sc_kernels *k, void *buf);
  int (*memset)(sc_kernels *k, void *buf, int value, size_t bytes);
  int (*copy)(sc_kernels *k, void *dst, const void *src, size_t bytes, sc_kcopy kind);
  int (*sync)(sc_kernels *k);
  /* Calls fn(arg, status) once every operation queued so far has finished, without
   * making the caller wait (CUDA: a stream callback, also called after a device error,
   * with status SC_EDEVICE: the context is unusable from then on; CPU: at once, on the
   * calling thread, since every op has finished when it returns). Deferred copies
   * queued before it have landed when fn runs (not after a device error). Two notifies
   * may be outstanding at once (a step queued while the one before runs); a third call
   * waits for the first's fn to have run. */
  int (*notify)(sc_kernels *k, sc_knotify_fn fn, void *arg);
  /* Fault injection (`--inject devfault`): the device fails as it does when a kernel
   * faults. CUDA: queues a kernel that stores to an illegal address, which leaves the
   * context unusable; CPU: every later sync and notify reports SC_EDEVICE. */
  int (*inject_fault)(sc_kernels *k);
  /* Timing marks, for the per-stage profile of a step (model/step_prof.h). mark(k, i)
   * records mark i (0 <= i < SC_KMARK_MAX) in queue order: the moment every operation
   * queued before it has finished (CUDA: an event on the stream, so the time between
   * two marks is the stream's, waits for collectives included; CPU: the clock when it is
   * called, since ops have finished when they return). Marks are reused: mark i
   * overwrites the last mark i. marks_read writes, for marks 0..n-1 recorded since,
   * their times in ns after mark 0; call it once the work queued before mark n-1 has
   * finished (after notify fired, or sync). */
  int (*mark)(sc_kernels *k, int32_t i);
  int (*marks_read)(sc_kernels *k, int32_t n, uint64_t *ns);
  /* What the device ran of this process's work since the last call (the first: since
   * marks were first recorded), once that work has finished, as marks_read (sc_kbusy);
   * span - busy are the gaps in which nothing ran (the device waiting for launches; a
   * collective waiting for peers counts as busy), idle_before the gap before the first.
   * SC_ENOTSUP where it cannot be known (CPU, whose ops
   * are the host's own time; CUDA without CUPTI), SC_ENOMEM when records were lost (the
   * numbers then undercount). */
  int (*busy_read)(sc_kernels *k, sc_kbusy *out);
  /* Step stamps, for the device's idle time between two steps (sc_forward_gap).
   * stamp(k, i) records stamp i (0 <= i < SC_KSTAMP_MAX) in queue order, as mark does,
   * but apart from the profile: marks begin CUPTI's tracing, which slows the host's CUDA
   * calls, so they are for profiled steps; a stamp is one event, cheap enough for every
   * step. stamp_gap(k, i, j, &ns): the time from stamp i to stamp j (negative when j came
   * first), once the work queued before both has finished: SC_EAGAIN before, SC_EINVAL
   * for a stamp never recorded. Not recordable: SC_EAGAIN while recording, as a copy
   * from the host. CPU: the clock when stamp is called, since the ops before it have
   * finished. */
  int (*stamp)(sc_kernels *k, int32_t i);
  int (*stamp_gap)(sc_kernels *k, int32_t i, int32_t j, int64_t *ns);
  /* Recordings (CUDA graphs): the ops queued between record_begin and record_end are
   * recorded, not run; replay queues them again, as one launch, exactly as they were
   * called: the same buffers (read and written as they are when the replay runs), the
   * same scalars and shapes, the same marks. A step whose shapes repeat (decode) is
   * recorded once and replayed, which spares the host one launch per op and the device
   * the gaps between them.
   *
   * Not recordable: copies from or to host memory, sync, notify, alloc and free, and any
   * op that would need more scratch than the context has. Such a call fails while
   * recording, and so does record_end, with SC_EAGAIN: none of the ops ran; queue them
   * again without recording (an unrecorded op grows the scratch it needs, so a second
   * recording of the same ops may succeed). An op that fails for another reason (its
   * arguments) may return before it reaches the device: a recording is whole only when
   * every op queued into it returned 0, and the caller discards it otherwise.
   *
   * A recording holds the context's scratch addresses: replay answers SC_EAGAIN without
   * queueing anything once scratch has moved since (another shape needed more); record
   * again. The caller keeps its own buffers in place while a recording of them lives.
   * NULL on backends without recordings (CPU: ops run as they are called). */
  int (*record_begin)(sc_kernels *k);
  int (*record_end)(sc_kernels *k, sc_krecording **out);
  int (*replay)(sc_kernels *k, sc_krecording *r);
  void (*recording_free)(sc_kernels *k, sc_krecording *r); /* NULL is a no-op */

  /* ---- dense ---- */
  int (*gemm)(sc_kernels *k, const sc_gemm *g);
  int (*linears)(sc_kernels *k, const sc_linears *a);

  /* ---- elementwise (out may equal the input for in-place use) ---- */
  /* out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w   (w: [dim] buffer, NULL = ones) */
  int (*rmsnorm)(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x, int64_t ld_x,
                 const float *w, float eps, float *out, int64_t ld_out);
  /* The parts of a, each as rmsnorm would normalise it. */
  int (*rmsnorms)(sc_kernels *k, const sc_rmsnorms *a);
  /* Rotary embedding in place on x[t, h, 0..rot_dim), interleaved pairs: pair i is
   * (x[2i], x[2i+1]), rotated by angle pos[t] * theta^(-2i/rot_dim) (DeepSeek's rope
   * layout). Head h of token t starts at x + t*ld_tok + h*ld_head; rot_dim even. */
  int (*rope)(sc_kernels *k, int64_t n_tok, int32_t n_heads, int32_t rot_dim, float *x,
              int64_t ld_tok, int64_t ld_head, const int32_t *pos, float theta);
  /* rope with the frequencies given instead of theta (a DeepSeek-V3.2 checkpoint's YaRN
   * table, model/yarn.h): pair i of token t rotates by pos[t] * inv_freq[i] (a buffer of
   * rot_dim/2 doubles, read by the device), and both rotated values are multiplied by
   * attn_factor (transformers' attention_scaling: 1 for plain RoPE and for every released
   * DeepSeek config). With inv_freq[i] = theta^(-2i/rot_dim) and factor 1 it is rope.
   * NULL on backends without it: a checkpoint model needs it. */
  int (*rope_freq)(sc_kernels *k, int64_t n_tok, int32_t n_heads, int32_t rot_dim, float *x,
                   int64_t ld_tok, int64_t ld_head, const int32_t *pos,
                   const double *inv_freq, float attn_factor);
  /* The parts of r, each as rope (or rope_freq, with r->inv_freq) would rotate it. */
  int (*ropes)(sc_kernels *k, const sc_ropes *r);
  /* LayerNorm: out[r] = (x[r] - mean) / sqrt(var + eps) * w + b, var the biased variance
   * (torch.nn.LayerNorm), statistics in double; w, b: [dim] buffers (NULL = ones, zeros).
   * The lightning indexer's key norm. NULL on backends without it. */
  int (*layernorm)(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x, int64_t ld_x,
                   const float *w, const float *b, float eps, float *out, int64_t ld_out);
  /* out[t] = (Σ_{i<topk} weight[t*topk+i] * src[rows[t*topk+i]]) + add[t], in f32, the
   * sum started from 0 and taken in i order, add[t] (NULL = none) added last; rows = -1
   * contributes nothing; rows index src (src_rows of them, width wide, ld_src apart).
   * The MoE combine of model/moe_route.h (sc_moe_combine's order): src holds the routed
   * experts' outputs, add the shared expert's. out must not overlap src. NULL on backends
   * without it. */
  int (*weighted_sum_rows)(sc_kernels *k, int64_t n_tok, int32_t topk, int64_t width,
                           const float *src, int64_t ld_src, int64_t src_rows,
                           const int32_t *rows, const float *weight, const float *add,
                           int64_t ld_add, float *out, int64_t ld_out);
  /* fp8 weights kept resident, expanded to f32 before their layer runs (model/weights.h):
   * `mats` matrices of [rows, cols] e4m3 bytes (kernels/fp8_e4m3.h) stored one after the
   * other, each with its block scales, f32 [srows, scols] one table after the other;
   * element (r, c) of matrix m is e4m3(q) * scale[(r + r_off) / block_rows][(c + c_off) /
   * block_cols] of that matrix (r_off, c_off: where a TP slice starts inside its first
   * scale block), the product in f32, written to out (mats x rows x cols, dense): the
   * very floats the host's dequantization (model/fp8_block.h) gives. NULL on backends
   * without it. */
  int (*dequant_fp8)(sc_kernels *k, int32_t mats, int64_t rows, int64_t cols,
                     const uint8_t *q, const float *scale, int64_t srows, int64_t scols,
                     int32_t r_off, int32_t c_off, int32_t block_rows, int32_t block_cols,
                     float *out);
  /* out[r][i] = silu(gate[r][i]) * up[r][i], silu(x) = x / (1 + exp(-x)), i < inter. */
  int (*swiglu)(sc_kernels *k, int64_t n_rows, int64_t inter, const float *gate,
                int64_t ld_gate, const float *up, int64_t ld_up, float *out,
                int64_t ld_out);
  /* y[r] += x[r] (the residual add). */
  int (*add)(sc_kernels *k, int64_t n_rows, int64_t width, const float *x, int64_t ld_x,
             float *y, int64_t ld_y);
  /* add, then rmsnorm of the sums: y[r] += x[r]; out[r] = rmsnorm(y[r]) with w and eps
   * (the residual add and the norm of the next sublayer, one launch on CUDA; out may
   * equal y, not x). */
  int (*add_rmsnorm)(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x, int64_t ld_x,
                     float *y, int64_t ld_y, const float *w, float eps, float *out,
                     int64_t ld_out);

  /* ---- rows: gather, KV write ---- */
  /* dst row i = src row idx[i] (width elements), converting between formats; idx NULL =
   * identity (a strided 2-D copy); idx[i] = -1 gives a zero row. Serves embedding lookup
   * (token ids into the f32 table), shard packing, and the workspace deinterleave
   * (idx = sc_plan_fill_deinterleave's output); fp8_index keys copied as they are
   * into fp8_index rows only (SC_KFP8_INDEX_ROW_BYTES(width) bytes a row; a -1 gives a
   * row of zero bytes, scale 0; kv_write makes them). dst.rows >= n; dst must not
   * overlap src. */
  int (*gather_rows)(sc_kernels *k, int64_t n, int64_t width, sc_krows src,
                     const int32_t *idx, sc_krows dst);
  /* KV write by slot mapping: cache row slots[i] = src row i (f32, converted to the
   * cache's format, fp8_index quantized), slots[i] = -1 skips the row (a token this DCP
   * rank does not own, or a non-owner PCP copy). Slots other than -1 must be distinct
   * (rows run in parallel). */
  int (*kv_write)(sc_kernels *k, int64_t n, int64_t width, const float *src,
                  int64_t ld_src, const int32_t *slots, sc_krows cache);
  /* The greedy choice of n rows of logits: out[r] = the index of the largest of row r's
   * width values (row r at x + r * ld), the lowest index among equal ones, a NaN below
   * every number (a row of NaN gives 0): model/sampling.h's sc_logits_top2 rule, so that
   * the host and the device name the same token. margin (NULL: not wanted): margin[r] =
   * the largest value less the second largest (an equal value counts as second, NaN
   * never counts; 0 for a zero difference or a row of one value), sc_logits_top2's
   * margin to the bit, so that a greedy request needs no logits on the host. */
  int (*argmax_rows)(sc_kernels *k, int64_t n, int64_t width, const float *x, int64_t ld,
                     int32_t *out, float *margin);
  /* Draws at a temperature: tokens[r], on entry row r's greedy token (argmax_rows'),
   * becomes the token drawn from softmax(row r / temperature[r]) with the stream of
   * (seed[r], index[r]) where temperature[r] > 0: model/sampling.h's
   * sc_sample_temperature to the bit (base/tempered_draw.h), so that a request drawn at a
   * temperature needs no logits on the host either. Rows at temperature 0 keep theirs. */
  int (*draw_rows)(sc_kernels *k, int64_t n, int64_t width, const float *x, int64_t ld,
                   const float *temperature, const uint64_t *seed, const int32_t *index,
                   int32_t *tokens);
  /* ids[at[j]] = src[row[j]] for j < n: a step planned ahead takes some of its input
   * tokens from the greedy choices (argmax_rows) of the step before it, without a trip
   * to the host (docs/pipeline.md, "Overlapped steps"). The at[j] must be distinct. */
  int (*take_tokens)(sc_kernels *k, int32_t n, const int32_t *at, const int32_t *row,
                     const int32_t *src, int32_t *ids);

  /* ---- sparse attention path ---- */
  int (*indexer_topk)(sc_kernels *k, const sc_indexer_args *a);
  /* Global top-K from the candidates of n_shards DCP ranks, gathered rank-major:
   * cand[(r * n_tok + t) * topk + i], in any order. Same output order and tie rule as
   * indexer_topk; padding (pos -1) is ignored. Writes out_pos and/or out_cand
   * ([n_tok][topk]; either NULL). */
  int (*topk_merge)(sc_kernels *k, int32_t n_tok, int32_t n_shards, int32_t topk,
                    const sc_kcand *cand, int32_t *out_pos, sc_kcand *out_cand);
  /* Top-K positions -> rows of a chunk's context_kv workspace (SPEC.md §5 step 5):
   * out = owner(p) * shard_rows_total + base[t] + j(p), -1 stays -1, with DCP size n and
   * interleave il. With n = 1 this is base[t] + p, the row in a deinterleaved context.
   * out may equal pos. */
  int (*topk_to_workspace)(sc_kernels *k, int32_t n_tok, int32_t topk, const int32_t *pos,
                           const int32_t *base, int32_t shard_rows_total, int32_t n,
                           int32_t il, int32_t *out);
  /* Top-K positions -> local KV cache slots of DCP rank dcp_rank (SPEC.md §4): for token t
   * of request req[t] with block table row bt[req[t] * max_blocks ...], a position p owned
   * by this rank maps to bt[p / (B*n)] * B + j(p) - (p / (B*n)) * B; positions owned
   * elsewhere and -1 map to -1. out may equal pos. */
  int (*topk_to_slots)(sc_kernels *k, int32_t n_tok, int32_t topk, const int32_t *pos,
                       const int32_t *req, const int32_t *bt, int32_t max_blocks,
                       int32_t block_size, int32_t n, int32_t il, int32_t dcp_rank,
                       int32_t *out);
  /* The cache key list of a step (plan/metadata.h), built where the indexer reads it: n_ranges
   * request ranges tile [0, n_keys) in order (else SC_ERANGE, as for a missing block;
   * n_keys > 0 with no range is SC_EINVAL); the entries e in [begin[r], end[r]) are
   * this DCP rank's local indices j = e - begin[r] of request req[r]: pos[e] is j's
   * position (plan/dcp.h sc_dcp_position), slot[e] its cache slot in block table row
   * bt[req[r] * max_blocks ...] (SC_ERANGE when that block is missing). A decode step
   * at a 128k context has 1 MB of these arrays, so they are not built on the host and
   * uploaded. */
  int (*cache_keys)(sc_kernels *k, int32_t n_ranges, int32_t n_keys, const int32_t *req,
                    const int32_t *begin, const int32_t *end, const int32_t *bt,
                    int32_t max_blocks, int32_t block_size, int32_t n, int32_t il,
                    int32_t dcp_rank, int32_t *pos, int32_t *slot);
  int (*sparse_attn)(sc_kernels *k, const sc_attn_args *a);
  /* LSE merge over n_shards partial results gathered rank-major (SPEC.md §7):
   * lse[r * n_rows + i], out_in[(r * n_rows + i) * width ...]. NaN/+inf lse count as
   * -inf; m = max (0 if all -inf); L = m + ln Σ exp(lse_r - m);
   * out[i] = Σ_r exp(lse_r - L) * out_r[i], a -inf shard contributing exactly 0 (all
   * -inf: out 0, L -inf). lse_out ([n_rows]) may be NULL. A "row" is one (token, head).
   * out must not overlap out_in. */
  int (*lse_merge)(sc_kernels *k, int32_t n_shards, int64_t n_rows, int64_t width,
                   const float *lse, const float *out_in, float *out, float *lse_out);
  /* The all-reduce form: scales this shard's own partial output in place by
   * exp(lse[shard * n_rows + i] - L_i) (0 for a -inf shard), so that a sum over shards
   * (decode_out all-reduce or reduce-scatter) gives the merged output. */
  int (*lse_scale)(sc_kernels *k, int32_t n_shards, int32_t shard, int64_t n_rows,
                   int64_t width, const float *lse, float *out, float *lse_out);
} sc_kernels_ops;

struct sc_kernels {
  const sc_kernels_ops *ops;
  const char *device; /* "cpu" or "cuda" */
  void *impl;         /* backend state */
};

/* The CPU reference backend: plain C11, fp32 math, dense products through OpenBLAS.
 * `threads` threads (>= 1, the caller included; 1 = the caller alone) split every op by
 * rows, gemm included. The first call sets OpenBLAS to one thread, process-wide
 * (openblas_set_num_threads(1)): its spinning workers beside this pool oversubscribe the
 * cores. Several contexts (one per rank) together should not exceed the cores. Any
 * thread. */
int sc_kernels_cpu_create(sc_kernels **out, int threads);

/* Destroys any backend's context (NULL is a no-op). */
static inline void sc_kernels_destroy(sc_kernels *k) {
  if (k != NULL) k->ops->destroy(k);
}

#endif

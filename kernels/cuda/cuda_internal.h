/* cuda_internal.h - shared state of the CUDA backend (not a public header).
 *
 * sc_kcuda sits behind sc_kernels.impl. The op entry points live in the cuda_*.cu files
 * (one job each) and are collected into the ops table by cuda_ctx.c. Launchers validate
 * arguments on the host, queue kernels on c->stream and return the launch status; they
 * never wait for the device.
 *
 * Scratch: sc_kcuda_scratch gives a stream-ordered device area that grows by
 * cudaFreeAsync + cudaMallocAsync, so a later op may reuse it as soon as the earlier one
 * is queued (both run in stream order). Threads: the context's driving thread only.
 */
#ifndef SC_KERNELS_CUDA_INTERNAL_H
#define SC_KERNELS_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/kernels.h"
#include "kernels/kernels_check.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_kcuda {
  sc_kernels k;
  int num_sms;
  int coop_sms;          /* blocks a cooperative grid may take: num_sms / the ranks whose
                            kernels run beside this context's (sc_kernels_cuda_set_gpu_ranks),
                            at one block an SM (k_rsel_coop, k_idx_fused) */
  int pdl;               /* kernels launched with programmatic dependent launch
                            (sc_kcuda_launch; SPARSECP_CUDA_PDL=0 turns it off) */
  int attn_ws;           /* bf16 and fp8_ds_mla rows at dc 512 take the kernel of
                            warpgroups in roles (cuda_attn_ws.cu); SPARSECP_ATTN_WS=0:
                            k_attn_wg, the baseline of a comparison in one run */
  int attn_cross;        /* ... and over fp8_ds_mla rows of 128-head models, clusters of
                            two blocks that dequantize for each other; SPARSECP_ATTN_CROSS=0:
                            one block a head group */
  int idx_floors;        /* prompts over long lists start each token's threshold at a
                            sampled floor (cuda_indexer.cu): 1, the sample's stride by
                            its rule; SPARSECP_INDEXER_FLOORS=0: off (at 1), =S: stride S */
  int idx_group;         /* the scoring kernel's tokens a group: 0, by tc_choose's rule;
                            SPARSECP_INDEXER_GROUP=G (a power of two up to 32): G at most,
                            whatever the step's token count (a comparison in one run) */
  int idx_few;           /* tokens of fewer than 16 index head rows over rows of 64
                            values score and append a tile in one go
                            (cuda_indexer_few.cuh); SPARSECP_INDEXER_FEW=0: the sums through
                            shared memory, the other side of a comparison in one run */
  int idx_dense;         /* decode-like steps of 64 index heads take the dense path
                            (cuda_indexer_dense.cu); SPARSECP_INDEXER_DENSE=0: the
                            scoring kernel's, the other side of a comparison in one run */
  int idx_share;         /* tokens of one key list that the dense path scores from the
                            same tiles where the caller says tokens share their lists
                            (sc_indexer_args.keys_shared): 0, by the keys' format;
                            SPARSECP_INDEXER_SHARE=1, 2 or 4, the other sides of a
                            comparison in one run */
  int topk_coop;         /* the radix select's passes and gather in one cooperative
                            launch (cuda_topk_radix.cu's k_rsel_coop) where the device
                            has cooperative launches; SPARSECP_TOPK_COOP=0: a launch
                            each, the other side of a comparison in one run */
  int idx_fused;         /* few tokens over long ranges score and select in one
                            cooperative launch (cuda_indexer_fused.cu) where it fits;
                            SPARSECP_INDEXER_FUSED=0: never, the other side of a
                            comparison in one run */
  int idx_merge;         /* how several chunks' survivors of a token are selected
                            (cuda_indexer.cu's tc_merge_by_block): 0 by its rule; 1 by one
                            block a token, 2 by the radix select
                            (SPARSECP_INDEXER_MERGE=block or radix) */
  int topk_wide;         /* a top-K merge of few blocks runs them 1024 threads wide
                            (cuda_topk.cu); SPARSECP_TOPK_WIDE=0: 256 always */
  int readback_kernel;   /* small deferred reads and the notify's flag read by a kernel
                            (cuda_readback.cu) rather than by copies;
                            SPARSECP_CUDA_READBACK=copy: by copies, the other side of a
                            comparison in one run */
  cudaStream_t stream;
  int own_stream;
  void *blas;            /* cublasHandle_t; math mode set at create and by set_tf32 */
  int *err_flag;         /* device int: first SC_E* code raised by a kernel, else 0 */
  void *scratch;         /* device scratch, stream ordered */
  size_t scratch_cap;
  void *stage[2];        /* pinned host staging buffers for H2D / D2H */
  cudaEvent_t stage_ev[2];
  int stage_next;        /* the buffer being filled */
  size_t stage_used;     /* its bytes taken by copies queued since it was last waited for */
  struct sc_kcuda_readback *rb; /* deferred D2H copies and notify (cuda_ctx.c) */
  cudaEvent_t *marks;    /* [SC_KMARK_MAX] timing marks, created at the first use of each */
  cudaEvent_t stamps[SC_KSTAMP_MAX]; /* step stamps, created at the first use of each */
  void *blas_ws;         /* cuBLAS workspace, set once, so that a recorded product never
                            asks cuBLAS to allocate */
  /* recordings (cuda_record.c) */
  uint64_t mem_epoch;    /* bumped whenever scratch moves: older recordings are stale */
  uint64_t rec_epoch;    /* mem_epoch when the current recording began */
  int recording;         /* the stream is capturing (record_begin .. record_end) */
  const char *rec_why;   /* the first call refused while recording (it fails the recording) */
} sc_kcuda;

static inline sc_kcuda *sc_kcuda_of(sc_kernels *k) { return (sc_kcuda *)k->impl; }

/* Maps a CUDA error to an SC_E* code (and logs it). */
int sc_kcuda_err(cudaError_t e, const char *what);
/* The status of the last launch on this thread (cudaGetLastError), as an SC_E* code. */
int sc_kcuda_launched(const char *what);
/* cuda_readback.cu: bytes from the device to pinned host memory, and the error flag to
 * *host and cleared, each by a kernel queued on the stream (0 or an SC_E* code). */
#define SC_KCUDA_READBACK_MAX ((size_t)64 << 10) /* larger reads go by copy */
int sc_kcuda_read_small(sc_kcuda *c, void *host, const void *src, size_t bytes);
int sc_kcuda_flag_take(sc_kcuda *c, int *host);
/* Loads both kernels now (lazy loading would load them at the first notify, waiting for
 * the device's running work then). */
int sc_kcuda_readback_load(void);
/* Device scratch of at least `bytes`, valid for ops queued after this call until the
 * next call; NULL when it cannot grow. */
void *sc_kcuda_scratch(sc_kcuda *c, size_t bytes);

/* Device activity records (cuda_busy.c, CUPTI loaded on first use): start recording
 * (0, or SC_ENOTSUP without CUPTI); what ran since the last read (sc_kbusy: the kernels
 * op busy_read). */
int sc_kcuda_busy_start(void);
int sc_kcuda_busy_read(sc_kbusy *out);
/* Logs (info) the `top` ops that took the most device time since recording began, with
 * their counts: what a profiled process ran, for the next optimization's aim. */
void sc_kcuda_busy_log_ops(int top);

/* The opt-in shared memory limit of one block on sm_90. */
#define SC_KCUDA_SMEM_MAX (227 * 1024)

/* Top-K lists of 64-bit keys (cuda_common.cuh's order; 0 = none), n_lists of K per
 * token at keys[(t * n_lists + l) * K], merged into the top-K of each token in position
 * order (cuda_select.cuh; out_pos and/or out_cand, either NULL). `tree` is scratch of
 * sc_kcuda_topk_tree_bytes(n_tok, n_lists, K) bytes (none needed when that is 0). */
size_t sc_kcuda_topk_tree_bytes(int n_tok, int n_lists, int K);
int sc_kcuda_topk_finish(sc_kcuda *c, int n_tok, int n_lists, int K, const uint64_t *keys,
                         int32_t *out_pos, sc_kcand *out_cand, uint64_t *tree);
/* The indexer's dense path (cuda_indexer_dense.cu): every token's range within
 * a->max_keys <= SC_KCUDA_DENSE_MAX_KEYS keys, 64 index heads of 65-128 values, keys
 * bf16 (w8 false) or fp8_index (w8 true) in 16-byte pieces; cuda_indexer.cu decides. */
#define SC_KCUDA_DENSE_MAX_KEYS 16384
int sc_kcuda_indexer_dense(sc_kcuda *c, const sc_indexer_args *a, bool w8);

/* The indexer's fused path (cuda_indexer_fused.cu): scoring and the radix select in one
 * cooperative launch, for tokens of hp < 16 head rows over f32 or bf16 rows of 64
 * values in 16-byte pieces whose ranges a->max_keys bounds; SC_ENOTSUP where the step
 * does not fit (cuda_indexer.cu then takes the unfused path). */
int sc_kcuda_indexer_fused(sc_kcuda *c, const sc_indexer_args *a, int hp);

/* The top-K (in position order) of tokens whose candidates are many
 * (cuda_topk_radix.cu), selected over many blocks per token. `scratch` is
 * sc_kcuda_topk_radix_bytes(n_tok, K) bytes of device memory; sc_kcuda_topk_radix_begin
 * clears its counts and select state (queued) and gives the per-token
 * counts the producer raises as it appends keys at keys[t * cap ...] (any order, 0 =
 * none); sc_kcuda_topk_radix then selects and writes the top-K. */
size_t sc_kcuda_topk_radix_bytes(int n_tok, int K);
int sc_kcuda_topk_radix_begin(sc_kcuda *c, int n_tok, void *scratch, int **count);
int sc_kcuda_topk_radix(sc_kcuda *c, int n_tok, int64_t cap, int K, const uint64_t *keys,
                        int32_t *out_pos, sc_kcand *out_cand, void *scratch);

/* While recording: notes that `what` cannot be recorded, which fails the recording
 * (record_end answers SC_EAGAIN). No-op when not recording. */
void sc_kcuda_record_refuse(sc_kcuda *c, const char *what);

/* Op entry points. */
int sc_kcuda_record_begin(sc_kernels *k);
int sc_kcuda_record_end(sc_kernels *k, sc_krecording **out);
int sc_kcuda_replay(sc_kernels *k, sc_krecording *r);
void sc_kcuda_recording_free(sc_kernels *k, sc_krecording *r);
int sc_kcuda_inject_fault(sc_kernels *k);
int sc_kcuda_rmsnorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                     int64_t ld_x, const float *w, float eps, float *out, int64_t ld_out);
int sc_kcuda_rope(sc_kernels *k, int64_t n_tok, int32_t n_heads, int32_t rot_dim, float *x,
                  int64_t ld_tok, int64_t ld_head, const int32_t *pos, float theta);
int sc_kcuda_ropes(sc_kernels *k, const sc_ropes *r);
int sc_kcuda_rmsnorms(sc_kernels *k, const sc_rmsnorms *a);
int sc_kcuda_rope_freq(sc_kernels *k, int64_t n_tok, int32_t n_heads, int32_t rot_dim,
                       float *x, int64_t ld_tok, int64_t ld_head, const int32_t *pos,
                       const double *inv_freq, float attn_factor);
int sc_kcuda_layernorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                       int64_t ld_x, const float *w, const float *b, float eps, float *out,
                       int64_t ld_out);
int sc_kcuda_weighted_sum_rows(sc_kernels *k, int64_t n_tok, int32_t topk, int64_t width,
                               const float *src, int64_t ld_src, int64_t src_rows,
                               const int32_t *rows, const float *weight, const float *add,
                               int64_t ld_add, float *out, int64_t ld_out);
int sc_kcuda_dequant_fp8(sc_kernels *k, int32_t mats, int64_t rows, int64_t cols,
                         const uint8_t *q, const float *scale, int64_t srows, int64_t scols,
                         int32_t r_off, int32_t c_off, int32_t block_rows, int32_t block_cols,
                         float *out);
int sc_kcuda_linears(sc_kernels *k, const sc_linears *a);
int sc_kcuda_swiglu(sc_kernels *k, int64_t n_rows, int64_t inter, const float *gate,
                    int64_t ld_gate, const float *up, int64_t ld_up, float *out,
                    int64_t ld_out);
int sc_kcuda_add_rmsnorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                         int64_t ld_x, float *y, int64_t ld_y, const float *w, float eps,
                         float *out, int64_t ld_out);
int sc_kcuda_add(sc_kernels *k, int64_t n_rows, int64_t width, const float *x,
                 int64_t ld_x, float *y, int64_t ld_y);
int sc_kcuda_lse_merge(sc_kernels *k, int32_t n_shards, int64_t n_rows, int64_t width,
                       const float *lse, const float *out_in, float *out, float *lse_out);
int sc_kcuda_lse_scale(sc_kernels *k, int32_t n_shards, int32_t shard, int64_t n_rows,
                       int64_t width, const float *lse, float *out, float *lse_out);
int sc_kcuda_gather_rows(sc_kernels *k, int64_t n, int64_t width, sc_krows src,
                         const int32_t *idx, sc_krows dst);
int sc_kcuda_kv_write(sc_kernels *k, int64_t n, int64_t width, const float *src,
                      int64_t ld_src, const int32_t *slots, sc_krows cache);
int sc_kcuda_topk_to_workspace(sc_kernels *k, int32_t n_tok, int32_t topk,
                               const int32_t *pos, const int32_t *base,
                               int32_t shard_rows_total, int32_t n, int32_t il,
                               int32_t *out);
int sc_kcuda_argmax_rows(sc_kernels *k, int64_t n, int64_t width, const float *x, int64_t ld,
                         int32_t *out, float *margin);
int sc_kcuda_draw_rows(sc_kernels *k, int64_t n, int64_t width, const float *x, int64_t ld,
                       const float *temperature, const uint64_t *seed, const int32_t *index,
                       int32_t *tokens);
int sc_kcuda_take_tokens(sc_kernels *k, int32_t n, const int32_t *at, const int32_t *row,
                         const int32_t *src, int32_t *ids);
int sc_kcuda_cache_keys(sc_kernels *k, int32_t n_ranges, int32_t n_keys, const int32_t *req,
                        const int32_t *begin, const int32_t *end, const int32_t *bt,
                        int32_t max_blocks, int32_t block_size, int32_t n, int32_t il,
                        int32_t dcp_rank, int32_t *pos, int32_t *slot);
int sc_kcuda_topk_to_slots(sc_kernels *k, int32_t n_tok, int32_t topk, const int32_t *pos,
                           const int32_t *req, const int32_t *bt, int32_t max_blocks,
                           int32_t block_size, int32_t n, int32_t il, int32_t dcp_rank,
                           int32_t *out);
int sc_kcuda_indexer_topk(sc_kernels *k, const sc_indexer_args *a);
int sc_kcuda_topk_merge(sc_kernels *k, int32_t n_tok, int32_t n_shards, int32_t topk,
                        const sc_kcand *cand, int32_t *out_pos, sc_kcand *out_cand);
int sc_kcuda_sparse_attn(sc_kernels *k, const sc_attn_args *a);

#ifdef __cplusplus
}
#endif

#endif

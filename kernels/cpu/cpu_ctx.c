/* cpu_ctx.c - the CPU backend's context: memory ops, the worker pool, per-worker
 * scratch and the ops table.
 *
 * "Buffers" are plain aligned host allocations, so copy of any kind is memcpy. The pool
 * keeps threads-1 workers parked on a condition variable; an op publishes a job (a
 * generation number), everyone pulls blocks of items from an atomic counter, and the
 * caller waits until the last worker has left the job. */
#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/fp8_e4m3.h"
#include "kernels/kernels_composed.h"

#define SC_KCPU_MAX_THREADS 256
#define SC_KCPU_ALIGN 256

typedef struct {
  void *p;
  size_t cap;
} kcpu_scratch;

struct sc_kcpu {
  sc_kernels k;
  int threads;
  bool failed;           /* inject_fault: the "device" failed (the caller's thread only) */
  uint64_t *marks;       /* [SC_KMARK_MAX] clock of each mark, allocated at the first */
  uint64_t stamps[SC_KSTAMP_MAX]; /* clock of each stamp (0: none yet) */
  kcpu_scratch *scratch; /* [threads * SC_KCPU_SCRATCH_SLOTS] */

  pthread_t *workers;    /* [threads - 1] */
  int started;           /* workers successfully started */
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  uint64_t gen;          /* job generation; guarded by mu */
  int busy;              /* workers still inside the current job; guarded by mu */
  int quit;

  /* the current job (published under mu, read by workers after they see gen change) */
  sc_kcpu_fn fn;
  void *arg;
  int64_t n, grain;
  atomic_int_fast64_t next;
  atomic_int err;
};

static void run_job(sc_kcpu *c, int worker) {
  for (;;) {
    const int64_t b = atomic_fetch_add(&c->next, c->grain);
    if (b >= c->n) break;
    const int64_t e = b + c->grain < c->n ? b + c->grain : c->n;
    const int rc = c->fn(c->arg, b, e, worker);
    if (rc != 0) {
      int expect = 0;
      atomic_compare_exchange_strong(&c->err, &expect, rc);
      atomic_store(&c->next, c->n); /* stop handing out work */
    }
  }
}

typedef struct {
  sc_kcpu *c;
  int worker;
} worker_arg;

static void *worker_main(void *p) {
  worker_arg wa = *(worker_arg *)p;
  free(p);
  sc_kcpu *c = wa.c;
  uint64_t seen = 0;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (!c->quit && c->gen == seen) pthread_cond_wait(&c->wake, &c->mu);
    if (c->quit) break;
    seen = c->gen;
    pthread_mutex_unlock(&c->mu);
    run_job(c, wa.worker);
    pthread_mutex_lock(&c->mu);
    if (--c->busy == 0) pthread_cond_signal(&c->done);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

int sc_kcpu_parallel(sc_kcpu *c, int64_t n, int64_t grain, sc_kcpu_fn fn, void *arg) {
  if (n <= 0) return 0;
  if (grain < 1) grain = 1;
  if (c->started == 0 || n <= grain) return fn(arg, 0, n, 0);
  pthread_mutex_lock(&c->mu);
  c->fn = fn;
  c->arg = arg;
  c->n = n;
  c->grain = grain;
  atomic_store(&c->next, 0);
  atomic_store(&c->err, 0);
  c->busy = c->started;
  c->gen++;
  pthread_cond_broadcast(&c->wake);
  pthread_mutex_unlock(&c->mu);
  run_job(c, 0);
  pthread_mutex_lock(&c->mu);
  while (c->busy > 0) pthread_cond_wait(&c->done, &c->mu);
  pthread_mutex_unlock(&c->mu);
  return atomic_load(&c->err);
}

int sc_kcpu_threads(const sc_kcpu *c) { return c->threads; }

void *sc_kcpu_scratch(sc_kcpu *c, int worker, int slot, size_t bytes) {
  kcpu_scratch *s = &c->scratch[worker * SC_KCPU_SCRATCH_SLOTS + slot];
  if (bytes <= s->cap && s->p != NULL) return s->p;
  size_t cap = s->cap ? s->cap : 4096;
  while (cap < bytes) cap *= 2;
  void *p = NULL;
  if (posix_memalign(&p, 64, cap) != 0) return NULL;
  free(s->p);
  s->p = p;
  s->cap = cap;
  return p;
}

void sc_kcpu_row_to_f32(const void *src, sc_kfmt fmt, int64_t width, float *dst) {
  if (fmt == SC_KFMT_F32) {
    memcpy(dst, src, (size_t)width * sizeof(float));
  } else if (fmt == SC_KFMT_FP8_DS_MLA) { /* (width is 576: sc_kcheck_rows) */
    sc_kfp8_ds_mla_dequantize(src, dst);
  } else {
    /* blocks of 8 with a fixed trip count so the compiler vectorises the widening */
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= width; i += 8)
      for (int j = 0; j < 8; j++) {
        const uint32_t u = (uint32_t)h[i + j] << 16;
        memcpy(&dst[i + j], &u, sizeof u);
      }
    for (; i < width; i++) dst[i] = sc_bf16_to_f32(h[i]);
  }
}


/* ---- memory ---- */

static int cpu_alloc(sc_kernels *k, size_t bytes, void **out) {
  (void)k;
  *out = NULL;
  const size_t rounded = (bytes + SC_KCPU_ALIGN - 1) / SC_KCPU_ALIGN * SC_KCPU_ALIGN;
  if (rounded < bytes) return SC_ENOMEM;
  void *p = NULL;
  if (posix_memalign(&p, SC_KCPU_ALIGN, rounded ? rounded : SC_KCPU_ALIGN) != 0)
    return SC_ENOMEM;
  *out = p;
  return 0;
}

static void cpu_free(sc_kernels *k, void *buf) {
  (void)k;
  free(buf);
}

static int cpu_memset(sc_kernels *k, void *buf, int value, size_t bytes) {
  (void)k;
  if (bytes == 0) return 0;
  if (buf == NULL) return SC_EINVAL;
  memset(buf, value, bytes);
  return 0;
}

static int cpu_copy(sc_kernels *k, void *dst, const void *src, size_t bytes,
                    sc_kcopy kind) {
  (void)k;
  if ((unsigned)kind > SC_KCOPY_D2H_DEFERRED) return SC_EINVAL;
  if (bytes == 0) return 0;
  if (dst == NULL || src == NULL) return SC_EINVAL;
  memmove(dst, src, bytes);
  return 0;
}

static int cpu_sync(sc_kernels *k) {
  /* every op has finished when it returns */
  return sc_kcpu_of(k)->failed ? SC_EDEVICE : 0;
}

static int cpu_notify(sc_kernels *k, sc_knotify_fn fn, void *arg) {
  if (fn == NULL) return SC_EINVAL;
  fn(arg, cpu_sync(k));
  return 0;
}

static int cpu_inject_fault(sc_kernels *k) {
  sc_kcpu_of(k)->failed = true;
  return 0;
}

static int cpu_mark(sc_kernels *k, int32_t i) {
  sc_kcpu *c = sc_kcpu_of(k);
  if (i < 0 || i >= SC_KMARK_MAX) return SC_EINVAL;
  if (c->marks == NULL && (c->marks = calloc(SC_KMARK_MAX, sizeof *c->marks)) == NULL)
    return SC_ENOMEM;
  c->marks[i] = sc_now_ns(); /* every op queued before has returned, so it has finished */
  return 0;
}

static int cpu_marks_read(sc_kernels *k, int32_t n, uint64_t *ns) {
  const sc_kcpu *c = sc_kcpu_of(k);
  if (n < 0 || n > SC_KMARK_MAX || (n > 0 && (ns == NULL || c->marks == NULL))) return SC_EINVAL;
  for (int32_t i = 0; i < n; i++) ns[i] = c->marks[i] - c->marks[0];
  return 0;
}

static int cpu_stamp(sc_kernels *k, int32_t i) {
  if (i < 0 || i >= SC_KSTAMP_MAX) return SC_EINVAL;
  sc_kcpu_of(k)->stamps[i] = sc_now_ns();
  return 0;
}

static int cpu_stamp_gap(sc_kernels *k, int32_t i, int32_t j, int64_t *ns) {
  const sc_kcpu *c = sc_kcpu_of(k);
  if (i < 0 || i >= SC_KSTAMP_MAX || j < 0 || j >= SC_KSTAMP_MAX || c->stamps[i] == 0 ||
      c->stamps[j] == 0)
    return SC_EINVAL;
  *ns = (int64_t)(c->stamps[j] - c->stamps[i]);
  return 0;
}

static int cpu_busy_read(sc_kernels *k, sc_kbusy *out) {
  (void)k;
  *out = (sc_kbusy){0};
  return SC_ENOTSUP; /* the ops ran on the calling thread: the marks are the whole story */
}

static void cpu_destroy(sc_kernels *k) {
  sc_kcpu *c = sc_kcpu_of(k);
  if (c->started > 0) {
    pthread_mutex_lock(&c->mu);
    c->quit = 1;
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < c->started; i++) pthread_join(c->workers[i], NULL);
  }
  pthread_cond_destroy(&c->done);
  pthread_cond_destroy(&c->wake);
  pthread_mutex_destroy(&c->mu);
  if (c->scratch != NULL)
    for (int i = 0; i < c->threads * SC_KCPU_SCRATCH_SLOTS; i++) free(c->scratch[i].p);
  free(c->scratch);
  free(c->workers);
  free(c->marks);
  free(c);
}

static const sc_kernels_ops k_cpu_ops = {
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset = cpu_memset,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .notify = cpu_notify,
    .inject_fault = cpu_inject_fault,
    .mark = cpu_mark,
    .marks_read = cpu_marks_read,
    .busy_read = cpu_busy_read,
    .stamp = cpu_stamp,
    .stamp_gap = cpu_stamp_gap,
    .gemm = sc_kcpu_gemm,
    .linears = sc_kernels_linears_by_gemm,
    .rmsnorm = sc_kcpu_rmsnorm,
    .rmsnorms = sc_kernels_rmsnorms_by_ops,
    .rope = sc_kcpu_rope,
    .rope_freq = sc_kcpu_rope_freq,
    .ropes = sc_kernels_ropes_by_ops,
    .layernorm = sc_kcpu_layernorm,
    .weighted_sum_rows = sc_kcpu_weighted_sum_rows,
    .swiglu = sc_kcpu_swiglu,
    .dequant_fp8 = sc_kcpu_dequant_fp8,
    .add = sc_kcpu_add,
    .add_rmsnorm = sc_kernels_add_rmsnorm_by_ops,
    .gather_rows = sc_kcpu_gather_rows,
    .kv_write = sc_kcpu_kv_write,
    .argmax_rows = sc_kcpu_argmax_rows,
    .draw_rows = sc_kcpu_draw_rows,
    .take_tokens = sc_kcpu_take_tokens,
    .indexer_topk = sc_kcpu_indexer_topk,
    .topk_merge = sc_kcpu_topk_merge,
    .topk_to_workspace = sc_kcpu_topk_to_workspace,
    .topk_to_slots = sc_kcpu_topk_to_slots,
    .cache_keys = sc_kcpu_cache_keys,
    .sparse_attn = sc_kcpu_sparse_attn,
    .lse_merge = sc_kcpu_lse_merge,
    .lse_scale = sc_kcpu_lse_scale,
};

static pthread_once_t k_blas_once = PTHREAD_ONCE_INIT;
static void blas_single_thread(void) { openblas_set_num_threads(1); }

int sc_kernels_cpu_create(sc_kernels **out, int threads) {
  *out = NULL;
  if (threads < 1 || threads > SC_KCPU_MAX_THREADS) return SC_EINVAL;
  sc_kcpu *c = calloc(1, sizeof *c);
  if (c == NULL) return SC_ENOMEM;
  int rc = SC_ENOMEM;
  c->k.ops = &k_cpu_ops;
  c->k.device = "cpu";
  c->k.impl = c;
  c->threads = threads;
  /* All threading is the context's own: OpenBLAS's workers spin while they wait, and
   * running them beside this pool oversubscribed the cores (sparse attention measured
   * 8x slower on 2 cores). Process-wide; done once, so a context created while another
   * one is inside sgemm does not reconfigure OpenBLAS under it. */
  pthread_once(&k_blas_once, blas_single_thread);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->wake, NULL);
  pthread_cond_init(&c->done, NULL);
  c->scratch = calloc((size_t)threads * SC_KCPU_SCRATCH_SLOTS, sizeof *c->scratch);
  if (c->scratch == NULL) goto fail;
  if (threads > 1) {
    c->workers = calloc((size_t)threads - 1, sizeof *c->workers);
    if (c->workers == NULL) goto fail;
    for (int i = 0; i < threads - 1; i++) {
      worker_arg *wa = malloc(sizeof *wa);
      if (wa == NULL) goto fail;
      *wa = (worker_arg){c, i + 1};
      if (pthread_create(&c->workers[i], NULL, worker_main, wa) != 0) {
        free(wa);
        rc = SC_ESYS;
        goto fail;
      }
      c->started++;
    }
  }
  *out = &c->k;
  return 0;
fail:
  cpu_destroy(&c->k);
  return rc;
}

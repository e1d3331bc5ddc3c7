/* cuda_ctx.c - the CUDA backend's context: device and stream, memory ops through the
 * stream-ordered allocator, pinned staging for host copies, the device error flag,
 * dense products through cuBLAS, and the ops table.
 *
 * Host copies. H2D copies the caller's bytes into a pinned staging buffer, after what
 * earlier copies put there, and queues an async copy from there, so copy returns at once
 * and the caller may reuse its memory. Only when the buffer is full does the other one
 * take over, once the copies that last read it have finished (an event recorded when it
 * was left): a step's dozen small uploads then never wait for the device, where one
 * buffer per copy, alternating, made every upload wait for the one before the last.
 * D2H queues the copy into staging, waits for it and memcpys out.
 *
 * Deferred reads and notify. The executor must not wait for the GPU inside a step: it
 * queues the whole step, then the logits read (SC_KCOPY_D2H_DEFERRED, into a pinned
 * readback area; a read of at most SC_KCUDA_READBACK_MAX bytes by a kernel, as the flag's
 * below, cuda_readback.cu) and a notify. notify queues a read of the error flag (and its reset)
 * and, on a stream of its own that waits for those, a stream callback; when it runs,
 * that function copies every deferred read of its batch (two batches: the next step's
 * may be queued meanwhile) to its destination and calls the caller's function, which
 * sends the executor a message (also after a device error, with SC_EDEVICE:
 * cudaLaunchHostFunc would never run then). The callback runs on the driver's thread and
 * may not call CUDA, which is why the readback bookkeeping is plain memory owned by this
 * file. */
#include <stdatomic.h>
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "kernels/cuda/cuda_internal.h"

#define SC_KCUDA_STAGE_BYTES ((size_t)8 << 20)
#define SC_KCUDA_BLAS_WS_BYTES ((size_t)32 << 20)

/* Errors that leave the context unusable (every later call returns them): SC_EDEVICE,
 * so that a step whose fault surfaced before its notify (a kernel that faulted mid-step:
 * later launches, a staging copy or the notify itself fail, and the executor syncs) is
 * reported as a failed device too, not as one failed step. */
static bool sticky(cudaError_t e) {
  switch (e) {
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchFailure:
  case cudaErrorHardwareStackError:
  case cudaErrorIllegalInstruction:
  case cudaErrorMisalignedAddress:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorECCUncorrectable:
  case cudaErrorAssert:
  case cudaErrorLaunchTimeout:
    return true;
  default:
    return false;
  }
}

int sc_cuda_status(int cuda_error) {
  const cudaError_t e = (cudaError_t)cuda_error;
  if (e == cudaSuccess) return 0;
  return e == cudaErrorMemoryAllocation ? SC_ENOMEM : sticky(e) ? SC_EDEVICE : SC_ESYS;
}

int sc_kcuda_err(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 0;
  SC_ERROR("kernels.cuda", "%s: %s", what, cudaGetErrorString(e));
  return sc_cuda_status((int)e);
}

int sc_kcuda_launched(const char *what) { return sc_kcuda_err(cudaGetLastError(), what); }

static int blas_err(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS) return 0;
  SC_ERROR("kernels.cuda", "%s: cuBLAS status %d", what, (int)s);
  return s == CUBLAS_STATUS_ALLOC_FAILED ? SC_ENOMEM
         : s == CUBLAS_STATUS_INVALID_VALUE ? SC_EINVAL
         : s == CUBLAS_STATUS_NOT_SUPPORTED ? SC_ENOTSUP
                                            : SC_ESYS;
}

int sc_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); /* clear the sticky "no device" error */
    return 0;
  }
  return n;
}

void *sc_kcuda_scratch(sc_kcuda *c, size_t bytes) {
  if (bytes <= c->scratch_cap && c->scratch != NULL) return c->scratch;
  if (c->recording) { /* (the op fails; unrecorded, it grows the scratch) */
    sc_kcuda_record_refuse(c, "scratch growth");
    return NULL;
  }
  c->mem_epoch++; /* recordings that hold the old address are stale from here on */
  size_t cap = c->scratch_cap ? c->scratch_cap : ((size_t)1 << 20);
  while (cap < bytes) cap *= 2;
  if (c->scratch != NULL &&
      sc_kcuda_err(cudaFreeAsync(c->scratch, c->stream), "scratch free") != 0)
    return NULL;
  c->scratch = NULL;
  c->scratch_cap = 0;
  if (sc_kcuda_err(cudaMallocAsync(&c->scratch, cap, c->stream), "scratch alloc") != 0)
    return NULL;
  c->scratch_cap = cap;
  return c->scratch;
}

/* The kernels' error flag: read and clear it (after the stream is idle). */
static int take_flag(sc_kcuda *c) {
  int v = 0;
  int rc = sc_kcuda_err(cudaMemcpy(&v, c->err_flag, sizeof v, cudaMemcpyDeviceToHost),
                        "error flag read");
  if (rc) return rc;
  /* cleared on the context's stream: cudaMemset would go to the legacy default stream,
   * which is not ordered with c->stream (created cudaStreamNonBlocking), so the clear
   * could land after a kernel queued next had raised the flag, and erase that error */
  if (v != 0 &&
      (rc = sc_kcuda_err(cudaMemsetAsync(c->err_flag, 0, sizeof v, c->stream), "flag clear")))
    return rc;
  return v;
}

/* ---- deferred reads and notify ----
 *
 * Two batches of reads, each with its own pinned area, error flag and callback: the reads
 * queued since the last notify go into the open batch, and notify hands it to its
 * callback and opens the other. So a step can be queued (its reads and its notify) while
 * the step before's notify is still pending (an overlapped step, docs/pipeline.md): only
 * a third one waits, for the first's callback (an event recorded after it).
 *
 * The callbacks run on the notify stream, which waits for the compute stream's reads
 * (the event `ready`), not on the compute stream: a stream callback holds its stream
 * until it returns, and on the compute stream the next step, queued behind it, waited
 * for the driver's thread to wake, copy the logits out of the pinned area (4 rows of
 * 32768 f32, 512 KB, for the default model) and send the message. The reads themselves
 * stay on the compute stream: the next step writes the buffers they read. */

typedef struct deferred_read {
  void *dst;
  size_t off, bytes;
} deferred_read;

typedef struct rb_batch {
  uint8_t *area; /* pinned */
  size_t cap, used;
  deferred_read *reads;
  int n, cap_reads;
  int *flag; /* pinned: the error flag as the notify read it */
  sc_knotify_fn fn;
  void *arg;
  cudaEvent_t ready;  /* recorded on the compute stream after the reads and the flag's */
  cudaEvent_t passed; /* recorded on the notify stream after the callback */
  bool no_event;      /* recording `passed` failed: wait for the callback by a sync */
  atomic_int pending; /* a notify of it is queued and has not run yet */
} rb_batch;

struct sc_kcuda_readback {
  rb_batch b[2];
  int open;            /* the batch that takes reads */
  cudaStream_t notify; /* the callbacks' stream (see above) */
};

/* Lands every deferred read of a batch (the stream has passed them) and forgets them. */
static void readback_apply(rb_batch *rb) {
  for (int i = 0; i < rb->n; i++)
    memcpy(rb->reads[i].dst, rb->area + rb->reads[i].off, rb->reads[i].bytes);
  rb->n = 0;
  rb->used = 0;
}

/* A stream callback, not cudaLaunchHostFunc: a host function is never called once the
 * context has a device error (an illegal address in a kernel, a fault in a collective),
 * so the executor would wait for its step_done forever; a callback is called with the
 * error, which fails the step. */
static void CUDART_CB notify_host_fn(cudaStream_t stream, cudaError_t err, void *p) {
  (void)stream;
  rb_batch *rb = p;
  if (err == cudaSuccess) {
    readback_apply(rb);
  } else { /* the reads did not run: forget them, their destinations keep what they had */
    rb->n = 0;
    rb->used = 0;
  }
  const sc_knotify_fn fn = rb->fn;
  void *arg = rb->arg;
  const int status = err != cudaSuccess ? SC_EDEVICE : *rb->flag;
  /* cleared before fn runs: fn's message may make its receiver queue the next notify */
  atomic_store_explicit(&rb->pending, 0, memory_order_release);
  fn(arg, status);
}

/* The open batch, once no notify of it is pending any more (its callback owns it until
 * then). */
static int open_batch(sc_kcuda *c, rb_batch **out) {
  rb_batch *rb = &c->rb->b[c->rb->open];
  *out = rb;
  if (!atomic_load_explicit(&rb->pending, memory_order_acquire)) return 0;
  int rc = rb->no_event ? 0 : sc_kcuda_err(cudaEventSynchronize(rb->passed), "notify wait");
  /* (an event that did not record holds an older, finished moment: the stream then) */
  if (rc == 0 && atomic_load_explicit(&rb->pending, memory_order_acquire))
    rc = sc_kcuda_err(cudaStreamSynchronize(c->rb->notify), "notify wait");
  return rc;
}

static int copy_deferred(sc_kcuda *c, void *dst, const void *src, size_t bytes) {
  rb_batch *rb;
  int rc;
  if ((rc = open_batch(c, &rb))) return rc;
  const size_t off = (rb->used + 255) / 256 * 256;
  if (off + bytes > rb->cap) {
    /* reads already queued point into the old area: land them before replacing it */
    if (rb->n > 0) {
      if ((rc = sc_kcuda_err(cudaStreamSynchronize(c->stream), "readback wait"))) return rc;
      readback_apply(rb);
    }
    /* room for everything queued since the last landing plus this read, so that the
     * next step's reads fit without this wait (growing to `bytes` alone kept the area at
     * 1 MiB: with vocab 129280, every third logits row synced the stream and
     * reallocated the pinned area) */
    const size_t need = off + bytes;
    if (need < bytes) return SC_ENOMEM;
    size_t cap = rb->cap ? rb->cap : ((size_t)1 << 20);
    while (cap < need) {
      if (cap > SIZE_MAX / 2) return SC_ENOMEM;
      cap *= 2;
    }
    if (rb->area) (void)cudaFreeHost(rb->area);
    rb->area = NULL;
    rb->cap = 0;
    if ((rc = sc_kcuda_err(cudaMallocHost((void **)&rb->area, cap), "readback area"))) return rc;
    rb->cap = cap;
    return copy_deferred(c, dst, src, bytes);
  }
  if (rb->n == rb->cap_reads) {
    const int cap = rb->cap_reads ? 2 * rb->cap_reads : 16;
    deferred_read *r = realloc(rb->reads, (size_t)cap * sizeof *r);
    if (r == NULL) return SC_ENOMEM;
    rb->reads = r;
    rb->cap_reads = cap;
  }
  if (c->readback_kernel && bytes <= SC_KCUDA_READBACK_MAX)
    rc = sc_kcuda_read_small(c, rb->area + off, src, bytes);
  else
    rc = sc_kcuda_err(cudaMemcpyAsync(rb->area + off, src, bytes, cudaMemcpyDeviceToHost,
                                      c->stream),
                      "copy d2h deferred");
  if (rc) return rc;
  rb->reads[rb->n++] = (deferred_read){dst, off, bytes};
  rb->used = off + bytes;
  return 0;
}

static int cu_notify(sc_kernels *k, sc_knotify_fn fn, void *arg) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (fn == NULL) return SC_EINVAL;
  if (c->recording) return sc_kcuda_record_refuse(c, "notify"), SC_EAGAIN;
  rb_batch *rb;
  int rc;
  if ((rc = open_batch(c, &rb))) return rc;
  if (c->readback_kernel) {
    if ((rc = sc_kcuda_flag_take(c, rb->flag))) return rc;
  } else if ((rc = sc_kcuda_err(cudaMemcpyAsync(rb->flag, c->err_flag, sizeof(int),
                                                cudaMemcpyDeviceToHost, c->stream),
                                "flag read")) ||
             (rc = sc_kcuda_err(cudaMemsetAsync(c->err_flag, 0, sizeof(int), c->stream),
                                "flag clear"))) {
    return rc;
  }
  rb->fn = fn;
  rb->arg = arg;
  atomic_store_explicit(&rb->pending, 1, memory_order_release);
  cudaStream_t ns = c->rb->notify;
  if ((rc = sc_kcuda_err(cudaEventRecord(rb->ready, c->stream), "notify event")) ||
      (rc = sc_kcuda_err(cudaStreamWaitEvent(ns, rb->ready, 0), "notify wait")) ||
      (rc = sc_kcuda_err(cudaStreamAddCallback(ns, notify_host_fn, rb, 0), "notify"))) {
    atomic_store_explicit(&rb->pending, 0, memory_order_release);
    /* the flag was read and cleared for a callback that will not come: put it back for
     * the caller's sync to see (pinned memory is read when the copy runs, after the read) */
    (void)cudaMemcpyAsync(c->err_flag, rb->flag, sizeof(int), cudaMemcpyHostToDevice, c->stream);
    return rc;
  }
  /* The callback is queued: it will run and call fn, so this returns 0 whatever follows
   * (the caller takes a failure to mean that no callback comes). Without the event,
   * open_batch waits for it by a sync. */
  rb->no_event = cudaEventRecord(rb->passed, ns) != cudaSuccess;
  c->rb->open ^= 1;
  return 0;
}

/* ---- memory ---- */

static int cu_alloc(sc_kernels *k, size_t bytes, void **out) {
  sc_kcuda *c = sc_kcuda_of(k);
  *out = NULL;
  if (c->recording) return sc_kcuda_record_refuse(c, "alloc"), SC_EAGAIN;
  const size_t rounded = (bytes + 255) / 256 * 256;
  if (rounded < bytes) return SC_ENOMEM;
  void *p = NULL;
  int rc = sc_kcuda_err(cudaMallocAsync(&p, rounded ? rounded : 256, c->stream), "alloc");
  if (rc) return rc;
  *out = p;
  return 0;
}

static void cu_free(sc_kernels *k, void *buf) {
  if (buf == NULL) return;
  if (sc_kcuda_of(k)->recording) { /* (the buffer stays: a leak the caller was told of) */
    sc_kcuda_record_refuse(sc_kcuda_of(k), "free");
    SC_ERROR("kernels.cuda", "free while recording: the buffer is not freed");
    return;
  }
  (void)sc_kcuda_err(cudaFreeAsync(buf, sc_kcuda_of(k)->stream), "free");
}

static int cu_memset(sc_kernels *k, void *buf, int value, size_t bytes) {
  if (bytes == 0) return 0;
  if (buf == NULL) return SC_EINVAL;
  return sc_kcuda_err(cudaMemsetAsync(buf, value, bytes, sc_kcuda_of(k)->stream), "memset");
}

/* n <= SC_KCUDA_STAGE_BYTES bytes of staging that no queued copy still reads. */
static int stage_take(sc_kcuda *c, size_t n, uint8_t **at) {
  if (c->stage_used + n > SC_KCUDA_STAGE_BYTES) {
    const int s = c->stage_next;
    int rc;
    if ((rc = sc_kcuda_err(cudaEventRecord(c->stage_ev[s], c->stream), "staging event")) ||
        (rc = sc_kcuda_err(cudaEventSynchronize(c->stage_ev[s ^ 1]), "staging wait")))
      return rc;
    c->stage_next = s ^ 1;
    c->stage_used = 0;
  }
  *at = (uint8_t *)c->stage[c->stage_next] + c->stage_used;
  c->stage_used += (n + 255) / 256 * 256;
  return 0;
}

static int cu_copy(sc_kernels *k, void *dst, const void *src, size_t bytes, sc_kcopy kind) {
  sc_kcuda *c = sc_kcuda_of(k);
  if ((unsigned)kind > SC_KCOPY_D2H_DEFERRED) return SC_EINVAL;
  if (bytes == 0) return 0;
  if (dst == NULL || src == NULL) return SC_EINVAL;
  if (kind == SC_KCOPY_D2D)
    return sc_kcuda_err(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream), "copy d2d");
  /* host memory is read or written when the copy runs, not when a replay runs */
  if (c->recording) return sc_kcuda_record_refuse(c, "copy to or from host memory"), SC_EAGAIN;
  if (kind == SC_KCOPY_D2H_DEFERRED) return copy_deferred(c, dst, src, bytes);
  int rc = 0;
  for (size_t off = 0; off < bytes; off += SC_KCUDA_STAGE_BYTES) {
    const size_t n = bytes - off < SC_KCUDA_STAGE_BYTES ? bytes - off : SC_KCUDA_STAGE_BYTES;
    uint8_t *at;
    if ((rc = stage_take(c, n, &at))) return rc;
    if (kind == SC_KCOPY_H2D) {
      memcpy(at, (const char *)src + off, n);
      if ((rc = sc_kcuda_err(cudaMemcpyAsync((char *)dst + off, at, n, cudaMemcpyHostToDevice,
                                             c->stream),
                             "copy h2d")))
        return rc;
    } else {
      if ((rc = sc_kcuda_err(cudaMemcpyAsync(at, (const char *)src + off, n,
                                             cudaMemcpyDeviceToHost, c->stream),
                             "copy d2h")) ||
          (rc = sc_kcuda_err(cudaStreamSynchronize(c->stream), "copy d2h wait")))
        return rc;
      memcpy((char *)dst + off, at, n);
      c->stage_used = 0; /* the stream is idle: no copy reads staging any more */
    }
  }
  /* the data the caller now holds may be wrong if a kernel before it hit a bad index */
  return kind == SC_KCOPY_D2H ? take_flag(c) : 0;
}

static int cu_sync(sc_kernels *k) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (c->recording) return sc_kcuda_record_refuse(c, "sync"), SC_EAGAIN;
  int rc = sc_kcuda_err(cudaStreamSynchronize(c->stream), "sync");
  if (rc == 0) rc = sc_kcuda_err(cudaStreamSynchronize(c->rb->notify), "sync");
  if (rc) return rc;
  /* every queued notify has run (pending is 0): deferred reads queued since the last one
   * have landed in the open batch's area; copy them out now, so that a caller that syncs
   * instead of notifying (sc_engine_run, the executor when notify failed) gets its data
   * and no later notify writes into a destination that is gone by then */
  readback_apply(&c->rb->b[c->rb->open]);
  return take_flag(c);
}

/* ---- dense ---- */

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands. */
static int cu_gemm(sc_kernels *k, const sc_gemm *g) {
  sc_kcuda *c = sc_kcuda_of(k);
  SC_KCHECK(sc_kcheck_gemm(g));
  cublasHandle_t h = c->blas;
  const cublasOperation_t ob = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t oa = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (g->batch > 1)
    return blas_err(cublasSgemmStridedBatched(
                        h, ob, oa, (int)g->n, (int)g->m, (int)g->k, &g->alpha, g->b,
                        (int)g->ldb, g->stride_b, g->a, (int)g->lda, g->stride_a, &g->beta,
                        g->c, (int)g->ldc, g->stride_c, (int)g->batch),
                    "sgemm batched");
  return blas_err(cublasSgemm(h, ob, oa, (int)g->n, (int)g->m, (int)g->k, &g->alpha, g->b,
                              (int)g->ldb, g->a, (int)g->lda, &g->beta, g->c, (int)g->ldc),
                  "sgemm");
}

/* ---- context ---- */

/* ---- timing marks: events on the stream, created when first used ---- */

static int cu_mark(sc_kernels *k, int32_t i) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (i < 0 || i >= SC_KMARK_MAX) return SC_EINVAL;
  if (c->marks == NULL) {
    if ((c->marks = calloc(SC_KMARK_MAX, sizeof *c->marks)) == NULL) return SC_ENOMEM;
    (void)sc_kcuda_busy_start(); /* profiling began: record what runs (busy_read) */
  }
  if (c->marks[i] == NULL) {
    const int rc = sc_kcuda_err(cudaEventCreate(&c->marks[i]), "mark event");
    if (rc) return rc;
  }
  /* recorded as a node of its own, so that a replay records the event again (a plain
   * record on a capturing stream only orders other streams' work) */
  return sc_kcuda_err(cudaEventRecordWithFlags(c->marks[i], c->stream,
                                               c->recording ? cudaEventRecordExternal : 0),
                      "mark");
}

static int cu_marks_read(sc_kernels *k, int32_t n, uint64_t *ns) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (n < 0 || n > SC_KMARK_MAX || (n > 0 && (ns == NULL || c->marks == NULL))) return SC_EINVAL;
  for (int32_t i = 0; i < n; i++) {
    if (c->marks[i] == NULL) return SC_EINVAL;
    float ms = 0;
    const int rc = i == 0 ? 0 : sc_kcuda_err(cudaEventElapsedTime(&ms, c->marks[0], c->marks[i]),
                                             "mark time");
    if (rc) return rc;
    ns[i] = ms > 0 ? (uint64_t)((double)ms * 1e6) : 0;
  }
  return 0;
}

/* ---- step stamps: events on the stream without the marks' tracing ---- */

static int cu_stamp(sc_kernels *k, int32_t i) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (i < 0 || i >= SC_KSTAMP_MAX) return SC_EINVAL;
  if (c->recording) return sc_kcuda_record_refuse(c, "stamp"), SC_EAGAIN;
  if (c->stamps[i] == NULL) {
    const int rc = sc_kcuda_err(cudaEventCreate(&c->stamps[i]), "stamp event");
    if (rc) return rc;
  }
  return sc_kcuda_err(cudaEventRecord(c->stamps[i], c->stream), "stamp");
}

static int cu_stamp_gap(sc_kernels *k, int32_t i, int32_t j, int64_t *ns) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (i < 0 || i >= SC_KSTAMP_MAX || j < 0 || j >= SC_KSTAMP_MAX || c->stamps[i] == NULL ||
      c->stamps[j] == NULL)
    return SC_EINVAL;
  if (c->recording) return sc_kcuda_record_refuse(c, "stamp gap"), SC_EAGAIN;
  float ms = 0;
  const cudaError_t e = cudaEventElapsedTime(&ms, c->stamps[i], c->stamps[j]);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError(); /* (not sticky: clear it for the next call's check) */
    return SC_EAGAIN;
  }
  const int rc = sc_kcuda_err(e, "stamp gap");
  if (rc == 0) *ns = (int64_t)((double)ms * 1e6);
  return rc;
}

static int cu_busy_read(sc_kernels *k, sc_kbusy *out) {
  (void)k; /* (CUPTI records the whole process: cuda_busy.c) */
  return sc_kcuda_busy_read(out);
}

static void cu_destroy(sc_kernels *k) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (c->recording) { /* a recording left open: drop it */
    sc_krecording *r = NULL;
    (void)sc_kcuda_record_end(k, &r);
    sc_kcuda_recording_free(k, r);
  }
  if (c->stream != NULL) (void)cudaStreamSynchronize(c->stream);
  if (c->rb && c->rb->notify) (void)cudaStreamSynchronize(c->rb->notify); /* queued notifies run */
  if (c->scratch) (void)cudaFreeAsync(c->scratch, c->stream);
  if (c->err_flag) (void)cudaFreeAsync(c->err_flag, c->stream);
  if (c->stream != NULL) (void)cudaStreamSynchronize(c->stream);
  for (int i = 0; i < 2; i++) {
    if (c->stage[i]) (void)cudaFreeHost(c->stage[i]);
    if (c->stage_ev[i]) (void)cudaEventDestroy(c->stage_ev[i]);
  }
  if (c->rb) {
    for (int i = 0; i < 2; i++) {
      rb_batch *rb = &c->rb->b[i];
      if (rb->area) (void)cudaFreeHost(rb->area);
      if (rb->flag) (void)cudaFreeHost(rb->flag);
      if (rb->ready) (void)cudaEventDestroy(rb->ready);
      if (rb->passed) (void)cudaEventDestroy(rb->passed);
      free(rb->reads);
    }
    if (c->rb->notify) (void)cudaStreamDestroy(c->rb->notify);
    free(c->rb);
  }
  if (c->marks) { /* a profiled context: what its device ran, by op */
    sc_kcuda_busy_log_ops(25);
    for (int i = 0; i < SC_KMARK_MAX; i++)
      if (c->marks[i]) (void)cudaEventDestroy(c->marks[i]);
  }
  free(c->marks);
  for (int i = 0; i < SC_KSTAMP_MAX; i++)
    if (c->stamps[i]) (void)cudaEventDestroy(c->stamps[i]);
  if (c->blas) (void)cublasDestroy((cublasHandle_t)c->blas);
  if (c->blas_ws) (void)cudaFree(c->blas_ws);
  if (c->own_stream && c->stream) (void)cudaStreamDestroy(c->stream);
  free(c);
}

static const sc_kernels_ops k_cuda_ops = {
    .destroy = cu_destroy,
    .alloc = cu_alloc,
    .free = cu_free,
    .memset = cu_memset,
    .copy = cu_copy,
    .sync = cu_sync,
    .notify = cu_notify,
    .inject_fault = sc_kcuda_inject_fault,
    .mark = cu_mark,
    .marks_read = cu_marks_read,
    .stamp = cu_stamp,
    .stamp_gap = cu_stamp_gap,
    .busy_read = cu_busy_read,
    .record_begin = sc_kcuda_record_begin,
    .record_end = sc_kcuda_record_end,
    .replay = sc_kcuda_replay,
    .recording_free = sc_kcuda_recording_free,
    .gemm = cu_gemm,
    .linears = sc_kcuda_linears,
    .rmsnorm = sc_kcuda_rmsnorm,
    .rmsnorms = sc_kcuda_rmsnorms,
    .rope = sc_kcuda_rope,
    .rope_freq = sc_kcuda_rope_freq,
    .ropes = sc_kcuda_ropes,
    .layernorm = sc_kcuda_layernorm,
    .weighted_sum_rows = sc_kcuda_weighted_sum_rows,
    .dequant_fp8 = sc_kcuda_dequant_fp8,
    .swiglu = sc_kcuda_swiglu,
    .add = sc_kcuda_add,
    .add_rmsnorm = sc_kcuda_add_rmsnorm,
    .gather_rows = sc_kcuda_gather_rows,
    .kv_write = sc_kcuda_kv_write,
    .argmax_rows = sc_kcuda_argmax_rows,
    .draw_rows = sc_kcuda_draw_rows,
    .take_tokens = sc_kcuda_take_tokens,
    .indexer_topk = sc_kcuda_indexer_topk,
    .topk_merge = sc_kcuda_topk_merge,
    .topk_to_workspace = sc_kcuda_topk_to_workspace,
    .topk_to_slots = sc_kcuda_topk_to_slots,
    .cache_keys = sc_kcuda_cache_keys,
    .sparse_attn = sc_kcuda_sparse_attn,
    .lse_merge = sc_kcuda_lse_merge,
    .lse_scale = sc_kcuda_lse_scale,
};

/* Whether environment variable `name` is 0, off or false (any case). */
static bool env_off(const char *name) {
  const char *v = getenv(name);
  return v && (strcmp(v, "0") == 0 || strcasecmp(v, "off") == 0 || strcasecmp(v, "false") == 0);
}

/* SPARSECP_INDEXER_FLOORS: off (0, off, false), a sample stride (a power of two from 2 to
 * 256), else the rule of cuda_indexer.cu (1). */
static int env_floors(void) {
  if (env_off("SPARSECP_INDEXER_FLOORS")) return 0;
  const char *v = getenv("SPARSECP_INDEXER_FLOORS");
  const int s = v ? atoi(v) : 1;
  return s >= 2 && s <= 256 && (s & (s - 1)) == 0 ? s : 1;
}

/* SPARSECP_INDEXER_GROUP: a power of two from 1 to 32, else the rule (0). */
static int env_group(void) {
  const char *v = getenv("SPARSECP_INDEXER_GROUP");
  const int g = v ? atoi(v) : 0;
  return g >= 1 && g <= 32 && (g & (g - 1)) == 0 ? g : 0;
}

/* SPARSECP_INDEXER_MERGE: block (1), radix (2), else the rule of cuda_indexer.cu (0). */
static int env_merge(void) {
  const char *v = getenv("SPARSECP_INDEXER_MERGE");
  return v == NULL ? 0 : strcmp(v, "block") == 0 ? 1 : strcmp(v, "radix") == 0 ? 2 : 0;
}

/* SPARSECP_INDEXER_SHARE: 1, 2 or 4 tokens a unit of the dense path over shared key
 * lists, else 0: by the keys' format (cuda_indexer_dense.cu's dense_units). */
static int env_share(void) {
  const char *v = getenv("SPARSECP_INDEXER_SHARE");
  const int n = v ? atoi(v) : 0;
  return n == 1 || n == 2 || n == 4 ? n : 0;
}

int sc_kernels_cuda_create(sc_kernels **out, int device, void *stream) {
  *out = NULL;
  if (device < 0) return SC_EINVAL;
  if (device >= sc_cuda_device_count()) return SC_ENOTSUP;
  sc_kcuda *c = calloc(1, sizeof *c);
  if (c == NULL) return SC_ENOMEM;
  c->k.ops = &k_cuda_ops;
  c->k.device = "cuda";
  c->k.impl = c;
  /* programmatic dependent launch (cuda_common.cuh), the attention kernel of warpgroups
   * in roles (cuda_attn_ws.cu) with its clusters over fp8 rows, and the indexer's sampled
   * floors, dense path (and its units of shared keys) and few-heads tile (cuda_indexer.cu) unless
   * switched off, and how the indexer merges a token's chunks (and the radix select's
   * cooperative launch, below): the other sides of comparisons in one run */
  c->pdl = !env_off("SPARSECP_CUDA_PDL");
  c->attn_ws = !env_off("SPARSECP_ATTN_WS");
  c->attn_cross = !env_off("SPARSECP_ATTN_CROSS");
  c->idx_floors = env_floors();
  c->idx_group = env_group();
  c->idx_merge = env_merge();
  c->idx_dense = !env_off("SPARSECP_INDEXER_DENSE");
  c->idx_share = env_share();
  c->idx_few = !env_off("SPARSECP_INDEXER_FEW");
  c->idx_fused = !env_off("SPARSECP_INDEXER_FUSED");
  c->topk_wide = !env_off("SPARSECP_TOPK_WIDE");
  const char *rbk = getenv("SPARSECP_CUDA_READBACK");
  c->readback_kernel = rbk == NULL || strcmp(rbk, "copy") != 0;
  int rc, coop = 0;
  if ((rc = sc_kcuda_err(cudaSetDevice(device), "set device")) ||
      (rc = sc_kcuda_err(cudaDeviceGetAttribute(&c->num_sms, cudaDevAttrMultiProcessorCount,
                                                device),
                         "device attribute")) ||
      (rc = sc_kcuda_err(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device),
                         "device attribute")))
    goto fail;
  c->topk_coop = coop && !env_off("SPARSECP_TOPK_COOP");
  c->coop_sms = c->num_sms;
  if (c->readback_kernel && (rc = sc_kcuda_readback_load())) goto fail;
  if (stream != NULL) {
    c->stream = (cudaStream_t)stream;
  } else {
    if ((rc = sc_kcuda_err(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                           "stream create")))
      goto fail;
    c->own_stream = 1;
  }
  cublasHandle_t h = NULL;
  if ((rc = blas_err(cublasCreate(&h), "cublas create"))) goto fail;
  c->blas = h;
  if ((rc = blas_err(cublasSetStream(h, c->stream), "cublas stream")) ||
      (rc = blas_err(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH), "math mode")))
    goto fail;
  /* cuBLAS's recommended workspace on Hopper: given, it never allocates one itself,
   * which it may not do while the stream is recording */
  if ((rc = sc_kcuda_err(cudaMalloc(&c->blas_ws, SC_KCUDA_BLAS_WS_BYTES), "cublas workspace")) ||
      (rc = blas_err(cublasSetWorkspace(h, c->blas_ws, SC_KCUDA_BLAS_WS_BYTES), "cublas workspace")))
    goto fail;
  for (int i = 0; i < 2; i++) {
    if ((rc = sc_kcuda_err(cudaMallocHost(&c->stage[i], SC_KCUDA_STAGE_BYTES), "pinned")) ||
        (rc = sc_kcuda_err(cudaEventCreateWithFlags(&c->stage_ev[i], cudaEventDisableTiming),
                           "event create")))
      goto fail;
  }
  if ((c->rb = calloc(1, sizeof *c->rb)) == NULL) {
    rc = SC_ENOMEM;
    goto fail;
  }
  if ((rc = sc_kcuda_err(cudaStreamCreateWithFlags(&c->rb->notify, cudaStreamNonBlocking),
                         "notify stream create")))
    goto fail;
  for (int i = 0; i < 2; i++)
    if ((rc = sc_kcuda_err(cudaMallocHost((void **)&c->rb->b[i].flag, sizeof(int)),
                           "pinned flag")) ||
        (rc = sc_kcuda_err(cudaEventCreateWithFlags(&c->rb->b[i].ready, cudaEventDisableTiming),
                           "event create")) ||
        (rc = sc_kcuda_err(cudaEventCreateWithFlags(&c->rb->b[i].passed, cudaEventDisableTiming),
                           "event create")))
      goto fail;
  if ((rc = sc_kcuda_err(cudaMallocAsync((void **)&c->err_flag, sizeof(int), c->stream),
                         "flag alloc")) ||
      (rc = sc_kcuda_err(cudaMemsetAsync(c->err_flag, 0, sizeof(int), c->stream),
                         "flag clear")))
    goto fail;
  *out = &c->k;
  return 0;
fail:
  cu_destroy(&c->k);
  return rc;
}

void *sc_kernels_cuda_stream(sc_kernels *k) { return sc_kcuda_of(k)->stream; }

int sc_kernels_cuda_set_gpu_ranks(sc_kernels *k, int ranks) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (ranks < 1) return SC_EINVAL;
  c->coop_sms = c->num_sms / ranks > 0 ? c->num_sms / ranks : 1;
  c->mem_epoch++; /* (recorded steps hold their grids) */
  return 0;
}

_Static_assert(sizeof(cudaIpcMemHandle_t) == SC_KCUDA_SHARE_HANDLE_BYTES,
               "a CUDA IPC handle's size");

int sc_kernels_cuda_share_alloc(size_t bytes, void **mem,
                                unsigned char handle[SC_KCUDA_SHARE_HANDLE_BYTES]) {
  *mem = NULL;
  if (bytes == 0) return SC_EINVAL;
  void *p = NULL;
  cudaIpcMemHandle_t h;
  int rc = sc_kcuda_err(cudaMalloc(&p, bytes), "shared alloc");
  if (rc == 0) rc = sc_kcuda_err(cudaIpcGetMemHandle(&h, p), "shared handle");
  if (rc) {
    if (p != NULL) (void)cudaFree(p);
    return rc;
  }
  memcpy(handle, &h, sizeof h);
  *mem = p;
  return 0;
}

void sc_kernels_cuda_share_free(void *mem) {
  if (mem != NULL) (void)sc_kcuda_err(cudaFree(mem), "shared free");
}

int sc_kernels_cuda_share_open(const unsigned char handle[SC_KCUDA_SHARE_HANDLE_BYTES],
                               void **mem) {
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, sizeof h);
  *mem = NULL;
  return sc_kcuda_err(cudaIpcOpenMemHandle(mem, h, cudaIpcMemLazyEnablePeerAccess),
                      "shared open");
}

void sc_kernels_cuda_share_close(void *mem) {
  if (mem != NULL) (void)sc_kcuda_err(cudaIpcCloseMemHandle(mem), "shared close");
}

void sc_kernels_cuda_forget_recordings(sc_kernels *k) { sc_kcuda_of(k)->mem_epoch++; }

int sc_kernels_cuda_set_tf32(sc_kernels *k, bool on) {
  sc_kcuda_of(k)->mem_epoch++; /* recorded products keep the mode they were recorded in */
  return blas_err(cublasSetMathMode((cublasHandle_t)sc_kcuda_of(k)->blas,
                                    on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH),
                  "math mode");
}

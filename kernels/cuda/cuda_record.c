/* cuda_record.c - recordings of queued ops as CUDA graphs (kernels.h, record_begin).
 *
 * record_begin puts the context's stream into capture mode: every op queued on it from
 * then on becomes a node of a graph instead of running. record_end ends the capture and
 * instantiates the graph once; replay launches the instance on the stream, which costs
 * the host one call and the device no gaps for launches between the nodes.
 *
 * Capture is thread-local: a call on this thread that cannot be captured (a synchronous
 * copy, a device-wide sync) fails the capture instead of running, while other threads'
 * contexts (ranks sharing the GPU in one process) go on. The ops that touch host memory
 * or allocate check `recording` themselves and refuse (cuda_ctx.c): a copy from host
 * memory would read the caller's bytes at replay time, after the caller has reused them,
 * and an allocation would become the graph's own memory.
 *
 * Scratch. An op that needs more scratch than the context holds while recording gets
 * none (sc_kcuda_scratch notes why), so the recording fails and the caller queues the
 * ops unrecorded, which grows it. Every growth moves the scratch and bumps mem_epoch; a
 * recording made under an older epoch holds the old address and is not replayed. */
#include <stdlib.h>

#include "base/log.h"
#include "kernels/cuda/cuda_internal.h"

struct sc_krecording {
  cudaGraphExec_t exec;
  uint64_t epoch; /* the context's mem_epoch when it was recorded */
};

void sc_kcuda_record_refuse(sc_kcuda *c, const char *what) {
  if (c->recording && c->rec_why == NULL) c->rec_why = what;
}

int sc_kcuda_record_begin(sc_kernels *k) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (c->recording) return SC_EINVAL;
  const int rc = sc_kcuda_err(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal),
                              "record begin");
  if (rc) return rc;
  c->recording = 1;
  c->rec_why = NULL;
  c->rec_epoch = c->mem_epoch;
  return 0;
}

int sc_kcuda_record_end(sc_kernels *k, sc_krecording **out) {
  sc_kcuda *c = sc_kcuda_of(k);
  *out = NULL;
  if (!c->recording) return SC_EINVAL;
  cudaGraph_t g = NULL;
  const cudaError_t e = cudaStreamEndCapture(c->stream, &g);
  c->recording = 0;
  if (e != cudaSuccess || g == NULL || c->rec_why != NULL || c->rec_epoch != c->mem_epoch) {
    /* an invalidated capture leaves its error for cudaGetLastError: not this caller's */
    (void)cudaGetLastError();
    SC_DEBUG("kernels.cuda", "recording not made: %s",
             c->rec_why ? c->rec_why : e != cudaSuccess ? cudaGetErrorString(e) : "scratch moved");
    if (g) (void)cudaGraphDestroy(g);
    return SC_EAGAIN;
  }
  sc_krecording *r = calloc(1, sizeof *r);
  int rc = r == NULL ? SC_ENOMEM : 0;
  if (rc == 0) rc = sc_kcuda_err(cudaGraphInstantiate(&r->exec, g, 0), "record instantiate");
  (void)cudaGraphDestroy(g);
  /* its work set up on the device now, so that the first replay launches as fast as the
   * others */
  if (rc == 0 && (rc = sc_kcuda_err(cudaGraphUpload(r->exec, c->stream), "record upload")) != 0)
    (void)cudaGraphExecDestroy(r->exec);
  if (rc) {
    free(r);
    return rc;
  }
  r->epoch = c->mem_epoch;
  *out = r;
  return 0;
}

int sc_kcuda_replay(sc_kernels *k, sc_krecording *r) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (r == NULL || c->recording) return SC_EINVAL;
  if (r->epoch != c->mem_epoch) return SC_EAGAIN;
  return sc_kcuda_err(cudaGraphLaunch(r->exec, c->stream), "replay");
}

void sc_kcuda_recording_free(sc_kernels *k, sc_krecording *r) {
  (void)k;
  if (r == NULL) return;
  /* (a launched instance may still run: destroying it is allowed, CUDA keeps what the
   * launch needs until it has finished) */
  (void)cudaGraphExecDestroy(r->exec);
  free(r);
}

/* cuda_busy.c - how long the GPU actually ran this process's work (issue 20: a step's
 * GPU-busy share): CUPTI's activity records of kernels, copies and sets, each with its
 * start and end on the device's clock.
 *
 * CUDA events between marks (the stage profile, cu_mark) time the stream, gaps included:
 * a stretch where the device waited for the host to launch the next kernel counts as
 * work. The records time only what ran; their union over a step is its busy time, first
 * start to last end its kernel span, and busy / span the share this measures.
 *
 * CUPTI is loaded with dlopen when profiling first asks for it, so that a machine or a
 * bundle without libcupti only loses this number (SC_ENOTSUP), and the library costs
 * nothing when no profile is taken. Activity recording is process-wide: a process with one
 * kernel context (a node's rank) reads its own work; several contexts in one process
 * would read each other's too (none does that with profiling on).
 *
 * The same records are also counted by op name over the whole run (kernels by name,
 * copies by direction, sets), and with SPARSECP_CUPTI_API=1 the host's CUDA runtime calls
 * too; a profiled context logs both tables when it ends (sc_kcuda_busy_log_ops), for the
 * next optimization's aim (docs/pipeline.md, "What the device ran, by op").
 *
 * Threads: CUPTI hands completed buffers to its own thread (or to the flushing caller),
 * so the records are appended and taken under a mutex. */
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "kernels/cuda/cuda_internal.h"

#define LOG "cuda"
#define BUSY_BUFFER_BYTES (1u << 20) /* a CUPTI activity buffer (records of ~100-200 bytes) */
#define BUSY_MAX_SPANS (1u << 20)    /* records kept between two reads, beyond: dropped */

typedef CUptiResult (*enable_fn)(CUpti_ActivityKind);
typedef CUptiResult (*register_fn)(CUpti_BuffersCallbackRequestFunc,
                                   CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*flush_fn)(uint32_t);
typedef CUptiResult (*next_fn)(uint8_t *, size_t, CUpti_Activity **);

typedef struct busy_span {
  uint64_t start, end;
} busy_span;

/* What ran, by kernel (CUPTI shares one name string among a kernel's records, so the
 * pointer is the key) or by kind of copy: for the log of the device's ops at the end. */
typedef struct busy_op {
  const char *name;
  uint64_t count, ns;
} busy_op;
#define BUSY_OPS 512 /* distinct names kept (open addressing; more share "(other)") */
static const char k_other[] = "(other)";

/* Time by name: open addressing on the name's address (CUPTI's strings live as long as
 * the process's functions; the runtime API's names are static). */
typedef struct op_table {
  busy_op v[BUSY_OPS];
  uint32_t n;
} op_table;

typedef CUptiResult (*cb_name_fn)(CUpti_CallbackDomain, uint32_t, const char **);

static struct {
  pthread_once_t once;
  int state; /* 0 not loaded, 1 recording, SC_E* why not */
  flush_fn flush;
  next_fn next;
  pthread_mutex_t mu;
  busy_span *spans; /* since the last read, in completion order */
  uint32_t n, cap;
  uint64_t dropped; /* records past BUSY_MAX_SPANS (the read then says so) */
  uint64_t last_end; /* the previous read's last end (0: no read had any) */
  op_table ops;    /* the device's kernels, copies and sets */
  op_table api;    /* the host's CUDA runtime calls (SPARSECP_CUPTI_API=1) */
  cb_name_fn cb_name;
} g_busy = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUSY_BUFFER_BYTES);
  *size = *buffer ? BUSY_BUFFER_BYTES : 0;
  *max_records = 0; /* as many as fit */
}

/* Adds one record's time to its name's entry; past BUSY_OPS - 1 names, to "(other)",
 * which always finds the last slot (so the logged total keeps every record). */
static void count_op(op_table *t, const char *name, uint64_t ns) {
  const uintptr_t h = ((uintptr_t)name >> 4) * 0x9E3779B97F4A7C15ull;
  for (uint32_t i = 0; i < BUSY_OPS; i++) {
    busy_op *o = &t->v[(h + i) % BUSY_OPS];
    if (o->name == NULL && (t->n < BUSY_OPS - 1 || name == k_other)) {
      o->name = name;
      t->n++;
    }
    if (o->name == name) {
      o->count++;
      o->ns += ns;
      return;
    }
    if (o->name == NULL) break;
  }
  if (name != k_other) count_op(t, k_other, ns);
}

static void add_span(const char *name, uint64_t start, uint64_t end) {
  if (start == 0 || end <= start) return; /* (a record without its times) */
  count_op(&g_busy.ops, name ? name : "(kernel)", end - start);
  if (g_busy.n == g_busy.cap) {
    const uint32_t cap = g_busy.cap ? 2 * g_busy.cap : 4096;
    busy_span *s = cap <= BUSY_MAX_SPANS ? realloc(g_busy.spans, sizeof *s * cap) : NULL;
    if (s == NULL) {
      g_busy.dropped++;
      return;
    }
    g_busy.spans = s;
    g_busy.cap = cap;
  }
  g_busy.spans[g_busy.n++] = (busy_span){start, end};
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  CUpti_Activity *rec = NULL;
  pthread_mutex_lock(&g_busy.mu);
  while (valid > 0 && g_busy.next(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
      add_span(k->name, k->start, k->end);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
      add_span(m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "(copy host to device)"
               : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "(copy device to host)"
               : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "(copy device to device)"
                                                                : "(copy)",
               m->start, m->end);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
      add_span("(set)", m->start, m->end);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME: { /* a host call: its own table, not a busy span */
      const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)rec;
      const char *name = NULL;
      if (g_busy.cb_name == NULL ||
          g_busy.cb_name(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name) != CUPTI_SUCCESS)
        name = "(runtime call)";
      if (a->end > a->start) count_op(&g_busy.api, name, a->end - a->start);
      break;
    }
    default:
      break;
    }
  }
  pthread_mutex_unlock(&g_busy.mu);
  free(buffer);
}

static void load_cupti(void) {
  /* the toolkit's soname first (what a bundle carries), then any */
  void *lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) lib = dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    SC_INFO(LOG, "no device busy times: cannot load libcupti (%s)", dlerror());
    g_busy.state = SC_ENOTSUP;
    return;
  }
  const enable_fn enable = (enable_fn)dlsym(lib, "cuptiActivityEnable");
  const register_fn reg = (register_fn)dlsym(lib, "cuptiActivityRegisterCallbacks");
  g_busy.flush = (flush_fn)dlsym(lib, "cuptiActivityFlushAll");
  g_busy.next = (next_fn)dlsym(lib, "cuptiActivityGetNextRecord");
  if (!enable || !reg || !g_busy.flush || !g_busy.next ||
      reg(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      enable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
      enable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS) {
    SC_WARN(LOG, "no device busy times: CUPTI activity recording could not be started");
    g_busy.state = SC_ENOTSUP; /* (the library stays loaded: CUPTI may hold callbacks) */
    return;
  }
  /* the host's runtime calls too, on request: they cost every call a record */
  const char *api = getenv("SPARSECP_CUPTI_API");
  if (api != NULL && strcmp(api, "1") == 0) {
    g_busy.cb_name = (cb_name_fn)dlsym(lib, "cuptiGetCallbackName");
    if (enable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS)
      SC_WARN(LOG, "SPARSECP_CUPTI_API: the runtime calls cannot be recorded");
  }
  g_busy.state = 1;
}

int sc_kcuda_busy_start(void) {
  pthread_once(&g_busy.once, load_cupti);
  return g_busy.state == 1 ? 0 : g_busy.state;
}

static int by_start(const void *a, const void *b) {
  const busy_span *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

int sc_kcuda_busy_read(sc_kbusy *out) {
  *out = (sc_kbusy){0};
  const int rc = sc_kcuda_busy_start();
  if (rc) return rc;
  /* forced: the records of work that has finished, also from buffers not yet full */
  if (g_busy.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != CUPTI_SUCCESS) return SC_EIO;
  pthread_mutex_lock(&g_busy.mu);
  const bool lost = g_busy.dropped > 0;
  if (g_busy.n > 0) qsort(g_busy.spans, g_busy.n, sizeof *g_busy.spans, by_start);
  uint64_t busy = 0, cur_start = 0, cur_end = 0;
  for (uint32_t i = 0; i < g_busy.n; i++) { /* the union of the spans */
    const busy_span s = g_busy.spans[i];
    if (i == 0 || s.start > cur_end) {
      busy += cur_end - cur_start;
      cur_start = s.start;
      cur_end = s.end;
    } else if (s.end > cur_end) {
      cur_end = s.end;
    }
  }
  busy += cur_end - cur_start;
  uint64_t last = 0;
  for (uint32_t i = 0; i < g_busy.n; i++)
    if (g_busy.spans[i].end > last) last = g_busy.spans[i].end;
  out->busy_ns = busy;
  if (g_busy.n > 0) {
    const uint64_t first = g_busy.spans[0].start;
    out->span_ns = last - first;
    if (g_busy.last_end != 0 && first > g_busy.last_end) out->idle_before_ns = first - g_busy.last_end;
    g_busy.last_end = last;
  }
  out->ops = (int32_t)(g_busy.n < INT32_MAX ? g_busy.n : INT32_MAX);
  g_busy.n = 0;
  g_busy.dropped = 0;
  pthread_mutex_unlock(&g_busy.mu);
  return lost ? SC_ENOMEM : 0;
}

static int by_time(const void *a, const void *b) {
  const busy_op *x = a, *y = b;
  return x->ns > y->ns ? -1 : x->ns < y->ns;
}

/* Logs (info) one table's `top` names by total time. */
static void log_table(const op_table *t, int top, const char *what) {
  pthread_mutex_lock(&g_busy.mu);
  busy_op *v = malloc(sizeof *v * BUSY_OPS);
  uint32_t n = 0;
  uint64_t count = 0, ns = 0;
  for (uint32_t i = 0; v && i < BUSY_OPS; i++)
    if (t->v[i].name) {
      v[n++] = t->v[i];
      count += t->v[i].count;
      ns += t->v[i].ns;
    }
  pthread_mutex_unlock(&g_busy.mu);
  if (v == NULL || n == 0) {
    free(v);
    return;
  }
  qsort(v, n, sizeof *v, by_time);
  SC_INFO(LOG, "%s: %llu in %.3f ms while profiled; by time (count, ms, mean us, name):", what,
          (unsigned long long)count, (double)ns * 1e-6);
  for (uint32_t i = 0; i < n && (int)i < top; i++)
    SC_INFO(LOG, "  %8llu %10.3f %9.2f  %.120s", (unsigned long long)v[i].count,
            (double)v[i].ns * 1e-6, (double)v[i].ns * 1e-3 / (double)v[i].count, v[i].name);
  free(v);
}

void sc_kcuda_busy_log_ops(int top) {
  if (g_busy.state != 1) return;
  (void)g_busy.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  log_table(&g_busy.ops, top, "the device's kernels, copies and sets");
  log_table(&g_busy.api, top, "the host's CUDA runtime calls");
}

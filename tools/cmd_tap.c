/* cmd_tap.c - `sparsecp tap --connect E [--filter PREFIX] [--json|--record F|--perfetto F]`.
 *
 * Subscribes to a node's (or launch's forwarding) tap. Each tap message is two frames:
 * the topic "<node>/<actor>/<type>" and one or more records, each a 16-byte header
 * (wall-clock ns u64, node i32, length u32; little-endian) followed by the routed
 * message exactly as encoded.
 *   default     one human-readable line per message
 *   --json      one JSON object per line: time_ns, node, topic, type, step, seq, src,
 *               dst, trace_id, body
 *   --record F  writes each message to F (emptied first) as a tap_record message,
 *               4-byte little-endian length first (read back with sc_msg_decode)
 *   --perfetto F writes a Chrome trace (Perfetto / chrome://tracing) when the tap stops:
 *               one process per node, one track per actor, an instant per message, a
 *               slice per step on each actor that saw it, a "stage ms" counter per
 *               node with each profiled step's stage times (step_result.stage_ns), and
 *               a "device gap us" counter with each overlapped step's gap (gap_ns)
 * Stops on SIGINT/SIGTERM, after --count messages or --duration seconds. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "actors/runtime/sc_tap_record.h"
#include "base/clock.h"
#include "base/curve_key.h"
#include "base/jsonw.h"
#include "messages/messages.h"
#include "model/step_prof.h"
#include "tools/cli.h"

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

typedef struct track {
  int32_t node;
  char actor[64];
  int tid;
} track;

typedef struct step_span {
  int tid;
  int32_t node;
  uint64_t step, first_ns, last_ns;
} step_span;

/* An instant event: its time, and its JSON object but for the time, as the text after
 * the object's "{" in perfetto.frags. Times are written at the end, from the earliest
 * record seen: records of several nodes reach a tap out of their time order. */
typedef struct instant {
  uint64_t ns;
  size_t off, len;
} instant;

typedef struct perfetto {
  sc_jsonw scratch; /* one event at a time */
  sc_buf frags;
  instant *evs;
  size_t nevs, capevs;
  track *tracks;
  int ntracks, captracks;
  step_span *spans;
  int nspans, capspans;
  uint64_t t0; /* the earliest record's time */
  bool oom;
} perfetto;

static int track_of(perfetto *p, int32_t node, const char *actor) {
  for (int i = 0; i < p->ntracks; i++)
    if (p->tracks[i].node == node && strcmp(p->tracks[i].actor, actor) == 0) return p->tracks[i].tid;
  if (p->ntracks == p->captracks) {
    p->captracks = p->captracks ? 2 * p->captracks : 16;
    p->tracks = realloc(p->tracks, (size_t)p->captracks * sizeof *p->tracks);
  }
  track *t = &p->tracks[p->ntracks];
  t->node = node;
  snprintf(t->actor, sizeof t->actor, "%s", actor);
  t->tid = ++p->ntracks;
  return t->tid;
}

static void span_touch(perfetto *p, int tid, int32_t node, uint64_t step, uint64_t ns) {
  for (int i = p->nspans - 1; i >= 0 && i >= p->nspans - 64; i--)
    if (p->spans[i].tid == tid && p->spans[i].step == step) {
      if (ns > p->spans[i].last_ns) p->spans[i].last_ns = ns;
      return;
    }
  if (p->nspans == p->capspans) {
    p->capspans = p->capspans ? 2 * p->capspans : 64;
    p->spans = realloc(p->spans, (size_t)p->capspans * sizeof *p->spans);
  }
  p->spans[p->nspans++] = (step_span){tid, node, step, ns, ns};
}

/* Appends the event in p->scratch (its "ts" written later) at time ns. */
static void perfetto_push(perfetto *p, uint64_t ns) {
  sc_jsonw *w = &p->scratch;
  if (p->nevs == p->capevs) {
    const size_t cap = p->capevs ? 2 * p->capevs : 256;
    instant *evs = realloc(p->evs, cap * sizeof *evs);
    if (evs == NULL) {
      p->oom = true;
      return;
    }
    p->evs = evs;
    p->capevs = cap;
  }
  const size_t off = p->frags.len;
  if (sc_jsonw_status(w) != 0 || sc_buf_append(&p->frags, sc_jsonw_str(w) + 1, w->len - 1) != 0) {
    p->oom = true;
    return;
  }
  p->evs[p->nevs++] = (instant){ns, off, w->len - 1};
}

/* Starts a counter sample (ph "C") of track `name` on node's process; its series go in
 * as the args' members, then counter_end. */
static sc_jsonw *counter_begin(perfetto *p, const char *name, int32_t node) {
  sc_jsonw *w = &p->scratch;
  sc_jsonw_reset(w);
  sc_jsonw_obj_begin(w);
  sc_jsonw_kv_str(w, "name", name);
  sc_jsonw_kv_str(w, "ph", "C");
  sc_jsonw_kv_int(w, "pid", node);
  sc_jsonw_key(w, "args");
  sc_jsonw_obj_begin(w);
  return w;
}

static void counter_end(perfetto *p, uint64_t ns) {
  sc_jsonw_obj_end(&p->scratch);
  sc_jsonw_obj_end(&p->scratch);
  perfetto_push(p, ns);
}

/* An overlapped step's device gap (rank 0's step_result.gap_ns, docs/pipeline.md
 * "Overlapped steps") as one sample of a counter track per node, "device gap us". A
 * profiled step's stage times (docs/pipeline.md "Profiling steps") as one sample of a
 * counter track, "stage ms": the step's time per
 * stage in milliseconds, one series a stage. The stages of a step interleave layer by
 * layer on the device, so their totals are shown as values, not as slices in time. What
 * the device ran of the step (CUDA with CUPTI) goes to a second track, "device ms":
 * busy, kernel span, and the idle time before the step's first op. */
static void perfetto_step_counters(perfetto *p, uint64_t ns, int32_t node,
                                   const sc_msg_step_result *r) {
  if (r->gap_ns >= 0 && !p->oom) { /* (1.9: a step queued while the one before ran) */
    sc_jsonw *g = counter_begin(p, "device gap us", node);
    sc_jsonw_kv_double(g, "gap", (double)r->gap_ns * 1e-3);
    counter_end(p, ns);
  }
  if (r->stage_ns.n != SC_STAGE_COUNT) return;
  sc_jsonw *w = counter_begin(p, "stage ms", node);
  for (int i = 0; i < SC_STAGE_COUNT; i++)
    sc_jsonw_kv_double(w, sc_stage_name(i), (double)r->stage_ns.v[i] * 1e-6);
  counter_end(p, ns);
  /* (schema 1.6 nodes send busy, span and ops; 1.7 adds the idle time) */
  if (r->device_ns.n < SC_DEVICE_IDLE_BEFORE_NS || p->oom) return;
  w = counter_begin(p, "device ms", node);
  sc_jsonw_kv_double(w, "busy", (double)r->device_ns.v[SC_DEVICE_BUSY_NS] * 1e-6);
  sc_jsonw_kv_double(w, "span", (double)r->device_ns.v[SC_DEVICE_SPAN_NS] * 1e-6);
  if (r->device_ns.n > SC_DEVICE_IDLE_BEFORE_NS)
    sc_jsonw_kv_double(w, "idle before", (double)r->device_ns.v[SC_DEVICE_IDLE_BEFORE_NS] * 1e-6);
  counter_end(p, ns);
}

static void perfetto_add(perfetto *p, const char *topic, uint64_t ns, int32_t node,
                         const sc_envelope *env, const void *body) {
  if (p->nevs == 0 || ns < p->t0) p->t0 = ns;
  /* topic: node/actor/type */
  char actor[64] = "?";
  const char *a = strchr(topic, '/');
  if (a) {
    const char *b = strchr(a + 1, '/');
    const size_t len = b ? (size_t)(b - a - 1) : strlen(a + 1);
    snprintf(actor, sizeof actor, "%.*s", (int)(len < 63 ? len : 63), a + 1);
  }
  const int tid = track_of(p, node, actor);
  sc_jsonw *w = &p->scratch;
  sc_jsonw_reset(w);
  sc_jsonw_obj_begin(w);
  const char *type = sc_msg_type_name(env->type);
  sc_jsonw_kv_str(w, "name", type ? type : "unknown");
  sc_jsonw_kv_str(w, "ph", "i");
  sc_jsonw_kv_str(w, "s", "t");
  sc_jsonw_kv_int(w, "pid", node);
  sc_jsonw_kv_int(w, "tid", tid);
  sc_jsonw_key(w, "args");
  sc_jsonw_obj_begin(w);
  sc_jsonw_kv_int(w, "step", (int64_t)env->step);
  char id[48];
  snprintf(id, sizeof id, "%u.%u.%u", env->src.node, env->src.slot, env->src.gen);
  sc_jsonw_kv_str(w, "src", id);
  sc_jsonw_key(w, "body");
  sc_msg_render_body_json(env->type, body, w);
  sc_jsonw_obj_end(w);
  sc_jsonw_obj_end(w);
  if (env->step > 0) span_touch(p, tid, node, env->step, ns);
  perfetto_push(p, ns);
  if (env->type == SC_MSG_STEP_RESULT) perfetto_step_counters(p, ns, node, body);
}

/* Writes the trace to f and closes it. */
static int perfetto_write(perfetto *p, FILE *f) {
  if (p->oom) {
    fclose(f);
    return SC_ENOMEM;
  }
  sc_jsonw w;
  sc_jsonw_init(&w);
  sc_jsonw_obj_begin(&w);
  sc_jsonw_kv_str(&w, "displayTimeUnit", "ns");
  sc_jsonw_key(&w, "traceEvents");
  sc_jsonw_arr_begin(&w);
  for (int i = 0; i < p->ntracks; i++) {
    sc_jsonw_obj_begin(&w);
    sc_jsonw_kv_str(&w, "name", "thread_name");
    sc_jsonw_kv_str(&w, "ph", "M");
    sc_jsonw_kv_int(&w, "pid", p->tracks[i].node);
    sc_jsonw_kv_int(&w, "tid", p->tracks[i].tid);
    sc_jsonw_key(&w, "args");
    sc_jsonw_obj_begin(&w);
    sc_jsonw_kv_str(&w, "name", p->tracks[i].actor);
    sc_jsonw_obj_end(&w);
    sc_jsonw_obj_end(&w);
    sc_jsonw_obj_begin(&w);
    sc_jsonw_kv_str(&w, "name", "process_name");
    sc_jsonw_kv_str(&w, "ph", "M");
    sc_jsonw_kv_int(&w, "pid", p->tracks[i].node);
    sc_jsonw_key(&w, "args");
    sc_jsonw_obj_begin(&w);
    char name[32];
    snprintf(name, sizeof name, "node %d", (int)p->tracks[i].node);
    sc_jsonw_kv_str(&w, "name", name);
    sc_jsonw_obj_end(&w);
    sc_jsonw_obj_end(&w);
  }
  for (int i = 0; i < p->nspans; i++) {
    const step_span *s = &p->spans[i];
    char name[48];
    snprintf(name, sizeof name, "step %llu", (unsigned long long)s->step);
    sc_jsonw_obj_begin(&w);
    sc_jsonw_kv_str(&w, "name", name);
    sc_jsonw_kv_str(&w, "ph", "X");
    sc_jsonw_kv_double(&w, "ts", (double)(s->first_ns - p->t0) / 1e3);
    sc_jsonw_kv_double(&w, "dur", (double)(s->last_ns - s->first_ns) / 1e3 + 1.0);
    sc_jsonw_kv_int(&w, "pid", s->node);
    sc_jsonw_kv_int(&w, "tid", s->tid);
    sc_jsonw_obj_end(&w);
  }
  sc_buf ev;
  sc_buf_init(&ev);
  for (size_t i = 0; i < p->nevs; i++) {
    char ts[48];
    const int tl = snprintf(ts, sizeof ts, "{\"ts\":%.3f,", (double)(p->evs[i].ns - p->t0) / 1e3);
    ev.len = 0;
    if (sc_buf_append(&ev, ts, (size_t)tl) != 0 ||
        sc_buf_append(&ev, p->frags.data + p->evs[i].off, p->evs[i].len) != 0) {
      p->oom = true;
      break;
    }
    sc_jsonw_raw(&w, (const char *)ev.data, ev.len);
  }
  sc_buf_free(&ev);
  sc_jsonw_arr_end(&w);
  sc_jsonw_obj_end(&w);
  int rc = p->oom ? SC_ENOMEM : sc_jsonw_status(&w);
  if (rc == 0 && fputs(sc_jsonw_str(&w), f) < 0) rc = SC_EIO;
  if (fclose(f) != 0 && rc == 0) rc = SC_EIO;
  sc_jsonw_free(&w);
  return rc;
}

typedef struct tap_out {
  FILE *rec;
  const char *record;
  bool json;
  const char *perf;
  perfetto *pf;
  sc_jsonw line;
  sc_buf rb;
} tap_out;

/* One tap record: write it as the chosen output. Returns 0 or SC_EIO. */
static int handle_record(tap_out *o, const char *topic, uint64_t ns, int32_t node,
                         const uint8_t *raw, size_t rawlen) {
  if (o->rec) {
    sc_msg_tap_record tr = {.time_ns = ns, .node = node, .topic = (char *)topic,
                            .raw = {.data = (uint8_t *)raw, .len = (uint32_t)rawlen}};
    sc_envelope te = {.type = SC_MSG_TAP_RECORD};
    if (sc_msg_encode(&te, &tr, &o->rb) != 0) return 0;
    const uint32_t len = (uint32_t)o->rb.len;
    if (fwrite(&len, 4, 1, o->rec) != 1 || fwrite(o->rb.data, 1, o->rb.len, o->rec) != o->rb.len) {
      sc_cli_error("tap", "cannot write %s", o->record);
      return SC_EIO;
    }
    return 0;
  }
  sc_envelope env;
  void *body = NULL;
  sc_diag d = {0};
  if (sc_msg_decode(raw, rawlen, &env, &body, &d) != 0) {
    fprintf(stderr, "sparsecp tap: %s: undecodable message: %s\n", topic, sc_diag_message(&d));
    return 0;
  }
  if (o->perf) {
    perfetto_add(o->pf, topic, ns, node, &env, body);
  } else if (o->json) {
    sc_jsonw *w = &o->line;
    sc_jsonw_reset(w);
    sc_jsonw_obj_begin(w);
    sc_jsonw_kv_int(w, "time_ns", (int64_t)ns);
    sc_jsonw_kv_int(w, "node", node);
    sc_jsonw_kv_str(w, "topic", topic);
    const char *tn = sc_msg_type_name(env.type);
    sc_jsonw_kv_str(w, "type", tn ? tn : "unknown");
    sc_jsonw_kv_int(w, "step", (int64_t)env.step);
    sc_jsonw_key(w, "seq");
    sc_jsonw_uint(w, env.seq);
    char id[48];
    snprintf(id, sizeof id, "%u.%u.%u", env.src.node, env.src.slot, env.src.gen);
    sc_jsonw_kv_str(w, "src", id);
    snprintf(id, sizeof id, "%u.%u.%u", env.dst.node, env.dst.slot, env.dst.gen);
    sc_jsonw_kv_str(w, "dst", id);
    sc_jsonw_key(w, "trace_id");
    sc_jsonw_uint(w, env.trace_id);
    sc_jsonw_key(w, "body");
    sc_msg_render_body_json(env.type, body, w);
    sc_jsonw_obj_end(w);
    puts(sc_jsonw_str(w));
    fflush(stdout);
  } else {
    const char *tn = sc_msg_type_name(env.type);
    printf("%.6f node %d %-28s %u.%u.%u -> %u.%u.%u step %llu %s\n", (double)ns / 1e9,
           (int)node, topic, env.src.node, env.src.slot, env.src.gen, env.dst.node,
           env.dst.slot, env.dst.gen, (unsigned long long)env.step, tn ? tn : "?");
    fflush(stdout);
  }
  sc_msg_body_destroy(env.type, body);
  return 0;
}

static void help(FILE *f) {
  fprintf(f,
          "usage: sparsecp tap --connect ENDPOINT [--filter PREFIX]...\n"
          "                    [--key FILE --server-key KEY]\n"
          "                    [--json | --record FILE | --perfetto FILE]\n"
          "                    [--count N] [--duration SECONDS]\n\n"
          "Subscribes to a node's tap (or launch's --tap) and shows the messages whose topic\n"
          "\"<node>/<actor>/<type>\" starts with PREFIX (default: all; --filter may be given\n"
          "more than once). Nodes encode only what some tap subscribed to. One line per\n"
          "message by default; at most one of:\n"
          "  --json          one JSON object per line: time_ns, node, topic, type, step,\n"
          "                  seq, src, dst, trace_id, body\n"
          "  --record FILE   the raw tap_record messages, each after its 4-byte\n"
          "                  little-endian length\n"
          "  --perfetto FILE a Chrome trace (ui.perfetto.dev, chrome://tracing): a process\n"
          "                  per node, a track per actor, an instant per message, a slice\n"
          "                  per step; written when the capture ends\n"
          "  --key FILE      a tap on tcp speaks CURVE: this subscriber's secret key, whose\n"
          "                  public half the cluster's tap_keys_file lists (launch: its\n"
          "                  \"tap_key_file\")\n"
          "  --server-key K  and the tap's public key: the node's \"public_key\" in the\n"
          "                  cluster file (launch: \"tap_server_key\")\n"
          "  --count N       stop after N messages\n"
          "  --duration S    stop after S seconds (else at Ctrl-C/SIGTERM)\n"
          "Exit status 0; 1 when an output cannot be written; 2 for bad usage or an\n"
          "endpoint that cannot be used.\n");
}

int sc_cmd_tap(int argc, char **argv) {
  static const struct option opts[] = {{"connect", required_argument, NULL, 'c'},
                                       {"filter", required_argument, NULL, 'f'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"record", required_argument, NULL, 'r'},
                                       {"perfetto", required_argument, NULL, 'p'},
                                       {"count", required_argument, NULL, 'n'},
                                       {"duration", required_argument, NULL, 'd'},
                                       {"key", required_argument, NULL, 'k'},
                                       {"server-key", required_argument, NULL, 's'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *connect = NULL, *record = NULL, *perf = NULL, *key = NULL, *server = NULL;
  uint8_t secret[32] = {0}; /* --key's; wiped on every way out */
  const char **filters = calloc((size_t)argc + 1, sizeof *filters);
  int nfilters = 0;
  bool json = false;
  int64_t count = 0, duration = 0;
  int ch, exit_code = SC_EXIT_USAGE;
  FILE *rec = NULL, *perf_file = NULL;
  /* JSON lines stream to pipes as they arrive (a consumer should not wait for a full
   * stdio buffer) */
  setvbuf(stdout, NULL, _IOLBF, 0);
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
    case 'c': connect = optarg; break;
    case 'f': filters[nfilters++] = optarg; break;
    case 'j': json = true; break;
    case 'r': record = optarg; break;
    case 'p': perf = optarg; break;
    case 'k': key = optarg; break;
    case 's': server = optarg; break;
    case 'n': if (!sc_cli_int("tap", "--count", optarg, 1, INT64_MAX, &count)) goto out_free; break;
    case 'd': if (!sc_cli_int("tap", "--duration", optarg, 1, 86400 * 365, &duration)) goto out_free; break;
    case 'h': help(stdout); exit_code = SC_EXIT_OK; goto out_free;
    default: help(stderr); goto out_free;
    }
  }
  if (connect == NULL || optind != argc || (json + (record != NULL) + (perf != NULL)) > 1 ||
      (key == NULL) != (server == NULL)) {
    help(stderr);
    goto out_free;
  }
  uint8_t server_key[32], public_key[32];
  char public_z85[SC_CURVE_Z85_LEN + 1];
  sc_diag kd = {0};
  if (key && (sc_curve_load_secret(key, secret, public_z85, &kd) != 0 ||
              sc_curve_decode(public_z85, public_key, &kd) != 0 ||
              sc_curve_decode(server, server_key, &kd) != 0)) {
    sc_cli_error("tap", "%s", sc_diag_message(&kd));
    goto out_free;
  }
  exit_code = SC_EXIT_FAILURE;
  if (record && (rec = fopen(record, "wb")) == NULL) {
    sc_cli_error("tap", "cannot open %s: %s", record, strerror(errno));
    goto out_free;
  }
  /* opened now, so that a path that cannot be written is said before the capture */
  if (perf && (perf_file = fopen(perf, "w")) == NULL) {
    sc_cli_error("tap", "cannot open %s: %s", perf, strerror(errno));
    goto out_free;
  }
  void *zctx = zmq_ctx_new();
  void *sub = zmq_socket(zctx, ZMQ_SUB);
  const int zero = 0, rcvtimeo = 100;
  zmq_setsockopt(sub, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(sub, ZMQ_RCVTIMEO, &rcvtimeo, sizeof rcvtimeo);
  if (nfilters == 0) zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
  for (int i = 0; i < nfilters; i++) zmq_setsockopt(sub, ZMQ_SUBSCRIBE, filters[i], strlen(filters[i]));
  if (key && sc_curve_make_client(sub, public_key, secret, server_key) != 0) {
    sc_cli_error("tap", "cannot use CURVE: %s", zmq_strerror(errno));
    goto out_zmq;
  }
  if (zmq_connect(sub, connect) != 0) {
    sc_cli_error("tap", "cannot connect to %s: %s", connect, zmq_strerror(errno));
    exit_code = SC_EXIT_USAGE;
    goto out_zmq;
  }
  sc_cli_catch_stop_signals(on_signal);
  perfetto pf = {0};
  sc_jsonw_init(&pf.scratch);
  sc_buf_init(&pf.frags);
  tap_out out = {.rec = rec, .record = record, .json = json, .perf = perf, .pf = &pf};
  sc_jsonw_init(&out.line);
  sc_buf_init(&out.rb);
  const uint64_t end = duration ? sc_now_ns() + (uint64_t)duration * 1000000000ull : 0;
  int64_t seen = 0;
  exit_code = SC_EXIT_OK;
  while (!g_stop && (count == 0 || seen < count) && (end == 0 || sc_now_ns() < end)) {
    zmq_msg_t parts[2];
    int inited = 0, got = 0;
    bool more = true;
    while (got < 2 && more) {
      zmq_msg_init(&parts[inited++]);
      if (zmq_msg_recv(&parts[got], sub, 0) < 0) break;
      more = zmq_msg_more(&parts[got]);
      got++;
    }
    while (got == 2 && more) { /* a foreign publisher's extra parts: skip them */
      zmq_msg_t x;
      zmq_msg_init(&x);
      const int rc = zmq_msg_recv(&x, sub, 0);
      more = rc >= 0 && zmq_msg_more(&x);
      zmq_msg_close(&x);
    }
    if (got == 2) {
      char topic[128];
      const size_t tl = zmq_msg_size(&parts[0]) < sizeof topic - 1 ? zmq_msg_size(&parts[0]) : sizeof topic - 1;
      memcpy(topic, zmq_msg_data(&parts[0]), tl);
      topic[tl] = '\0';
      const uint8_t *p = zmq_msg_data(&parts[1]);
      size_t left = zmq_msg_size(&parts[1]);
      sc_tap_record r;
      int next;
      while (!g_stop && (count == 0 || seen < count) &&
             (next = sc_tap_record_next(&p, &left, &r)) != 0) {
        if (next < 0) {
          fprintf(stderr, "sparsecp tap: %s: truncated tap record\n", topic);
          break;
        }
        if (handle_record(&out, topic, r.ns, r.node, r.msg, r.len) != 0) {
          exit_code = SC_EXIT_FAILURE;
          g_stop = 1;
        }
        seen++;
      }
    }
    for (int i = 0; i < inited; i++) zmq_msg_close(&parts[i]);
  }
  if (perf) {
    const int rc = perfetto_write(&pf, perf_file);
    perf_file = NULL;
    if (rc != 0) {
      sc_cli_error("tap", "cannot write %s: %s", perf, sc_strerror(rc));
      exit_code = SC_EXIT_FAILURE;
    } else {
      fprintf(stderr, "sparsecp tap: wrote %lld messages to %s\n", (long long)seen, perf);
    }
  }
  sc_jsonw_free(&pf.scratch);
  sc_buf_free(&pf.frags);
  free(pf.evs);
  free(pf.tracks);
  free(pf.spans);
  sc_jsonw_free(&out.line);
  sc_buf_free(&out.rb);
out_zmq:
  zmq_close(sub);
  zmq_ctx_term(zctx);
  if (rec && fclose(rec) != 0 && exit_code == SC_EXIT_OK) {
    sc_cli_error("tap", "cannot write %s: %s", record, strerror(errno));
    exit_code = SC_EXIT_FAILURE;
  }
  rec = NULL;
out_free:
  sc_wipe(secret, sizeof secret);
  if (rec) fclose(rec);
  if (perf_file) fclose(perf_file);
  free(filters);
  return exit_code;
}

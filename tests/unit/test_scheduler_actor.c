/* test_scheduler_actor.c - the scheduler actor's stats_report (what GET /metrics and
 * /health show), on a one-node cluster whose other pipeline actors are probes: this test
 * plays the partitioner and rank 0 (step_planned, plan_ack, step_result) and reads what
 * the scheduler sends to the gateway, the partitioner and the comm actor. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actors/pipeline.h"
#include "base/clock.h"
#include "base/histo.h"

/* What the probes saw; the test thread waits on it. */
typedef struct seen {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t batch_step;          /* step of the last global_batch */
  int tokens, errors, aborts;   /* client_token, client_error; step_abort to comm */
  sc_msg_stats_report *report;  /* the last stats_report (taken from its message) */
  int rebuilds;                 /* comm_rebuild to comm */
  uint32_t generation;          /* ... the last one's generation */
  bool hold_rebuild;            /* the comm probe does not answer comm_rebuild by itself */
} seen;

static seen g_seen = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, NULL, 0, 0, false};

/* comm's answer to a rebuild of generation gen, sent as rank 0's comm actor would */
static int send_comm_ready(sc_ctx *c, sc_actor_id to, uint32_t gen, int code) {
  sc_msg_comm_ready *m = sc_msg_body_new(SC_MSG_COMM_READY);
  m->generation = gen;
  m->code = code;
  m->message = strdup(code ? "the probe says no" : "");
  return sc_send(c, to, SC_MSG_COMM_READY, m);
}

static int probe_on(sc_ctx *c, const sc_envelope *env, const void *body) {
  pthread_mutex_lock(&g_seen.mu);
  switch (env->type) {
  case SC_MSG_GLOBAL_BATCH: g_seen.batch_step = env->step; break;
  case SC_MSG_CLIENT_TOKEN: g_seen.tokens++; break;
  case SC_MSG_CLIENT_ERROR: g_seen.errors++; break;
  case SC_MSG_STEP_ABORT: g_seen.aborts++; break;
  case SC_MSG_COMM_REBUILD:
    g_seen.rebuilds++;
    g_seen.generation = ((const sc_msg_comm_rebuild *)body)->generation;
    if (!g_seen.hold_rebuild) send_comm_ready(c, env->src, g_seen.generation, 0);
    break;
  case SC_MSG_STATS_REPORT:
    sc_msg_body_destroy(SC_MSG_STATS_REPORT, g_seen.report);
    g_seen.report = sc_take_body(c);
    break;
  default: break;
  }
  pthread_cond_broadcast(&g_seen.cv);
  pthread_mutex_unlock(&g_seen.mu);
  return 0;
}

static const sc_actor_spec k_probe = {.name = "probe", .fallback = probe_on};

/* Waits (5 s at most) until cond, read under the lock, holds. */
#define WAIT_SEEN(cond)                                                               \
  do {                                                                                \
    const uint64_t until_ = sc_now_ns() + 5000000000ull;                              \
    pthread_mutex_lock(&g_seen.mu);                                                   \
    while (!(cond) && sc_now_ns() < until_) {                                         \
      const struct timespec ts_ = sc_time_after_ms(CLOCK_REALTIME, 10);               \
      pthread_cond_timedwait(&g_seen.cv, &g_seen.mu, &ts_);                           \
    }                                                                                 \
    const bool ok_ = (cond);                                                          \
    pthread_mutex_unlock(&g_seen.mu);                                                 \
    cr_assert(ok_, "waited 5 s for %s", #cond);                                       \
  } while (0)

static char g_dir[64];
static sc_cluster g_cluster;
static sc_rank_ctx g_ctx;
static sc_rank_ctx *g_ctx_ptr = &g_ctx;
static sc_node *g_node;
static sc_actor_id g_sched, g_gateway, g_partitioner, g_metadata;

static void start(void) {
  g_ctx.cfg.sched = (sc_sched_config){.token_budget = 16, .max_running = 4, .block_size = 4,
                                      .dcp = 1, .num_blocks = 32, .max_model_len = 256};
  g_ctx.cfg.deadline_ms = 5000;
  const sc_startup_actor list[] = {
      {"gateway", &k_probe, SC_ON_HEAD, NULL, 0},
      {"scheduler", &sc_scheduler_spec, SC_ON_HEAD, &g_ctx_ptr, sizeof g_ctx_ptr},
      {"partitioner", &k_probe, SC_ON_HEAD, NULL, 0},
      {"comm", &k_probe, SC_ON_ALL, NULL, 0},
      {"metadata", &k_probe, SC_ON_ALL, NULL, 0}};
  snprintf(g_dir, sizeof g_dir, "/tmp/sc-sched-XXXXXX");
  cr_assert_not_null(mkdtemp(g_dir));
  sc_diag d = {0};
  cr_assert_eq(sc_cluster_local(1, g_dir, &g_cluster, &d), 0);
  sc_node_opts o;
  sc_node_opts_default(&o);
  o.cluster = &g_cluster;
  o.startup = list;
  o.num_startup = (int32_t)(sizeof list / sizeof list[0]);
  cr_assert_eq(sc_node_create(&o, &g_node, &d), 0, "%s", sc_diag_message(&d));
  cr_assert_eq(sc_node_start(g_node, &d), 0, "%s", sc_diag_message(&d));
  cr_assert_eq(sc_node_wait_ready(g_node, 5000), 0);
  cr_assert_eq(sc_node_resolve(g_node, "scheduler@0", &g_sched), 0);
  cr_assert_eq(sc_node_resolve(g_node, "gateway@0", &g_gateway), 0);
  cr_assert_eq(sc_node_resolve(g_node, "partitioner@0", &g_partitioner), 0);
  cr_assert_eq(sc_node_resolve(g_node, "metadata@0", &g_metadata), 0);
}

static void stop(void) {
  sc_node_destroy(g_node);
  sc_cluster_free(&g_cluster);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  cr_assert_eq(system(cmd), 0);
  sc_msg_body_destroy(SC_MSG_STATS_REPORT, g_seen.report);
}

/* body (type) to the scheduler from src, for step */
static void send_as(sc_actor_id src, int type, uint64_t step, void *body) {
  sc_envelope env = {.type = (uint16_t)type, .step = step, .src = src, .dst = g_sched};
  cr_assert_eq(sc_node_send(g_node, &env, body), 0);
}

static void submit(uint64_t id) {
  sc_msg_client_admit *m = sc_msg_body_new(SC_MSG_CLIENT_ADMIT);
  m->request_id = id;
  m->max_tokens = 1;
  m->prompt.v = calloc(3, sizeof *m->prompt.v);
  m->prompt.n = 3;
  m->client = 1;
  send_as(g_gateway, SC_MSG_CLIENT_ADMIT, 0, m);
}

static sc_msg_arr_u64 u64s(uint64_t first) {
  sc_msg_arr_u64 a = {calloc(SC_PURPOSE_COUNT, sizeof(uint64_t)), SC_PURPOSE_COUNT};
  for (int k = 0; k < SC_PURPOSE_COUNT; k++) a.v[k] = first + (uint64_t)k;
  return a;
}

/* The partitioner's word on step: fingerprint fp, purpose k with 1 + k entries of
 * 100 + k bytes in all. */
static void planned(uint64_t step, uint64_t fp) {
  sc_msg_step_planned *m = sc_msg_body_new(SC_MSG_STEP_PLANNED);
  m->fingerprint = fp;
  m->purpose_colls = u64s(1);
  m->purpose_bytes = u64s(100);
  send_as(g_partitioner, SC_MSG_STEP_PLANNED, step, m);
}

static void ack(uint64_t step, uint64_t fp) {
  sc_msg_plan_ack *m = sc_msg_body_new(SC_MSG_PLAN_ACK);
  m->fingerprint = fp;
  send_as(g_metadata, SC_MSG_PLAN_ACK, step, m);
}

static void result(uint64_t step) {
  sc_msg_step_result *m = sc_msg_body_new(SC_MSG_STEP_RESULT);
  m->sampled.v = calloc(1, sizeof *m->sampled.v);
  m->sampled.n = 1;
  /* a profiled step: stage i took (i + 1) * step ms (model/step_prof.h) */
  m->stage_ns.v = calloc(SC_STAGE_COUNT, sizeof *m->stage_ns.v);
  m->stage_ns.n = SC_STAGE_COUNT;
  for (int i = 0; i < SC_STAGE_COUNT; i++) m->stage_ns.v[i] = (uint64_t)(i + 1) * step * 1000000;
  /* and its device ran 3 ms of a 4 ms span in 10 + step ops */
  m->device_ns.v = calloc(SC_DEVICE_COUNT, sizeof *m->device_ns.v);
  m->device_ns.n = SC_DEVICE_COUNT;
  m->device_ns.v[SC_DEVICE_BUSY_NS] = 3000000;
  m->device_ns.v[SC_DEVICE_SPAN_NS] = 4000000;
  m->device_ns.v[SC_DEVICE_OPS] = 10 + step;
  m->device_ns.v[SC_DEVICE_IDLE_BEFORE_NS] = 20000 + step;
  send_as(g_metadata, SC_MSG_STEP_RESULT, step, m);
}

/* A rank (as node 0's metadata actor sends it) gives step up with reason. */
static void abort_step_as(int32_t rank, uint64_t step, int reason) {
  sc_msg_step_abort *m = sc_msg_body_new(SC_MSG_STEP_ABORT);
  m->reason = reason;
  m->rank = rank;
  m->step = step;
  m->seq = -1;
  send_as(g_metadata, SC_MSG_STEP_ABORT, step, m);
}

/* Rank 0 gives step up with reason (a refused collective's SC_EDESYNC, say). */
static void abort_step(uint64_t step, int reason) { abort_step_as(0, step, reason); }

/* Asks as the gateway does and waits for the answer with the same seq. */
static const sc_msg_stats_report *query(uint64_t seq) {
  sc_msg_stats_query *q = sc_msg_body_new(SC_MSG_STATS_QUERY);
  q->seq = seq;
  send_as(g_gateway, SC_MSG_STATS_QUERY, 0, q);
  WAIT_SEEN(g_seen.report != NULL && g_seen.report->seq == seq);
  const sc_msg_stats_report *r = g_seen.report;
  cr_assert_eq(r->step_buckets.n, SC_HIST_N + 1);
  cr_assert_eq(r->purpose_colls.n, SC_PURPOSE_COUNT);
  cr_assert_eq(r->purpose_bytes.n, SC_PURPOSE_COUNT);
  return r;
}

static uint64_t buckets_total(const sc_msg_stats_report *r) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < r->step_buckets.n; i++) n += r->step_buckets.v[i];
  return n;
}

/* Not ready, then one step that finishes, one whose fingerprint differs and one that a
 * rank refused (desyncs), one that timed out (failed, no desync), and the orderly stop:
 * the report follows each, and is still answered while stopping. */
Test(scheduler_actor, stats_report_follows_steps_desyncs_and_the_stop) {
  start();
  const sc_msg_stats_report *r = query(1);
  cr_assert(!r->ready && !r->stopping);
  cr_assert_eq(r->blocks_total, 32);
  cr_assert_eq(r->blocks_free, 32);
  cr_assert_eq(r->steps + r->steps_failed + r->desyncs + buckets_total(r), 0);

  submit(1); /* waits: the cluster is not ready */
  r = query(2);
  cr_assert_eq(r->waiting, 1);
  cr_assert_eq(r->running, 0);
  sc_pipeline_cluster_ready(g_node);
  WAIT_SEEN(g_seen.batch_step == 1);
  planned(1, 77);
  ack(1, 77);
  result(1);
  WAIT_SEEN(g_seen.tokens == 1);
  r = query(3);
  cr_assert(r->ready && !r->stopping);
  cr_assert(r->admitted == 1 && r->finished == 1 && r->waiting == 0 && r->running == 0);
  cr_assert_eq(r->steps, 1);
  cr_assert_eq(buckets_total(r), 1);
  cr_assert_gt(r->step_seconds_sum, 0.0);
  for (int k = 0; k < SC_PURPOSE_COUNT; k++) {
    cr_assert_eq(r->purpose_colls.v[k], 1 + (uint64_t)k);
    cr_assert_eq(r->purpose_bytes.v[k], 100 + (uint64_t)k);
  }
  cr_assert_eq(r->stage_ns.n, SC_STAGE_COUNT);
  for (int k = 0; k < SC_STAGE_COUNT; k++) cr_assert_eq(r->stage_ns.v[k], (uint64_t)(k + 1) * 1000000);
  cr_assert_eq(r->device_ns.n, SC_DEVICE_COUNT + 1);
  cr_assert_eq(r->device_ns.v[SC_DEVICE_BUSY_NS], 3000000);
  cr_assert_eq(r->device_ns.v[SC_DEVICE_SPAN_NS], 4000000);
  cr_assert_eq(r->device_ns.v[SC_DEVICE_OPS], 11);
  cr_assert_eq(r->device_ns.v[SC_DEVICE_IDLE_BEFORE_NS], 20001);
  cr_assert_eq(r->device_ns.v[SC_DEVICE_COUNT], 1, "one step measured");

  submit(2);
  WAIT_SEEN(g_seen.batch_step == 2);
  planned(2, 77);
  ack(2, 78); /* rank 0 computed another plan */
  WAIT_SEEN(g_seen.errors == 1 && g_seen.aborts == 1);
  WAIT_SEEN(g_seen.rebuilds == 1 && g_seen.generation == 1); /* before the next step */
  r = query(4);
  cr_assert(r->steps == 1 && r->steps_failed == 1 && r->desyncs == 1 && r->failed == 1);
  cr_assert_eq(buckets_total(r), 1, "a failed step has no step time");
  cr_assert_eq(r->purpose_colls.v[0], 2); /* both plans count */
  cr_assert_eq(r->blocks_free, 32);

  const int reasons[] = {SC_EDESYNC, SC_ETIMEDOUT};
  for (int i = 0; i < 2; i++) {
    submit(3 + (uint64_t)i);
    WAIT_SEEN(g_seen.batch_step == 3 + (uint64_t)i);
    abort_step(3 + (uint64_t)i, reasons[i]);
    WAIT_SEEN(g_seen.errors == 2 + i);
  }
  r = query(5);
  cr_assert(r->steps_failed == 3 && r->desyncs == 2 && r->failed == 3);

  submit(5); /* starts step 5, which the stop fails */
  WAIT_SEEN(g_seen.batch_step == 5);
  sc_pipeline_stop_clients(g_node, "test");
  WAIT_SEEN(g_seen.errors == 4);
  r = query(6);
  cr_assert(r->ready && r->stopping);
  cr_assert(r->steps == 1 && r->steps_failed == 4 && r->desyncs == 2 && r->failed == 4);
  stop();
}

/* The scheduler's part of a rebuild (docs/pipeline.md, "Rebuilding the collectives"): after
 * a failed step no step starts until every rank answered comm_ready for the generation it
 * asked for; an answer for another generation, or from another node, changes nothing; a
 * rank that cannot build its collectives ends the cluster, and the waiting request hears
 * why. */
Test(scheduler_actor, steps_wait_for_the_rebuilt_collectives) {
  g_seen.hold_rebuild = true;
  start();
  sc_pipeline_cluster_ready(g_node);
  submit(1);
  WAIT_SEEN(g_seen.batch_step == 1);
  /* node 0 may speak for rank 0 only: an abort naming another rank changes nothing */
  abort_step_as(2, 1, SC_EDEVICE);
  usleep(200000);
  pthread_mutex_lock(&g_seen.mu);
  cr_assert_eq(g_seen.errors + g_seen.rebuilds, 0, "another node's word failed the step");
  pthread_mutex_unlock(&g_seen.mu);
  abort_step(1, SC_EDESYNC);
  WAIT_SEEN(g_seen.errors == 1 && g_seen.rebuilds == 1 && g_seen.generation == 1);
  submit(2);
  usleep(200000);
  pthread_mutex_lock(&g_seen.mu);
  const uint64_t step = g_seen.batch_step;
  pthread_mutex_unlock(&g_seen.mu);
  cr_assert_eq(step, 1, "a step started before the collectives were rebuilt");
  /* the answer of another generation, and one from a stranger's address, are ignored */
  sc_msg_comm_ready *m = sc_msg_body_new(SC_MSG_COMM_READY);
  m->generation = 7;
  send_as(g_metadata, SC_MSG_COMM_READY, 0, m);
  m = sc_msg_body_new(SC_MSG_COMM_READY);
  m->generation = 1;
  send_as((sc_actor_id){.node = 3, .slot = 1}, SC_MSG_COMM_READY, 0, m);
  usleep(200000);
  pthread_mutex_lock(&g_seen.mu);
  cr_assert_eq(g_seen.batch_step, 1, "a wrong answer let a step start");
  pthread_mutex_unlock(&g_seen.mu);
  m = sc_msg_body_new(SC_MSG_COMM_READY);
  m->generation = 1;
  send_as(g_metadata, SC_MSG_COMM_READY, 0, m); /* rank 0's node */
  WAIT_SEEN(g_seen.batch_step == 2);
  abort_step(2, SC_ETIMEDOUT);
  WAIT_SEEN(g_seen.errors == 2 && g_seen.rebuilds == 2 && g_seen.generation == 2);
  submit(3);
  m = sc_msg_body_new(SC_MSG_COMM_READY);
  m->generation = 2;
  m->code = SC_ESYS;
  m->message = strdup("no NCCL today");
  send_as(g_metadata, SC_MSG_COMM_READY, 0, m);
  WAIT_SEEN(g_seen.errors == 3); /* request 3: the cluster ends */
  const sc_msg_stats_report *r = query(1);
  cr_assert(r->stopping);
  cr_assert_eq(g_seen.batch_step, 2);
  stop();
}

/* End-to-end tests of the inference pipeline with real node processes, real sockets and
 * real msgpack (issue 6): SPEC.md §8 equivalence with a single-rank cluster for five
 * layouts, desync and kill faults, hostile clients next to well-behaved ones, and a tap
 * watching step plans. The clusters use the small model (examples/model-small.json) so
 * that the suite stays fast on two cores. Every process a test starts is stopped by it
 * (sc_local_cluster_stop, or the run command's own cleanup), and each test checks that
 * no node of its clusters is left behind. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "actors/pipeline_config.h"
#include "base/clock.h"
#include "client/client.h"
#include "messages/messages.h"
#include "model/step_prof.h"
#include "tools/local_cluster.h"
#include "tools/tap_steps.h"

#define EXE SC_SPARSECP_EXE
#define SRC SC_SOURCE_DIR
#define SMALL_VOCAB 4096

/* Every test puts its clusters under a private TMPDIR, so that the leftover check below
 * sees only its own nodes (other programs may run clusters on the same machine). */
static char g_tmp[64];
static void private_tmp(void) {
  snprintf(g_tmp, sizeof g_tmp, "/tmp/sc-pipeline-test-XXXXXX");
  cr_assert_not_null(mkdtemp(g_tmp));
  setenv("TMPDIR", g_tmp, 1);
}

/* Runs `sparsecp run ...` and parses its --json output; returns the exit status. */
static int run_json_logged(const char *args, bool quiet, json_t **out) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s run --model %s/examples/model-small.json --json %s %s", EXE,
           SRC, quiet ? "--quiet" : "", args);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  static char buf[1 << 20];
  const size_t n = fread(buf, 1, sizeof buf - 1, p);
  buf[n] = '\0';
  const int st = pclose(p);
  json_error_t err;
  *out = json_loads(buf, 0, &err);
  cr_assert_not_null(*out, "`%s` printed no JSON: %s", cmd, buf);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int run_json(const char *args, json_t **out) { return run_json_logged(args, true, out); }

/* No `sparsecp node` of this test's clusters is alive, and their folders are gone. */
static void assert_no_nodes_left(void) {
  char cmd[256];
  /* [c]: the pattern must not match the shell that runs pgrep */
  snprintf(cmd, sizeof cmd, "pgrep -f '%s/sparsecp-run-.*/[c]luster.json' > /dev/null", g_tmp);
  const int rc = system(cmd);
  /* pgrep: 0 a match, 1 none; anything else (no pgrep, a bad pattern) proves nothing */
  cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) != 0, "a node process was left behind");
  cr_assert_eq(WEXITSTATUS(rc), 1, "pgrep could not look (status %d)", WEXITSTATUS(rc));
  cr_assert_eq(rmdir(g_tmp), 0, "a cluster folder was left behind in %s", g_tmp);
}

/* `sparsecp tap --json` on rank 0's tap, stopping after `count` records that match
 * `filters` (its --filter options) or 30 s; returns at once, its subscription maybe not
 * up yet. *pid (if not NULL): the process to signal to stop it sooner. */
static FILE *spawn_tap(sc_local_cluster *lc, const char *filters, int count, pid_t *pid) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "echo $$; exec timeout 30 %s tap --connect %s %s --json --count %d",
           EXE, sc_local_cluster_tap(lc, 0), filters, count);
  FILE *tap = popen(cmd, "r");
  cr_assert_not_null(tap);
  char line[32];
  cr_assert_not_null(fgets(line, sizeof line, tap)); /* (the shell's pid: timeout's after exec) */
  if (pid != NULL) *pid = (pid_t)atol(line);
  return tap;
}

/* spawn_tap of one filter; returns once its subscription has had time to reach the node
 * (a guess: a test whose record must not be missed proves the tap live instead, as
 * a_vanished_client_has_its_request_canceled does). */
static FILE *open_tap(sc_local_cluster *lc, const char *filter, int count) {
  char filters[256];
  snprintf(filters, sizeof filters, "--filter %s", filter);
  FILE *tap = spawn_tap(lc, filters, count, NULL);
  usleep(1000 * 1000);
  return tap;
}

static void equivalence(int p, int n, int t) {
  private_tmp();
  char args[512];
  snprintf(args, sizeof args,
           "--pcp %d --dcp %d --tp %d --requests %s/tests/pipeline/stream.jsonl "
           "--token-budget 24 --clients 3 --verify --timeout 120",
           p, n, t, SRC);
  json_t *j;
  const int rc = run_json(args, &j);
  json_t *v = json_object_get(j, "verify");
  cr_assert_eq(rc, 0, "P%d N%d T%d: exit %d, error: %s", p, n, t, rc,
               json_string_value(json_object_get(j, "error")));
  cr_assert(json_is_true(json_object_get(j, "ok")));
  cr_assert_eq(json_integer_value(json_object_get(j, "requests")), 12);
  cr_assert_eq(json_integer_value(json_object_get(j, "generated_tokens")), 65);
  const json_int_t checked = json_integer_value(json_object_get(v, "checked"));
  const json_int_t same = json_integer_value(json_object_get(v, "identical"));
  const json_int_t ties = json_integer_value(json_object_get(v, "ties"));
  cr_assert_eq(checked, 12);
  cr_assert_eq(json_integer_value(json_object_get(v, "mismatches")), 0);
  cr_assert_eq(same + ties, checked, "P%d N%d T%d: %lld identical, %lld ties", p, n, t,
               (long long)same, (long long)ties);
  json_decref(j);
  assert_no_nodes_left();
}

Test(pipeline, equivalence_p2_n1_t1) { equivalence(2, 1, 1); }
Test(pipeline, equivalence_p2_n2_t1) { equivalence(2, 2, 1); }
Test(pipeline, equivalence_p4_n4_t1) { equivalence(4, 4, 1); }
Test(pipeline, equivalence_p1_n2_t2) { equivalence(1, 2, 2); }
Test(pipeline, equivalence_p2_n2_t2) { equivalence(2, 2, 2); }

/* After a run that failed, every request says how it ended: finished (no error), failed
 * (with its error; a request cut off by the run's stop included), or not_started (no
 * tokens); at least one failed. */
static void assert_every_request_has_a_state(json_t *j) {
  json_t *res = json_object_get(j, "results"), *r;
  size_t i;
  int failed = 0;
  cr_assert(json_array_size(res) > 0);
  json_array_foreach(res, i, r) {
    const char *st = json_string_value(json_object_get(r, "state"));
    const char *err = json_string_value(json_object_get(r, "error"));
    cr_assert_not_null(st, "request %zu has no state", i);
    if (strcmp(st, "finished") == 0) {
      cr_assert_null(err, "request %zu finished with an error", i);
    } else if (strcmp(st, "failed") == 0) {
      cr_assert(err && err[0], "request %zu failed without a reason", i);
      failed++;
    } else {
      cr_assert_str_eq(st, "not_started", "request %zu", i);
      cr_assert_eq(json_array_size(json_object_get(r, "tokens")), 0, "request %zu", i);
    }
  }
  cr_assert_gt(failed, 0, "a failed run with no failed request");
}

/* Loads a cluster file in dir of `ranks` nodes (P = ranks) whose pipeline section is the
 * JSON object `pipeline`; returns sc_pipeline_config_load's code (*pc to free when 0). */
static int load_pipeline(const char *dir, int ranks, const char *pipeline,
                         sc_pipeline_config *pc, sc_diag *d) {
  char path[64];
  snprintf(path, sizeof path, "%s/c.json", dir);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fprintf(f, "{\"pcp\":%d,\"nodes\":[", ranks);
  for (int r = 0; r < ranks; r++)
    fprintf(f, "%s{\"rank\":%d,\"endpoint\":\"ipc://%s/n%d\",\"coll\":\"ipc://%s/c%d\"}",
            r ? "," : "", r, dir, r, dir, r);
  fprintf(f, "],\"pipeline\":%s}", pipeline);
  fclose(f);
  sc_cluster c;
  cr_assert_eq(sc_cluster_load(path, &c, d), 0, "%s", sc_diag_message(d));
  bool present = false;
  const int rc = sc_pipeline_config_load(path, &c, pc, &present, d);
  cr_assert(rc != 0 || present);
  sc_cluster_free(&c);
  unlink(path);
  return rc;
}

/* The pipeline's "cuda_graphs": a boolean, false turning the engines' recorded steps off
 * (docs/cuda.md "Recorded steps"; on the CPU it changes nothing). */
Test(pipeline, the_cuda_graphs_key_is_a_boolean) {
  static const struct {
    const char *value;
    int rc;
    bool off;
  } cases[] = {{"false", 0, true}, {"true", 0, false}, {"\"no\"", SC_EINVAL, false}};
  char dir[] = "/tmp/sc-pipecfg-XXXXXX", json[64];
  cr_assert_not_null(mkdtemp(dir));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(json, sizeof json, "{\"cuda_graphs\":%s}", cases[i].value);
    sc_diag d = {0};
    sc_pipeline_config pc;
    const int rc = load_pipeline(dir, 1, json, &pc, &d);
    cr_assert_eq(rc, cases[i].rc, "cuda_graphs %s: %s", cases[i].value, sc_diag_message(&d));
    if (rc == 0) {
      cr_assert_eq(pc.engine.no_recordings, cases[i].off, "cuda_graphs %s", cases[i].value);
      sc_pipeline_config_free(&pc);
    } else {
      cr_assert(strstr(d.msg, "cuda_graphs must be true or false"), "%s", d.msg);
    }
  }
  rmdir(dir);
}

/* The pipeline's "ranks_per_gpu": ranks whose kernels may run at once on one GPU, which
 * the engine's CUDA context is told (cooperative grids take a share of the SMs,
 * docs/pipeline.md); an integer of at least 1, absent meaning none besides this one. */
Test(pipeline, the_ranks_per_gpu_key_is_a_positive_integer) {
  static const struct {
    const char *json;
    int rc;
    int32_t ranks;
  } cases[] = {{"{}", 0, 0},
               {"{\"ranks_per_gpu\":4}", 0, 4},
               {"{\"ranks_per_gpu\":0}", SC_EINVAL, 0},
               {"{\"ranks_per_gpu\":\"4\"}", SC_EINVAL, 0}};
  char dir[] = "/tmp/sc-pipecfg-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sc_diag d = {0};
    sc_pipeline_config pc;
    const int rc = load_pipeline(dir, 1, cases[i].json, &pc, &d);
    cr_assert_eq(rc, cases[i].rc, "%s: %s", cases[i].json, sc_diag_message(&d));
    if (rc == 0) {
      cr_assert_eq(pc.engine.ranks_per_gpu, cases[i].ranks, "%s", cases[i].json);
      sc_pipeline_config_free(&pc);
    } else {
      cr_assert(strstr(d.msg, "pipeline.ranks_per_gpu must be an integer in [1, 1024]"), "%s",
                d.msg);
    }
  }
  rmdir(dir);
}

Test(pipeline, desync_is_refused_and_named) {
  private_tmp();
  json_t *j;
  const int rc = run_json("--inject desync:1:3 --requests " SRC "/tests/pipeline/stream.jsonl", &j);
  cr_assert_eq(rc, 1);
  const char *err = json_string_value(json_object_get(j, "error"));
  cr_assert_not_null(err);
  /* rank, step, sequence number and both shapes */
  /* (which collective comes first depends on what step 3 holds: prefill or decode rows) */
  cr_assert_not_null(strstr(err, "rank 1 refused collective seq 0 of step 3"), "%s", err);
  const char *want = strstr(err, "expected "), *got = strstr(err, "requested ");
  cr_assert(want && got && strstr(want, "rows=") && strstr(got, "rows="), "%s", err);
  cr_assert_not_null(strstr(err, "EDESYNC"), "%s", err);
  /* the error reached the client within 2 s of the first request (the fault is in the
   * run's second step), and every node was gone soon after */
  cr_assert_lt(json_real_value(json_object_get(j, "failed_at_s")), 2.0);
  cr_assert_lt(json_real_value(json_object_get(j, "elapsed_s")), 6.0);
  assert_every_request_has_a_state(j);
  json_decref(j);
  assert_no_nodes_left();
}

Test(pipeline, killed_node_gives_errors_not_a_hang) {
  private_tmp();
  json_t *j;
  const uint64_t t0 = sc_now_ns();
  const int rc = run_json("--inject kill:1:3 --requests " SRC "/tests/pipeline/stream.jsonl", &j);
  cr_assert_eq(rc, 1);
  const char *err = json_string_value(json_object_get(j, "error"));
  cr_assert_not_null(err);
  cr_assert_not_null(strstr(err, "node 1"), "%s", err);
  cr_assert_lt(json_real_value(json_object_get(j, "failed_at_s")), 5.0);
  cr_assert_lt((double)(sc_now_ns() - t0) / 1e9, 20.0);
  assert_every_request_has_a_state(j);
  json_decref(j);
  assert_no_nodes_left();
}

/* The pipeline's "overlap" of the clusters start_small_profiled makes (NULL: auto). */
static const char *g_overlap;

/* A P x N cluster of the small model; inject: one --inject fault (and with it a 24-token
 * budget and a 1 s collective deadline), or NULL. */
static sc_local_cluster *start_small_profiled(int p, int n, const char *inject, bool profile) {
  sc_local_cluster_opts o = {.pcp = p, .dcp = n, .tp = 1, .exe = EXE,
                             .model_file = SRC "/examples/model-small.json",
                             .quiet = true, .log_level = "error",
                             .taps = true /* open_tap watches rank 0's */, .profile = profile,
                             .overlap = g_overlap};
  if (inject) {
    o.inject[0] = inject;
    o.num_inject = 1;
    o.token_budget = 24;
    o.deadline_ms = 1000;
  }
  sc_local_cluster *lc = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_local_cluster_start(&o, &lc, &d), 0, "%s", d.msg);
  return lc;
}

static sc_local_cluster *start_small_with(int p, int n, const char *inject) {
  return start_small_profiled(p, n, inject, false);
}

static sc_local_cluster *start_small(int p, int n) { return start_small_with(p, n, NULL); }

/* In a private temporary folder, a cluster as start_small_with makes and one client *c
 * connected to its gateway. */
static sc_local_cluster *start_with_client(int p, int n, const char *inject, sc_client **c) {
  private_tmp();
  sc_local_cluster *lc = start_small_with(p, n, inject);
  cr_assert_eq(sc_client_connect(c, sc_local_cluster_listen(lc), NULL), 0);
  return lc;
}

/* Waits for the end of request id on client c; returns the number of tokens, or -1 with
 * the error message in err. */
static int finish(sc_client *c, uint64_t id, char *err, size_t len) {
  int ntok = 0;
  const uint64_t until = sc_now_ns() + 60ull * 1000000000ull;
  while (sc_now_ns() < until) {
    sc_client_event ev;
    if (sc_client_next(c, 200, &ev) != 0 || ev.request_id != id) continue;
    if (ev.kind == SC_CLIENT_TOKENS) ntok += ev.n;
    else if (ev.kind == SC_CLIENT_DONE) return ntok;
    else {
      snprintf(err, len, "%s", ev.message);
      return -1;
    }
  }
  snprintf(err, len, "no answer within 60 s");
  return -1;
}

/* The next error reply on c (any id); its code, with the message in msg. */
static int next_error(sc_client *c, char *msg, size_t len) {
  sc_client_event ev;
  for (int k = 0; k < 100; k++) {
    if (sc_client_next(c, 100, &ev) != 0) continue;
    if (ev.kind == SC_CLIENT_ERROR) {
      snprintf(msg, len, "%s", ev.message);
      return ev.code;
    }
  }
  return 0;
}

/* A 2 x 2 cluster with one injected fault, and a client *c that sent A (id[0]: 40
 * prompt tokens) and then B (id[1]: 5). On one connection A reaches the scheduler first:
 * A starts step 1 at once and fills its 24-token budget; B waits for the next step. */
static sc_local_cluster *start_a_then_b(int p, int n, const char *inject, sc_client **c,
                                        uint64_t id[2]) {
  sc_local_cluster *lc = start_with_client(p, n, inject, c);
  int32_t prompt[40];
  for (int i = 0; i < 40; i++) prompt[i] = (i * 31) % SMALL_VOCAB;
  const sc_client_request a = {.prompt = prompt, .prompt_len = 40, .max_tokens = 2};
  const sc_client_request b = {.prompt = prompt, .prompt_len = 5, .max_tokens = 2};
  cr_assert_eq(sc_client_submit(*c, &a, &id[0]), 0);
  cr_assert_eq(sc_client_submit(*c, &b, &id[1]), 0);
  return lc;
}

/* A rank that acknowledges a step's plan with another fingerprint (or not at all, or
 * whose report that it completed the step is lost) fails that step, and the requests
 * that were waiting behind it are still served (nothing else would start the next step:
 * the failed step's result is ignored). */
static void failed_ack_case_on(int p, int n, const char *inject, const char *want) {
  sc_client *c;
  uint64_t id[2];
  sc_local_cluster *lc = start_a_then_b(p, n, inject, &c, id);
  int tokens[2] = {0, 0}, ended = 0;
  bool failed[2] = {false, false};
  char msg[512] = "";
  const uint64_t until = sc_now_ns() + 30ull * 1000000000ull;
  while (ended < 2 && sc_now_ns() < until) {
    sc_client_event ev;
    if (sc_client_next(c, 200, &ev) != 0) continue;
    const int k = ev.request_id == id[0] ? 0 : ev.request_id == id[1] ? 1 : -1;
    if (k < 0) continue;
    if (ev.kind == SC_CLIENT_TOKENS) {
      tokens[k] += ev.n;
    } else {
      ended++;
      failed[k] = ev.kind == SC_CLIENT_ERROR;
      if (failed[k]) snprintf(msg, sizeof msg, "%s", ev.message);
    }
  }
  sc_client_close(c);
  sc_local_cluster_stop(lc);
  cr_assert_eq(ended, 2, "%d of the 2 requests ended (the waiting one stalled?)", ended);
  cr_assert(failed[0] && !failed[1], "A %s, B %s", failed[0] ? "failed" : "completed",
            failed[1] ? "failed" : "completed");
  cr_assert_not_null(strstr(msg, want), "%s", msg);
  cr_assert_eq(tokens[1], 2);
  assert_no_nodes_left();
}

static void failed_ack_case(const char *inject, const char *want) {
  failed_ack_case_on(2, 2, inject, want);
}

Test(pipeline, a_wrong_plan_ack_fails_its_step_and_the_queue_goes_on) {
  failed_ack_case("badack:1:1", "step 1 failed: rank 1 acknowledged plan fingerprint");
}

/* A lost acknowledgement: the step's result waits for it the collective deadline (1 s
 * here), then the step fails, and the queue goes on. */
Test(pipeline, a_lost_plan_ack_fails_its_step_after_the_deadline) {
  failed_ack_case("noack:1:1", "step 1 failed: rank 1: no plan acknowledgement within 1000 ms");
}

/* A lost step_complete: rank 0's result is held the same way, then the step fails. */
Test(pipeline, a_lost_completion_fails_its_step_after_the_deadline) {
  failed_ack_case("nocomplete:1:1",
                  "step 1 failed: rank 1: no report that it completed the step within 1000 ms");
}

/* A device that fails (on the CPU backend as the CUDA one does after a kernel faults:
 * every later sync reports SC_EDEVICE) fails its step with an error that says so, and
 * the cluster stops: without that, every later step failed the same way on a cluster
 * that looked alive (here B would have been served on host collectives). The failure is
 * known only at the end of rank 1's step, after every collective ran, so rank 0's result
 * of step 1 often reaches the scheduler first: it must wait for rank 1's word (step 1's
 * tokens used to go out, and A failed only in step 2). */
Test(pipeline, a_failed_device_stops_the_cluster, .timeout = 60) {
  sc_client *c;
  uint64_t id[2];
  sc_local_cluster *lc = start_a_then_b(2, 2, "devfault:1:1", &c, id);
  char msg[512];
  cr_assert_lt(finish(c, id[0], msg, sizeof msg), 0, "A was served");
  cr_assert(strstr(msg, "step 1 failed: rank 1: a kernel failed on the device") &&
                strstr(msg, "the device cannot be used again"),
            "%s", msg);
  cr_assert_lt(finish(c, id[1], msg, sizeof msg), 0, "B was served by a failed device");
  char died[256] = "";
  const uint64_t until = sc_now_ns() + 10ull * 1000000000ull;
  int ended = 0;
  while (ended == 0 && sc_now_ns() < until) {
    ended = sc_local_cluster_poll(lc, died, sizeof died);
    if (ended == 0) usleep(20000);
  }
  cr_assert_gt(ended, 0, "no node stopped");
  sc_client_close(c);
  sc_local_cluster_stop(lc);
  assert_no_nodes_left();
}

/* A client with a long request decoding, steps back to back. */
typedef struct decoding {
  sc_client *c;
  uint64_t id;
  sc_client_request r;
  int32_t prompt[64];
} decoding;

/* A 2 x 2 cluster of the small model (10 s collective deadline; heartbeat timeout hb_ms,
 * 0: the default) with a client's request decoding (dc). */
static sc_local_cluster *start_decoding(int32_t hb_ms, decoding *dc) {
  private_tmp();
  sc_local_cluster_opts o = {.pcp = 2, .dcp = 2, .tp = 1, .exe = EXE,
                             .model_file = SRC "/examples/model-small.json", .quiet = true,
                             .log_level = "error", .deadline_ms = 10000,
                             .heartbeat_ms = hb_ms ? 200 : 0, .heartbeat_timeout_ms = hb_ms};
  sc_local_cluster *lc = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_local_cluster_start(&o, &lc, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_client_connect(&dc->c, sc_local_cluster_listen(lc), NULL), 0);
  for (int i = 0; i < 64; i++) dc->prompt[i] = (i * 7) % SMALL_VOCAB;
  dc->r = (sc_client_request){.prompt = dc->prompt, .prompt_len = 64, .max_tokens = 4000};
  cr_assert_eq(sc_client_submit(dc->c, &dc->r, &dc->id), 0);
  int got = 0;
  for (int k = 0; k < 200 && got < 8; k++) {
    sc_client_event ev;
    if (sc_client_next(dc->c, 100, &ev) == 0 && ev.kind == SC_CLIENT_TOKENS) got += ev.n;
  }
  cr_assert_geq(got, 8, "the request is not decoding");
  return lc;
}

/* Waits up to 15 s after t0 for node `rank` to exit: whether it did, and when (ms). */
static bool wait_node_exit(sc_local_cluster *lc, int32_t rank, uint64_t t0, double *ms) {
  bool gone = false;
  while (!gone && sc_now_ns() - t0 < 15ull * 1000000000ull) {
    sc_local_exit ex[4];
    const int n = sc_local_cluster_reap(lc, ex, 4);
    for (int i = 0; i < n; i++) gone |= ex[i].rank == rank;
    if (!gone) usleep(10000);
  }
  *ms = (double)(sc_now_ns() - t0) / 1e6;
  return gone;
}

/* A node that loses the head stops within a second, also when its executor is inside a
 * collective with the dead head: stopping aborts the collectives in flight. It used to
 * wait out the collective's deadline (10 s here, the default) before it could stop. The
 * client, whose request was decoding, hears SC_EDOWN within 2 s. */
Test(pipeline, survivors_of_a_head_death_stop_within_a_second, .timeout = 60) {
  decoding dc;
  sc_local_cluster *lc = start_decoding(0, &dc);
  sc_client *c = dc.c;
  uint64_t id = dc.id;
  const sc_client_request r = dc.r;
  cr_assert_eq(kill(sc_local_cluster_pid(lc, 0), SIGKILL), 0);
  const uint64_t t0 = sc_now_ns();
  /* the client hears that its server is gone, within 2 s (it used to learn nothing and
   * wait for its own timeout) */
  int code = 0;
  while (code == 0 && sc_now_ns() - t0 < 5ull * 1000000000ull) {
    sc_client_event ev;
    if (sc_client_next(c, 100, &ev) == 0 && ev.kind == SC_CLIENT_ERROR && ev.request_id == id)
      code = ev.code;
  }
  const double client_ms = (double)(sc_now_ns() - t0) / 1e6;
  cr_assert_eq(code, SC_EDOWN, "the client got %d for its request", code);
  cr_assert_lt(client_ms, 2000.0, "the client heard of the head's death after %.0f ms",
               client_ms);
  cr_assert_eq(sc_client_submit(c, &r, &id), SC_EDOWN, "a submit to a dead head");
  double ms = 0;
  cr_assert(wait_node_exit(lc, 1, t0, &ms), "node 1 still runs 15 s after the head died");
  cr_assert_lt(ms, 1500.0, "node 1 stopped %.0f ms after the head died", ms);
  sc_client_close(c);
  sc_local_cluster_stop(lc);
  assert_no_nodes_left();
}

/* SIGTERM is honoured within a second also by a node stuck in a collective (issue 22): a
 * decoding 2-node cluster whose node 1 is frozen (SIGSTOP) leaves node 0 waiting for it
 * inside a step, under a 10 s collective deadline; SIGTERM to node 0 must end it at once,
 * the collective aborted, not after the deadline. */
Test(pipeline, sigterm_ends_a_node_waiting_in_a_collective_within_a_second, .timeout = 60) {
  /* heartbeats that would notice the frozen node only after 20 s: only SIGTERM can end
   * node 0 within the second */
  decoding dc;
  sc_local_cluster *lc = start_decoding(20000, &dc);
  const pid_t head = sc_local_cluster_pid(lc, 0), other = sc_local_cluster_pid(lc, 1);
  cr_assert_eq(kill(other, SIGSTOP), 0);
  /* node 0 reaches the next collective with node 1 and waits there: after a moment no
   * more tokens come (every step needs both nodes) */
  const uint64_t frozen = sc_now_ns();
  uint64_t last_token = frozen;
  while (sc_now_ns() - frozen < 800ull * 1000000ull) {
    sc_client_event ev;
    if (sc_client_next(dc.c, 50, &ev) == 0 && ev.kind == SC_CLIENT_TOKENS) last_token = sc_now_ns();
  }
  cr_assert_lt(last_token - frozen, 400ull * 1000000ull,
               "tokens still came %.0f ms after node 1 froze: node 0 is not waiting for it",
               (double)(last_token - frozen) / 1e6);
  cr_assert_eq(kill(head, SIGTERM), 0);
  double ms = 0;
  const bool head_gone = wait_node_exit(lc, 0, sc_now_ns(), &ms);
  kill(other, SIGCONT);
  cr_assert(head_gone, "node 0 still runs 15 s after SIGTERM");
  cr_assert_lt(ms, 1000.0, "node 0 stopped %.0f ms after SIGTERM, inside a collective", ms);
  sc_client_close(dc.c);
  sc_local_cluster_stop(lc);
  assert_no_nodes_left();
}

/* An orderly stop of the head answers the requests it still holds: on a one-node
 * cluster nothing else would (no peer's DOWN reaches the scheduler), and the client of
 * a streaming request used to wait for an answer that never came. */
Test(pipeline, an_orderly_stop_answers_the_requests_in_flight, .timeout = 60) {
  sc_client *c;
  sc_local_cluster *lc = start_with_client(1, 1, NULL, &c);
  int32_t prompt[10];
  for (int i = 0; i < 10; i++) prompt[i] = i + 1;
  const sc_client_request r = {.prompt = prompt, .prompt_len = 10, .max_tokens = 3000};
  uint64_t id;
  cr_assert_eq(sc_client_submit(c, &r, &id), 0);
  sc_client_event ev;
  int tokens = 0;
  for (int k = 0; k < 100 && tokens == 0; k++)
    if (sc_client_next(c, 100, &ev) == 0 && ev.request_id == id && ev.kind == SC_CLIENT_TOKENS)
      tokens += ev.n;
  cr_assert_gt(tokens, 0, "the request never started streaming");
  sc_local_cluster_stop(lc); /* SIGTERM to the head, as Ctrl-C to launch */
  /* what the head sent before it went is still in the client's socket */
  bool ended = false;
  char msg[512] = "";
  for (int k = 0; k < 20 && !ended; k++) {
    if (sc_client_next(c, 100, &ev) != 0 || ev.request_id != id) continue;
    if (ev.kind == SC_CLIENT_ERROR) snprintf(msg, sizeof msg, "%s", ev.message);
    ended = ev.kind != SC_CLIENT_TOKENS;
  }
  sc_client_close(c);
  cr_assert(ended, "the request in flight was never answered");
  cr_assert_not_null(strstr(msg, "shutting down"), "%s", msg);
  assert_no_nodes_left();
}

/* A client that sends and never reads: the gateway's replies to it fill its queue, and
 * the gateway, which shares its loop with the scheduler, must drop them rather than wait
 * (it used to block in zmq_send, and every other client's requests with it). */
Test(pipeline, a_client_that_never_reads_does_not_stall_the_others, .timeout = 120) {
  sc_client *good;
  sc_local_cluster *lc = start_with_client(1, 1, NULL, &good);
  void *zctx = zmq_ctx_new(), *deaf = zmq_socket(zctx, ZMQ_DEALER);
  const int one = 1, small = 4096, zero = 0;
  zmq_setsockopt(deaf, ZMQ_RCVHWM, &one, sizeof one);
  zmq_setsockopt(deaf, ZMQ_RCVBUF, &small, sizeof small);
  zmq_setsockopt(deaf, ZMQ_LINGER, &zero, sizeof zero);
  cr_assert_eq(zmq_connect(deaf, sc_local_cluster_listen(lc)), 0);
  /* cancels of ids it never used: each one is answered with an error it never reads;
   * far more than ZeroMQ queues for one client (1000 messages by default) */
  sc_buf b;
  sc_buf_init(&b);
  for (uint64_t id = 1; id <= 5000; id++) {
    const sc_msg_client_cancel m = {.request_id = id};
    const sc_envelope env = {.type = SC_MSG_CLIENT_CANCEL};
    cr_assert_eq(sc_msg_encode(&env, &m, &b), 0);
    cr_assert_eq(zmq_send(deaf, b.data, b.len, 0), (int)b.len);
  }
  usleep(500000);
  int32_t prompt[4] = {5, 6, 7, 8};
  const sc_client_request r = {.prompt = prompt, .prompt_len = 4, .max_tokens = 2};
  uint64_t id;
  char err[512] = "";
  cr_assert_eq(sc_client_submit(good, &r, &id), 0);
  const int got = finish(good, id, err, sizeof err);
  zmq_close(deaf);
  zmq_ctx_term(zctx);
  sc_buf_free(&b);
  sc_client_close(good);
  sc_local_cluster_stop(lc);
  cr_assert_eq(got, 2, "the other client's request: %s", err);
  assert_no_nodes_left();
}

Test(pipeline, hostile_clients_get_errors_others_are_served) {
  sc_client *good, *bad;
  sc_local_cluster *lc = start_with_client(2, 2, NULL, &good);
  cr_assert_eq(sc_client_connect(&bad, sc_local_cluster_listen(lc), NULL), 0);
  int32_t prompt[40];
  for (int i = 0; i < 40; i++) prompt[i] = (i * 97) % SMALL_VOCAB;
  const sc_client_request ok_req = {.prompt = prompt, .prompt_len = 40, .max_tokens = 6};
  uint64_t good_id;
  cr_assert_eq(sc_client_submit(good, &ok_req, &good_id), 0);

  char msg[512];
  /* garbage bytes */
  const uint8_t garbage[] = {0x93, 0xc1, 0xff, 0x00, 0x12};
  cr_assert_eq(sc_client_send_raw(bad, garbage, sizeof garbage), 0);
  cr_assert_eq(next_error(bad, msg, sizeof msg), SC_EPROTO, "%s", msg);
  /* the 5-byte array that declares 67 million elements */
  const uint8_t huge_array[] = {0xdd, 0x04, 0x00, 0x00, 0x00};
  cr_assert_eq(sc_client_send_raw(bad, huge_array, sizeof huge_array), 0);
  cr_assert_lt(next_error(bad, msg, sizeof msg), 0);
  /* a truncated valid message */
  sc_buf b;
  sc_buf_init(&b);
  sc_msg_client_submit sub = {.request_id = 77, .prompt = {prompt, 8}, .max_tokens = 2};
  sc_envelope env = {.type = SC_MSG_CLIENT_SUBMIT};
  cr_assert_eq(sc_msg_encode(&env, &sub, &b), 0);
  cr_assert_eq(sc_client_send_raw(bad, b.data, b.len - 3), 0);
  cr_assert_eq(next_error(bad, msg, sizeof msg), SC_EPROTO, "%s", msg);
  /* oversized: 1.5 MiB of bin payload */
  const size_t big = 3u << 19;
  uint8_t *blob = calloc(big, 1);
  blob[0] = 0xc6; /* bin32 */
  blob[1] = 0x00, blob[2] = 0x17, blob[3] = 0xff, blob[4] = 0xfa;
  cr_assert_eq(sc_client_send_raw(bad, blob, big), 0);
  cr_assert_eq(next_error(bad, msg, sizeof msg), SC_ETOOBIG, "%s", msg);
  free(blob);
  /* absurd field values: a token id past the vocabulary, max_tokens 0 */
  prompt[3] = 1 << 30;
  const sc_client_request absurd = {.prompt = prompt, .prompt_len = 8, .max_tokens = 3};
  uint64_t id;
  cr_assert_eq(sc_client_submit(bad, &absurd, &id), 0);
  cr_assert_eq(next_error(bad, msg, sizeof msg), SC_EINVAL, "%s", msg);
  cr_assert_not_null(strstr(msg, "vocabulary"), "%s", msg);
  prompt[3] = 5;
  sub.max_tokens = 0;
  cr_assert_eq(sc_msg_encode(&env, &sub, &b), 0);
  cr_assert_eq(sc_client_send_raw(bad, b.data, b.len), 0);
  cr_assert_lt(next_error(bad, msg, sizeof msg), 0);
  /* a message type clients may not send */
  sc_msg_ping ping = {.seq = 1};
  env.type = SC_MSG_PING;
  cr_assert_eq(sc_msg_encode(&env, &ping, &b), 0);
  cr_assert_eq(sc_client_send_raw(bad, b.data, b.len), 0);
  cr_assert_eq(next_error(bad, msg, sizeof msg), SC_EPROTO, "%s", msg);
  /* ... refused by its envelope: its body, cut short here, is never decoded */
  cr_assert_eq(sc_client_send_raw(bad, b.data, b.len - 3), 0);
  cr_assert_eq(next_error(bad, msg, sizeof msg), SC_EPROTO, "%s", msg);
  cr_assert_not_null(strstr(msg, "only client_submit"), "%s", msg);

  /* the well-behaved client was served throughout, and the cluster still serves */
  cr_assert_eq(finish(good, good_id, msg, sizeof msg), 6, "%s", msg);
  /* a request id this client has in flight already (the gateway looks the pair up by
   * client identity and id); the same id from another client is that client's own */
  const sc_client_request long_req = {.prompt = prompt, .prompt_len = 8, .max_tokens = 200};
  uint64_t live;
  cr_assert_eq(sc_client_submit(bad, &long_req, &live), 0);
  sc_msg_client_submit again = {.request_id = live, .prompt = {prompt, 8}, .max_tokens = 2};
  env.type = SC_MSG_CLIENT_SUBMIT;
  cr_assert_eq(sc_msg_encode(&env, &again, &b), 0);
  cr_assert_eq(sc_client_send_raw(bad, b.data, b.len), 0);
  cr_assert_eq(next_error(bad, msg, sizeof msg), SC_EINVAL, "%s", msg);
  cr_assert_not_null(strstr(msg, "already in use"), "%s", msg);
  cr_assert_eq(sc_client_send_raw(good, b.data, b.len), 0);
  cr_assert_eq(finish(good, live, msg, sizeof msg), 2, "%s", msg);
  /* a cancel of an id this client never used, then of the live one */
  cr_assert_eq(sc_client_cancel(bad, live + 1000), 0);
  cr_assert_eq(next_error(bad, msg, sizeof msg), SC_ENOENT, "%s", msg);
  cr_assert_eq(sc_client_cancel(bad, live), 0);
  cr_assert_geq(finish(bad, live, msg, sizeof msg), 0, "%s", msg);
  sc_buf_free(&b);
  cr_assert_eq(sc_client_submit(bad, &ok_req, &id), 0);
  cr_assert_eq(finish(bad, id, msg, sizeof msg), 6, "%s", msg);
  char died[256];
  cr_assert_eq(sc_local_cluster_poll(lc, died, sizeof died), 0, "%s", died);
  sc_client_close(good);
  sc_client_close(bad);
  sc_local_cluster_stop(lc);
  assert_no_nodes_left();
}

/* A tap on rank 0 for `filter` (--count `count`) attached once the cluster serves (a
 * request answered), then three 3-token requests one after the other: at least three
 * steps after the tap attached. */
static FILE *tap_three_requests(sc_local_cluster *lc, sc_client *c, const char *filter,
                                int count) {
  int32_t prompt[30];
  for (int i = 0; i < 30; i++) prompt[i] = i + 1;
  const sc_client_request req = {.prompt = prompt, .prompt_len = 30, .max_tokens = 3};
  uint64_t id;
  char msg[256];
  cr_assert_eq(sc_client_submit(c, &req, &id), 0);
  cr_assert_eq(finish(c, id, msg, sizeof msg), 3, "%s", msg);
  FILE *tap = open_tap(lc, filter, count);
  for (int k = 0; k < 3; k++) {
    cr_assert_eq(sc_client_submit(c, &req, &id), 0);
    cr_assert_eq(finish(c, id, msg, sizeof msg), 3, "%s", msg);
  }
  return tap;
}

Test(pipeline, tap_shows_step_plans_and_their_collectives) {
  sc_client *c;
  sc_local_cluster *lc = start_with_client(2, 2, NULL, &c);
  FILE *tap = tap_three_requests(lc, c, "0/metadata/step_plan", 3);
  /* the tap stops after three step plans (--count 3); each carries its collectives */
  int plans = 0, with_colls = 0;
  char line[1 << 16];
  while (plans < 3 && fgets(line, sizeof line, tap)) {
    /* fingerprints are u64 and may exceed jansson's int64: read numbers as reals */
    json_error_t jerr;
    json_t *j = json_loads(line, JSON_DECODE_INT_AS_REAL, &jerr);
    cr_assert_not_null(j, "the tap printed invalid JSON (%s): %.200s", jerr.text, line);
    const char *type = json_string_value(json_object_get(j, "type"));
    if (type && strcmp(type, "step_plan") == 0) plans++;
    if (json_array_size(json_object_get(json_object_get(j, "body"), "colls")) > 0) with_colls++;
    json_decref(j);
  }
  cr_assert_eq(plans, 3);
  cr_assert_eq(with_colls, 3, "step plans without their collective plan");
  sc_client_close(c);
  sc_local_cluster_stop(lc);
  pclose(tap);
  assert_no_nodes_left();
}

/* With the pipeline's "profile", rank 0's step results carry the step's time per stage
 * (model/step_prof.h), within the step's compute time; without it they carry none. */
static void stage_times_case(bool profile) {
  private_tmp();
  sc_local_cluster *lc = start_small_profiled(2, 2, NULL, profile);
  sc_client *c;
  cr_assert_eq(sc_client_connect(&c, sc_local_cluster_listen(lc), NULL), 0);
  FILE *tap = tap_three_requests(lc, c, "0/scheduler/step_result", 3);
  int results = 0;
  char line[1 << 16];
  while (results < 3 && fgets(line, sizeof line, tap)) {
    json_error_t jerr;
    json_t *j = json_loads(line, JSON_DECODE_INT_AS_REAL, &jerr);
    cr_assert_not_null(j, "the tap printed invalid JSON (%s): %.200s", jerr.text, line);
    json_t *body = json_object_get(j, "body"), *st = json_object_get(body, "stage_ns");
    const double compute = json_number_value(json_object_get(body, "compute_ns"));
    cr_assert(json_is_array(st), "%.300s", line);
    /* the CPU cannot tell busy device time from the host's: never zeros as if measured */
    cr_assert_eq(json_array_size(json_object_get(body, "device_ns")), 0, "%.300s", line);
    if (!profile) {
      cr_assert_eq(json_array_size(st), 0, "an unprofiled step with stage times: %.300s", line);
    } else {
      cr_assert_eq(json_array_size(st), SC_STAGE_COUNT, "%.300s", line);
      double sum = 0;
      for (size_t i = 0; i < json_array_size(st); i++) sum += json_number_value(json_array_get(st, i));
      cr_assert(sum > 0 && sum <= compute, "stages %.0f ns, compute %.0f ns", sum, compute);
      cr_assert(json_number_value(json_array_get(st, SC_STAGE_DENSE)) > 0, "%.300s", line);
      cr_assert(json_number_value(json_array_get(st, SC_STAGE_COLL)) > 0, "%.300s", line);
    }
    results++;
    json_decref(j);
  }
  cr_assert_eq(results, 3);
  sc_client_close(c);
  sc_local_cluster_stop(lc);
  pclose(tap);
  assert_no_nodes_left();
}

/* The benches' tap reader (tools/tap_steps.h) gets each step of a request from rank 0's
 * tap, decoded, in order, once its subscription is up. */
/* k_prompt's requests of `tokens` tokens on c until their steps show on rank 0's tap:
 * the tap, its subscription up and drained. */
static const int32_t k_prompt[30] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                                     16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30};
static sc_tap_steps *tap_steps_up(sc_local_cluster *lc, sc_client *c, int32_t tokens) {
  sc_tap_steps *tap = NULL;
  cr_assert_eq(sc_tap_steps_open(sc_local_cluster_tap(lc, 0), &tap), 0);
  const sc_client_request req = {.prompt = k_prompt, .prompt_len = 30, .max_tokens = tokens};
  uint64_t id;
  char msg[256];
  int seen = 0;
  for (int tries = 0; tries < 20 && seen == 0; tries++) {
    cr_assert_eq(sc_client_submit(c, &req, &id), 0);
    cr_assert_eq(finish(c, id, msg, sizeof msg), tokens, "%s", msg);
    seen = sc_tap_steps_drain(tap, 300);
  }
  cr_assert_gt(seen, 0, "no step result on the tap after 20 requests");
  return tap;
}

/* One request of k_prompt and `tokens` tokens on c, to its end. */
static void one_request(sc_client *c, int32_t tokens) {
  const sc_client_request req = {.prompt = k_prompt, .prompt_len = 30, .max_tokens = tokens};
  uint64_t id;
  char msg[256];
  cr_assert_eq(sc_client_submit(c, &req, &id), 0);
  cr_assert_eq(finish(c, id, msg, sizeof msg), tokens, "%s", msg);
}

Test(pipeline, the_tap_step_reader_sees_every_step_of_a_request) {
  private_tmp();
  sc_local_cluster *lc = start_small_profiled(2, 2, NULL, true);
  sc_client *c;
  cr_assert_eq(sc_client_connect(&c, sc_local_cluster_listen(lc), NULL), 0);
  sc_tap_steps *tap = tap_steps_up(lc, c, 4);
  one_request(c, 4);
  for (int k = 0; k < 4; k++) { /* the prefill step, then three decode steps */
    sc_msg_step_result *r = NULL;
    cr_assert_eq(sc_tap_steps_next(tap, 2000, &r), 0, "step %d of the request", k);
    cr_assert_eq(r->sampled.n, 1);
    cr_assert_eq(r->stage_ns.n, SC_STAGE_COUNT);
    cr_assert_eq(r->device_ns.n, 0, "the CPU cannot tell busy device time");
    cr_assert_eq(r->gap_ns, -1, "a profiled step, never overlapped, with a gap of %lld ns",
                 (long long)r->gap_ns);
    sc_msg_body_destroy(SC_MSG_STEP_RESULT, r);
  }
  sc_msg_step_result *extra = NULL;
  cr_assert_eq(sc_tap_steps_next(tap, 200, &extra), SC_ETIMEDOUT, "a step the request did not run");
  sc_tap_steps_close(tap);
  sc_client_close(c);
  sc_local_cluster_stop(lc);
  assert_no_nodes_left();
}

Test(pipeline, profiled_steps_report_their_stage_times) { stage_times_case(true); }
Test(pipeline, unprofiled_steps_report_no_stage_times) { stage_times_case(false); }

/* step_result.gap_ns: a step queued while the one before ran carries the time from that
 * one's last compute op to its own first (on the CPU, whose ops run as they are queued,
 * the host's time between them), a step one at a time -1. One request of 16 tokens at
 * P2 N2: with overlap on its decode steps are planned ahead; off, none is. */
static void gap_case(const char *overlap) {
  private_tmp();
  g_overlap = overlap;
  sc_local_cluster *lc = start_small_profiled(2, 2, NULL, false);
  g_overlap = NULL;
  sc_client *c;
  cr_assert_eq(sc_client_connect(&c, sc_local_cluster_listen(lc), NULL), 0);
  sc_tap_steps *tap = tap_steps_up(lc, c, 2);
  one_request(c, 16);
  int with_gap = 0;
  for (int k = 0; k < 16; k++) {
    sc_msg_step_result *r = NULL;
    cr_assert_eq(sc_tap_steps_next(tap, 2000, &r), 0, "step %d of the request", k);
    cr_assert(r->gap_ns >= -1, "step %d: gap %lld ns", k, (long long)r->gap_ns);
    with_gap += r->gap_ns >= 0;
    sc_msg_body_destroy(SC_MSG_STEP_RESULT, r);
  }
  if (strcmp(overlap, "on") == 0)
    cr_assert_gt(with_gap, 0, "overlap on: no step of 16 carried a gap");
  else
    cr_assert_eq(with_gap, 0, "overlap off: %d steps of 16 carried a gap", with_gap);
  sc_tap_steps_close(tap);
  sc_client_close(c);
  sc_local_cluster_stop(lc);
  assert_no_nodes_left();
}

Test(pipeline, overlapped_steps_report_the_gap_before_them) { gap_case("on"); }
Test(pipeline, steps_one_at_a_time_report_no_gap) { gap_case("off"); }

/* A client that goes away mid-request: the gateway's next reply finds it unreachable and
 * cancels its request at the scheduler (seen on the tap), instead of generating on. */
Test(pipeline, a_vanished_client_has_its_request_canceled) {
  private_tmp();
  sc_local_cluster *lc = start_small(2, 2);
  /* the tap also shows the request's step results: one read after the first token proves
   * its subscription up before the client leaves (a fixed wait was once too short on a
   * loaded machine, and the cancel went by unseen) */
  pid_t tap_pid;
  FILE *tap = spawn_tap(lc, "--filter 0/scheduler/client_cancel --filter 0/scheduler/step_result",
                        1 << 20, &tap_pid);
  sc_client *c;
  cr_assert_eq(sc_client_connect(&c, sc_local_cluster_listen(lc), NULL), 0);
  int32_t prompt[10];
  for (int i = 0; i < 10; i++) prompt[i] = i + 3;
  const sc_client_request req = {.prompt = prompt, .prompt_len = 10, .max_tokens = 3000};
  uint64_t id;
  cr_assert_eq(sc_client_submit(c, &req, &id), 0);
  sc_client_event ev;
  bool got_token = false;
  for (int k = 0; k < 100 && !got_token; k++)
    got_token = sc_client_next(c, 100, &ev) == 0 && ev.kind == SC_CLIENT_TOKENS;
  cr_assert(got_token, "no token arrived");
  char line[1 << 16];
  cr_assert_not_null(fgets(line, sizeof line, tap), "the tap showed no step of the request");
  sc_client_close(c); /* gone, with up to 2999 tokens still to come */
  bool canceled = false;
  while (!canceled && fgets(line, sizeof line, tap))
    canceled = strstr(line, "\"type\":\"client_cancel\"") != NULL;
  cr_assert(canceled, "no client_cancel reached the scheduler");
  kill(tap_pid, SIGTERM); /* (timeout passes it on to the tap) */
  sc_local_cluster_stop(lc);
  pclose(tap);
  assert_no_nodes_left();
}

/* ---- overlapped steps (docs/pipeline.md): the pipeline's "overlap" on ---- */

/* The tokens of every request of a --json run, one line each, into buf. */
static void tokens_of(json_t *j, char *buf, size_t len) {
  json_t *res = json_object_get(j, "results"), *r;
  size_t i, at = 0;
  buf[0] = '\0';
  json_array_foreach(res, i, r) {
    char *t = json_dumps(json_object_get(r, "tokens"), JSON_COMPACT);
    cr_assert_not_null(t);
    at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%zu %s\n", i, t);
    free(t);
  }
  cr_assert_lt(at, len);
}

/* Steps planned ahead take their input tokens from the step before on the "device" (on
 * the CPU, which queues them as it computes them: forced with overlap on) and give
 * exactly the tokens of steps run one at a time; the executors' logs say how many were
 * queued while the step before ran. layout: the run's --pcp and --dcp. */
static void overlapped_like_one_at_a_time_of(const char *layout, const char *stream) {
  private_tmp();
  static char on[1 << 16], off[1 << 16];
  char args[768], log[128];
  snprintf(log, sizeof log, "%s/run.log", g_tmp);
  for (int k = 0; k < 2; k++) {
    snprintf(args, sizeof args,
             "%s --requests %s/tests/pipeline/%s --token-budget 24 "
             "--clients 3 --timeout 120 --overlap %s 2> %s", layout, SRC, stream,
             k ? "off" : "on", log);
    json_t *j;
    setenv("SPARSECP_LOG", "info", 1); /* (the nodes' logs, with the run's progress) */
    const int rc = run_json_logged(args, false, &j);
    unsetenv("SPARSECP_LOG");
    cr_assert_eq(rc, 0, "overlap %s: exit %d, error: %s", k ? "off" : "on", rc,
                 json_string_value(json_object_get(j, "error")));
    cr_assert_eq(json_integer_value(json_object_get(j, "generated_tokens")), 65);
    tokens_of(j, k ? off : on, sizeof on);
    json_decref(j);
    /* "rank R: of S steps, N queued while the step before ran, ..." */
    FILE *f = fopen(log, "r");
    cr_assert_not_null(f);
    char line[1024];
    long overlapped = -1, most = -1; /* the fewest and the most of any rank */
    int ranks = 0;
    while (fgets(line, sizeof line, f)) {
      const char *at = strstr(line, " queued while the step before ran");
      if (at == NULL) continue;
      while (at > line && at[-1] >= '0' && at[-1] <= '9') at--;
      const long v = strtol(at, NULL, 10);
      overlapped = ranks == 0 || v < overlapped ? v : overlapped;
      most = v > most ? v : most;
      ranks++;
    }
    fclose(f);
    unlink(log);
    cr_assert_gt(ranks, 0, "%s: no executor said how many steps it queued", layout);
    if (k == 0)
      cr_assert_gt(overlapped, 10, "%s, overlap on: a rank overlapped %ld steps", layout,
                   overlapped);
    else
      cr_assert_eq(most, 0, "%s, overlap off: a rank overlapped %ld steps", layout, most);
  }
  cr_assert_str_eq(on, off, "%s", layout);
  assert_no_nodes_left();
}

static void overlapped_like_one_at_a_time(const char *layout) {
  overlapped_like_one_at_a_time_of(layout, "stream.jsonl");
}

Test(pipeline, overlapped_steps_give_the_tokens_of_steps_run_one_at_a_time) {
  overlapped_like_one_at_a_time("--pcp 1 --dcp 1");
}

/* Several ranks with host collectives: every rank takes the tokens from its own device's
 * greedy rows, and the collectives of the step planned ahead run right behind those of
 * the step before. */
Test(pipeline, overlapped_steps_on_several_ranks_give_the_same_tokens, .timeout = 120) {
  overlapped_like_one_at_a_time("--pcp 2 --dcp 2");
}

/* Requests drawn at a temperature: overlapped, the draw is the kernels' (draw_rows, on
 * every rank's device) and the step planned ahead takes it there; one at a time, the
 * head draws from the logits (sc_sample_temperature). The same tokens. */
Test(pipeline, overlapped_steps_draw_the_tokens_of_steps_run_one_at_a_time, .timeout = 120) {
  overlapped_like_one_at_a_time_of("--pcp 2 --dcp 2", "stream_hot.jsonl");
}

/* A failure of a step fails the step planned ahead of it too (it took its tokens from
 * the failed one): A, in both, fails with a message naming both, and B, which arrived
 * after both were planned, is served. */
Test(pipeline, a_failed_step_fails_the_step_planned_ahead_and_the_queue_goes_on) {
  g_overlap = "on";
  failed_ack_case_on(1, 1, "badack:0:1",
                     "steps 1 and 2 failed: rank 0 acknowledged plan fingerprint");
}

/* The pipeline's "overlap": auto, on or off; not while profiled; auto only on CUDA;
 * several ranks only with host collectives (not NCCL's). */
Test(pipeline, the_overlap_key_says_where_steps_overlap) {
  static const struct {
    const char *value, *more;
    int ranks, rc;
    bool overlaps;
  } cases[] = {{"\"auto\"", "", 1, 0, false},  /* the CPU */
               {"\"on\"", "", 1, 0, true},
               {"\"on\"", ",\"profile\":true", 1, 0, false},
               {"\"on\"", "", 2, 0, true},
               {"\"auto\"", "", 2, 0, false},  /* the CPU */
               {"\"auto\"", ",\"device\":\"cuda\"", 2, 0, true},
               {"\"auto\"", ",\"device\":\"cuda\",\"collectives\":\"nccl\"", 2, 0, false},
               {"\"auto\"", ",\"device\":\"cuda\",\"collectives\":\"host\"", 2, 0, true},
               {"\"auto\"", ",\"device\":\"cuda\",\"profile\":true", 2, 0, false},
               {"\"off\"", ",\"device\":\"cuda\"", 2, 0, false},
               {"\"auto\"", ",\"device\":\"cuda\"", 1, 0, true},
               {"\"on\"", ",\"collectives\":\"nccl\"", 2, 0, false},
               {"\"on\"", ",\"collectives\":\"nccl\"", 1, 0, true},
               {"\"off\"", "", 1, 0, false},
               {"\"yes\"", "", 1, SC_EINVAL, false},
               {"true", "", 1, SC_EINVAL, false}};
  char dir[] = "/tmp/sc-pipecfg-XXXXXX", json[128];
  cr_assert_not_null(mkdtemp(dir));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(json, sizeof json, "{\"overlap\":%s%s}", cases[i].value, cases[i].more);
    sc_diag d = {0};
    sc_pipeline_config pc;
    const int rc = load_pipeline(dir, cases[i].ranks, json, &pc, &d);
    cr_assert_eq(rc, cases[i].rc, "case %zu: %s", i, sc_diag_message(&d));
    if (rc == 0) {
      cr_assert_eq(sc_pipeline_overlaps(&pc), cases[i].overlaps, "case %zu", i);
      sc_pipeline_config_free(&pc);
    } else {
      cr_assert(strstr(d.msg, "overlap must be"), "%s", d.msg);
    }
  }
  rmdir(dir);
}

/* The tokens of two requests (40 and 7 prompt tokens, 30 new each) on a cluster of
 * pcp x dcp ranks with overlap on and `inject` (NULL: none) and step retries; each
 * request's tokens into toks[k] (up to 30), their counts into n[k]; fails the test on an
 * error. */
static void two_requests_overlapped_on(int pcp, int dcp, const char *inject,
                                       int64_t deadline_ms, int32_t toks[2][30], int n[2]) {
  private_tmp();
  sc_local_cluster_opts o = {.pcp = pcp, .dcp = dcp, .tp = 1, .exe = EXE,
                             .model_file = SRC "/examples/model-small.json", .quiet = true,
                             .log_level = "error", .overlap = "on", .step_retries = 2};
  if (inject) {
    o.inject[0] = inject;
    o.num_inject = 1;
    o.deadline_ms = deadline_ms > 0 ? deadline_ms : 1000;
  }
  sc_local_cluster *lc = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_local_cluster_start(&o, &lc, &d), 0, "%s", d.msg);
  sc_client *c;
  cr_assert_eq(sc_client_connect(&c, sc_local_cluster_listen(lc), NULL), 0);
  int32_t prompt[40];
  for (int i = 0; i < 40; i++) prompt[i] = (i * 37 + 11) % SMALL_VOCAB;
  const sc_client_request a = {.prompt = prompt, .prompt_len = 40, .max_tokens = 30};
  const sc_client_request b = {.prompt = prompt + 20, .prompt_len = 7, .max_tokens = 30};
  uint64_t id[2];
  cr_assert_eq(sc_client_submit(c, &a, &id[0]), 0);
  cr_assert_eq(sc_client_submit(c, &b, &id[1]), 0);
  n[0] = n[1] = 0;
  int ended = 0;
  const uint64_t until = sc_now_ns() + 60ull * 1000000000ull;
  while (ended < 2 && sc_now_ns() < until) {
    sc_client_event ev;
    if (sc_client_next(c, 200, &ev) != 0) continue;
    const int k = ev.request_id == id[0] ? 0 : ev.request_id == id[1] ? 1 : -1;
    if (k < 0) continue;
    cr_assert_neq(ev.kind, SC_CLIENT_ERROR, "%s: request %d: %s", inject ? inject : "none", k,
                  ev.message);
    if (ev.kind == SC_CLIENT_TOKENS) {
      for (int32_t i = 0; i < ev.n && n[k] < 30; i++) toks[k][n[k]++] = ev.tokens[i];
    } else {
      ended++;
    }
  }
  sc_client_close(c);
  sc_local_cluster_stop(lc);
  cr_assert_eq(ended, 2, "%s: %d of 2 requests ended", inject ? inject : "none", ended);
  assert_no_nodes_left();
}

static void two_requests_overlapped(const char *inject, int32_t toks[2][30], int n[2]) {
  two_requests_overlapped_on(1, 1, inject, 0, toks, n);
}

/* Failed steps (both in flight) run again with retries: the clients get exactly the
 * tokens of an undisturbed run, none twice, and no error. */
Test(pipeline, overlapped_steps_that_fail_run_again_with_the_same_tokens, .timeout = 120) {
  int32_t want[2][30], got[2][30];
  int nw[2], ng[2];
  two_requests_overlapped(NULL, want, nw);
  cr_assert(nw[0] == 30 && nw[1] == 30);
  const char *faults[] = {"badack:0:6", "noack:0:9"};
  for (int f = 0; f < 2; f++) {
    two_requests_overlapped(faults[f], got, ng);
    for (int k = 0; k < 2; k++) {
      cr_assert_eq(ng[k], 30, "%s: request %d got %d tokens", faults[f], k, ng[k]);
      cr_assert_arr_eq(got[k], want[k], sizeof want[k], "%s: request %d", faults[f], k);
    }
  }
}

/* A local cluster refuses, before it starts a node, an injection its nodes would refuse
 * (a rank it does not have): each node would exit at start-up, and a caller waiting for
 * the cluster to serve would wait for nothing. */
Test(pipeline, a_local_cluster_refuses_an_injection_its_nodes_would_refuse) {
  private_tmp();
  sc_local_cluster_opts o = {.pcp = 2, .dcp = 2, .tp = 1, .exe = EXE, .quiet = true,
                             .inject = {"badack:2:9"}, .num_inject = 1};
  sc_local_cluster *lc = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_local_cluster_start(&o, &lc, &d), SC_EINVAL);
  cr_assert_null(lc);
  cr_assert(strstr(d.msg, "RANK in [0, 1]") != NULL, "%s", d.msg);
  assert_no_nodes_left();
}

/* The same at P2 N2 (two ranks) with host collectives: a refused collective (desync) on
 * rank 1 and a wrong acknowledgement fail both steps in flight on every rank, the ranks
 * blocked in the later one's collectives are let go at once (not at the collective
 * deadline, 20 s here), and both run again. */
Test(pipeline, overlapped_steps_on_several_ranks_that_fail_run_again, .timeout = 180) {
  int32_t want[2][30], got[2][30];
  int nw[2], ng[2];
  two_requests_overlapped_on(2, 2, NULL, 0, want, nw);
  cr_assert(nw[0] == 30 && nw[1] == 30);
  const char *faults[] = {"desync:1:6", "badack:1:9"};
  for (int f = 0; f < 2; f++) {
    const uint64_t t0 = sc_now_ns();
    two_requests_overlapped_on(2, 2, faults[f], 20000, got, ng);
    const double secs = (double)(sc_now_ns() - t0) * 1e-9;
    cr_assert_lt(secs, 15.0, "%s: %.1f s: a rank waited for a collective's deadline", faults[f],
                 secs);
    for (int k = 0; k < 2; k++) {
      cr_assert_eq(ng[k], 30, "%s: request %d got %d tokens", faults[f], k, ng[k]);
      cr_assert_arr_eq(got[k], want[k], sizeof want[k], "%s: request %d", faults[f], k);
    }
  }
}

/* bench_faults.c - `sparsecp bench faults`: a fault campaign against `sparsecp launch` as
 * an operator runs it (issue 22; docs/pipeline.md, "Recovery").
 *
 * Each trial starts `sparsecp launch` (this binary, the embedded default model, restarts
 * on) on one of the layouts (P, N, T) = (2,2,1), (4,4,1), (2,2,2), puts a steady load
 * on it from CLIENTS client threads (each sends its share of a fixed set of requests, one
 * after the other, greedy and sampled), and SIGKILLs one node from outside at a random
 * moment once tokens flow (within 600 ms of the first; 100 ms for the head):
 *   - node trials: a random rank other than the head. Every request must finish with
 *     exactly the tokens a fault-free run gives (the set is run once on a P1 N1 cluster
 *     first: results do not depend on the layout), none lost, none twice. Recovery time:
 *     from the kill to the first token any client receives after launch started the node
 *     again (no step runs while a node is down, so that token comes from a step after the
 *     rejoin).
 *   - head trials: the head. Every client must hear of it within 2 s (an error), and
 *     launch must bring the cluster back: a request sent afterwards is served with the
 *     reference tokens.
 *   - injection trials: no kill from outside; launch runs with `--inject KIND:RANK:STEP`,
 *     the kind, rank and step drawn at random (a desync or a wrong plan acknowledgement on
 *     any rank: the step is refused and run again after the collectives are rebuilt; a
 *     device fault on a rank other than the head: its node stops itself and rejoins).
 *     As for node trials, every request must finish with the reference tokens; the fault
 *     must have fired (launch's log says so) inside the load.
 * After each trial launch is stopped with SIGTERM and must exit 0 within 20 s, and no
 * node process it ever started may be left. A hang is a client that has no answer 60 s
 * after its request, or a launch that does not stop.
 *
 * Trials: SC_BENCH_FAULTS_TRIALS node trials (default 100; --quick 3),
 * SC_BENCH_FAULTS_HEAD_TRIALS head trials (default 10; --quick 1) and
 * SC_BENCH_FAULTS_INJECT_TRIALS injection trials (default 30; --quick 2). Results: counts (hangs,
 * leftover processes, lost requests, requests whose tokens differ) and the recovery and
 * head-notice times. The command fails (exit 1) when any count is not 0, so the quick
 * campaign is a test in `make test`.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "client/client.h"
#include "model/model_config.h"
#include "tools/bench.h"
#include "tools/requests_file.h"

#define CLIENTS 4
#define MAX_REQS 32
#define MAX_OUT 160
#define MAX_PIDS 64
#define REQUEST_TIMEOUT_MS 60000

typedef struct req_spec {
  int32_t prompt[128];
  int32_t prompt_len, max_tokens;
  float temperature;
  uint64_t seed;
} req_spec;

/* One request's outcome in a run. */
typedef struct req_result {
  int32_t tokens[MAX_OUT];
  int32_t n;
  bool done, failed, hung, repeated; /* repeated: a token index came twice or out of order */
  uint64_t first_after_ns;           /* first token after the cluster came back (0: none) */
  bool before_kill;                  /* it had a token before the kill */
  uint64_t submit_ns, error_ns;      /* when it was sent, when the error came */
} req_result;

/* `sparsecp launch` as a child, its stdout read line by line. */
typedef struct launch_proc {
  pid_t pid;
  int out;                     /* read end of its stdout */
  char line[4096];
  size_t len;
  char listen[512];
  pid_t pids[MAX_PIDS];        /* every node process it reported */
  int num_pids;
  int32_t nodes;
  _Atomic uint64_t restarted_ns; /* when the last "restarted" line was read (0: none) */
  _Atomic int tokens_seen;     /* by the clients: the load is running */
  _Atomic uint64_t kill_ns;    /* when the trial's kill was made (0: not yet) */
} launch_proc;

typedef struct campaign {
  const req_spec *reqs;
  int num_reqs;
  req_result ref[MAX_REQS];    /* the fault-free run */
} campaign;

/* A client thread's share: requests first, first + CLIENTS, ... of the set. */
typedef struct client_job {
  const char *endpoint;
  const req_spec *reqs;
  int num_reqs, first;
  req_result *out;             /* [num_reqs], this job fills its share */
  launch_proc *lp;             /* for the restart time */
} client_job;

static void make_requests(req_spec *r, int n, int32_t vocab) {
  for (int i = 0; i < n; i++) {
    r[i] = (req_spec){.prompt_len = 24 + (i * 37) % 48, .max_tokens = 16 + (i * 29) % 40,
                      .temperature = i % 3 == 2 ? 0.8f : 0.0f, .seed = 100 + (uint64_t)i};
    sc_requests_fill_prompt(r[i].prompt, r[i].prompt_len, vocab, 7000 + (uint64_t)i);
  }
}

/* ---- launch ---- */

static void launch_read_line(launch_proc *lp, const char *line) {
  json_t *j = json_loads(line, 0, NULL);
  const char *ev = json_string_value(json_object_get(j, "event"));
  if (ev && strcmp(ev, "launched") == 0) {
    snprintf(lp->listen, sizeof lp->listen, "%s", json_string_value(json_object_get(j, "listen")));
    json_t *pids = json_object_get(j, "pids");
    lp->nodes = (int32_t)json_array_size(pids);
    for (size_t i = 0; i < json_array_size(pids) && lp->num_pids < MAX_PIDS; i++)
      lp->pids[lp->num_pids++] = (pid_t)json_integer_value(json_array_get(pids, i));
  } else if (ev && strcmp(ev, "restarted") == 0) {
    if (lp->num_pids < MAX_PIDS)
      lp->pids[lp->num_pids++] = (pid_t)json_integer_value(json_object_get(j, "pid"));
    atomic_store(&lp->restarted_ns, sc_now_ns());
  }
  json_decref(j);
}

/* Reads what launch printed, waiting up to timeout_ms for something. */
static void launch_poll(launch_proc *lp, int timeout_ms) {
  struct pollfd p = {.fd = lp->out, .events = POLLIN};
  if (poll(&p, 1, timeout_ms) <= 0) return;
  char buf[4096];
  const ssize_t k = read(lp->out, buf, sizeof buf);
  for (ssize_t i = 0; i < k; i++) {
    if (buf[i] != '\n') {
      if (lp->len < sizeof lp->line - 1) lp->line[lp->len++] = buf[i];
      continue;
    }
    lp->line[lp->len] = '\0';
    launch_read_line(lp, lp->line);
    lp->len = 0;
  }
}

/* inject: launch's --inject value, or NULL; errlog: a file for launch's stderr (its nodes'
 * log lines at level error), or NULL (SC_BENCH_FAULTS_LOGS: the bench's stderr, else
 * nowhere). */
static int launch_start(launch_proc *lp, int32_t p, int32_t n, int32_t t, const char *inject,
                        const char *errlog) {
  memset(lp, 0, sizeof *lp);
  int fds[2];
  if (pipe(fds) != 0) return SC_ESYS;
  char exe[4096];
  const ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (el <= 0) return SC_ESYS;
  exe[el] = '\0';
  char ps[16], ns[16], ts[16];
  snprintf(ps, sizeof ps, "%d", (int)p);
  snprintf(ns, sizeof ns, "%d", (int)n);
  snprintf(ts, sizeof ts, "%d", (int)t);
  const pid_t pid = fork();
  if (pid < 0) return SC_ESYS;
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    const int err = errlog ? open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0600)
                           : open("/dev/null", O_WRONLY);
    if (err >= 0 && (errlog || getenv("SC_BENCH_FAULTS_LOGS") == NULL)) dup2(err, 2);
    setenv("SPARSECP_LOG", "error", 0);
    char *args[] = {"sparsecp", "launch", "--pcp", ps, "--dcp", ns, "--tp", ts,
                    inject ? "--inject" : NULL, (char *)inject, NULL};
    execv(exe, args);
    _exit(127);
  }
  close(fds[1]);
  lp->pid = pid;
  lp->out = fds[0];
  const uint64_t until = sc_now_ns() + 60000000000ull;
  while (lp->listen[0] == '\0' && sc_now_ns() < until) {
    launch_poll(lp, 100);
    if (waitpid(pid, NULL, WNOHANG) == pid) return SC_EIO;
  }
  return lp->listen[0] ? 0 : SC_ETIMEDOUT;
}

/* SIGTERM; true when launch exited 0 within 20 s (else it is killed). */
static bool launch_stop(launch_proc *lp) {
  kill(lp->pid, SIGTERM);
  int status = 0;
  const uint64_t until = sc_now_ns() + 20000000000ull;
  pid_t w = 0;
  while ((w = waitpid(lp->pid, &status, WNOHANG)) == 0 && sc_now_ns() < until) launch_poll(lp, 20);
  if (w != lp->pid) {
    kill(lp->pid, SIGKILL);
    waitpid(lp->pid, &status, 0);
  }
  close(lp->out);
  return w == lp->pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Node processes of lp still running (launch's children are gone with it: SIGKILLed by
 * their parent-death signal at the latest, so give them a moment). */
static int leftovers(const launch_proc *lp) {
  int left = 0;
  for (int i = 0; i < lp->num_pids; i++) {
    bool gone = false;
    for (int k = 0; k < 100 && !gone; k++) {
      gone = kill(lp->pids[i], 0) != 0 && errno == ESRCH;
      if (!gone) usleep(20000);
    }
    left += !gone;
  }
  return left;
}

/* ---- clients ---- */

static void run_one(sc_client *c, const req_spec *q, req_result *r, launch_proc *lp) {
  memset(r, 0, sizeof *r);
  const sc_client_request cr = {.prompt = q->prompt, .prompt_len = q->prompt_len,
                                .max_tokens = q->max_tokens, .temperature = q->temperature,
                                .seed = q->seed};
  uint64_t id = 0;
  r->submit_ns = sc_now_ns();
  if (sc_client_submit(c, &cr, &id) != 0) {
    r->failed = true;
    r->error_ns = sc_now_ns();
    return;
  }
  const uint64_t until = sc_now_ns() + (uint64_t)REQUEST_TIMEOUT_MS * 1000000ull;
  while (!r->done && !r->failed) {
    const uint64_t now = sc_now_ns();
    if (now >= until) {
      r->hung = true;
      return;
    }
    sc_client_event ev;
    const int rc = sc_client_next(c, (int)((until - now) / 1000000ull) + 1, &ev);
    if (rc == SC_ETIMEDOUT) continue;
    if (rc != 0) {
      r->failed = true;
      r->error_ns = sc_now_ns();
      return;
    }
    if (ev.request_id != id) continue;
    if (ev.kind == SC_CLIENT_TOKENS) {
      const uint64_t t = sc_now_ns(), back = lp ? atomic_load(&lp->restarted_ns) : 0;
      if (back != 0 && t > back && r->first_after_ns == 0) r->first_after_ns = t;
      if (lp && atomic_load(&lp->kill_ns) == 0) r->before_kill = true;
      if (lp) atomic_fetch_add(&lp->tokens_seen, 1);
      for (int32_t k = 0; k < ev.n; k++) {
        if (ev.index + k != r->n || r->n >= MAX_OUT) r->repeated = true;
        else r->tokens[r->n++] = ev.tokens[k];
      }
    } else if (ev.kind == SC_CLIENT_DONE) {
      r->done = true;
    } else {
      r->failed = true;
      r->error_ns = sc_now_ns();
    }
  }
}

static void *client_main(void *arg) {
  client_job *j = arg;
  sc_client *c = NULL;
  sc_diag d = {0};
  const bool ok = sc_client_connect(&c, j->endpoint, &d) == 0;
  for (int i = j->first; i < j->num_reqs; i += CLIENTS) {
    if (ok) {
      run_one(c, &j->reqs[i], &j->out[i], j->lp);
    } else {
      memset(&j->out[i], 0, sizeof j->out[i]);
      j->out[i].failed = true;
    }
  }
  sc_client_close(c);
  return NULL;
}

/* Runs the whole set from CLIENTS threads against lp; the caller may act meanwhile
 * (act(ud) is called once the threads run), then all are joined. */
static void run_load(launch_proc *lp, const req_spec *reqs, int n, req_result *out,
                     void (*act)(void *ud), void *ud) {
  pthread_t th[CLIENTS];
  client_job jobs[CLIENTS];
  for (int k = 0; k < CLIENTS; k++) {
    jobs[k] = (client_job){.endpoint = lp->listen, .reqs = reqs, .num_reqs = n, .first = k,
                           .out = out, .lp = lp};
    pthread_create(&th[k], NULL, client_main, &jobs[k]);
  }
  if (act) act(ud);
  for (int k = 0; k < CLIENTS; k++) pthread_join(th[k], NULL);
}

/* ---- trials ---- */

typedef struct trial_stats {
  int trials, hangs, leftover, lost, differ, repeated, unstopped;
  int missed;          /* the fault did not happen as planned: the kill failed or found
                          no request in flight, or the injection did not fire */
  double *recovery_ms; /* node trials: one per trial that recovered */
  int num_recovery;
  double *notice_ms;   /* head trials: kill to a client's error, every failed request */
  int num_notice;
  int head_not_back;   /* head trials: no request served after the restart */
} trial_stats;

typedef struct kill_plan {
  launch_proc *lp;
  int32_t victim;      /* rank */
  int delay_ms;
  uint64_t kill_ns;
  bool killed;
} kill_plan;

/* While the clients run: once tokens flow (requests are in flight), waits delay_ms, then
 * SIGKILLs the victim's process. */
static void do_kill(void *ud) {
  kill_plan *k = ud;
  const uint64_t give_up = sc_now_ns() + 30000000000ull;
  while (atomic_load(&k->lp->tokens_seen) == 0 && sc_now_ns() < give_up) usleep(1000);
  usleep((useconds_t)k->delay_ms * 1000u);
  /* its pid in the launched line (no restart happened yet; the reader thread only
   * appends to the list) */
  const pid_t pid = k->victim < k->lp->num_pids ? k->lp->pids[k->victim] : -1;
  k->kill_ns = sc_now_ns();
  atomic_store(&k->lp->kill_ns, k->kill_ns); /* (just before: a token read meanwhile counts
                                                as after the kill, never wrongly before) */
  k->killed = pid > 0 && kill(pid, SIGKILL) == 0;
}

/* Reads launch's output on a thread of its own while clients run. */
typedef struct reader {
  launch_proc *lp;
  _Atomic int stop;
} reader;

static void *reader_main(void *arg) {
  reader *r = arg;
  while (!atomic_load(&r->stop)) launch_poll(r->lp, 20);
  return NULL;
}

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void count_results(const campaign *cp, const req_result *got, trial_stats *st,
                          bool head) {
  for (int i = 0; i < cp->num_reqs; i++) {
    const req_result *g = &got[i];
    st->hangs += g->hung;
    st->repeated += g->repeated;
    if (head) continue; /* requests in flight at a head's death end with an error */
    if (!g->done) st->lost++;
    else if (g->n != cp->ref[i].n || memcmp(g->tokens, cp->ref[i].tokens, sizeof(int32_t) * (size_t)g->n))
      st->differ++;
  }
}

static const int32_t k_layouts[][3] = {{2, 2, 1}, {4, 4, 1}, {2, 2, 2}};

/* The end of every trial: launch stops in order and leaves no node behind. */
static void end_trial(launch_proc *lp, reader *rd, pthread_t rt, trial_stats *st) {
  atomic_store(&rd->stop, 1);
  pthread_join(rt, NULL);
  st->unstopped += !launch_stop(lp);
  st->leftover += leftovers(lp);
}

static int one_trial(const campaign *cp, int idx, bool head, uint64_t *rng, trial_stats *st,
                     req_result *got) {
  const int32_t *L = k_layouts[idx % 3];
  launch_proc lp;
  int rc = launch_start(&lp, L[0], L[1], L[2], NULL, NULL);
  if (rc != 0) {
    fprintf(stderr, "bench faults: launch did not start (%s)\n", sc_strerror(rc));
    return rc;
  }
  kill_plan kp = {.lp = &lp, .victim = head ? 0 : 1 + (int32_t)(rng_next(rng) % (uint64_t)(lp.nodes - 1)),
                  .delay_ms = (int)(rng_next(rng) % (head ? 100 : 600))};
  reader rd = {.lp = &lp};
  pthread_t rt;
  pthread_create(&rt, NULL, reader_main, &rd); /* the "restarted" lines as they come */
  run_load(&lp, cp->reqs, cp->num_reqs, got, do_kill, &kp);
  st->trials++;
  st->missed += !kp.killed;
  count_results(cp, got, st, head);
  if (!head) {
    uint64_t first = 0;
    bool across = false; /* a request that generated on both sides of the kill */
    for (int i = 0; i < cp->num_reqs; i++) {
      if (got[i].first_after_ns && (first == 0 || got[i].first_after_ns < first))
        first = got[i].first_after_ns;
      across |= got[i].before_kill && got[i].first_after_ns != 0;
    }
    if (first > kp.kill_ns) st->recovery_ms[st->num_recovery++] = (double)(first - kp.kill_ns) * 1e-6;
    st->missed += !across; /* the kill fell between requests: nothing recovered */
  } else {
    const int before = st->num_notice;
    /* the requests sent before the kill (later ones are refused at once: their client
     * knows its connection is lost) */
    for (int i = 0; i < cp->num_reqs; i++)
      if (got[i].failed && got[i].submit_ns < kp.kill_ns && got[i].error_ns >= kp.kill_ns)
        st->notice_ms[st->num_notice++] = (double)(got[i].error_ns - kp.kill_ns) * 1e-6;
    /* the cluster comes back: one request is served with its reference tokens */
    req_result again = {0};
    bool back = false;
    for (int attempt = 0; attempt < 100 && !back; attempt++) {
      sc_client *c = NULL;
      if (sc_client_connect(&c, lp.listen, NULL) == 0) {
        run_one(c, &cp->reqs[0], &again, NULL);
        back = again.done && again.n == cp->ref[0].n &&
               memcmp(again.tokens, cp->ref[0].tokens, sizeof(int32_t) * (size_t)again.n) == 0;
      }
      sc_client_close(c);
      if (!back) usleep(200000);
    }
    st->head_not_back += !back;
    st->missed += st->num_notice == before; /* no request was in flight: nothing tested */
  }
  end_trial(&lp, &rd, rt, st);
  return 0;
}

/* Whether launch's log (its nodes' error lines) says that the injected fault fired: the
 * fault's own line, or for a desync the head's word that a rank refused a collective. */
static bool fault_fired(const char *errlog) {
  FILE *f = fopen(errlog, "r");
  char line[2048];
  bool fired = false;
  while (f && !fired && fgets(line, sizeof line, f))
    fired = strstr(line, "injected fault") != NULL || strstr(line, "refused collective") != NULL;
  if (f) fclose(f);
  return fired;
}

/* An injection trial: a fault of a random kind at a random rank and step (the load runs
 * some 40-80 steps; 2..25 falls inside it), the requests run to their end. */
static int inject_trial(const campaign *cp, int idx, uint64_t *rng, trial_stats *st,
                        req_result *got, const char *errlog, char inject[64]) {
  static const char *const kinds[] = {"desync", "badack", "devfault"};
  const int32_t *L = k_layouts[idx % 3];
  const int32_t nodes = L[0] * L[2];
  const char *kind = kinds[rng_next(rng) % 3];
  /* a device fault on the head ends the cluster (its clients get the error): the head
   * trials cover that; here the faulted node is another */
  const int32_t rank = strcmp(kind, "devfault") == 0
                           ? 1 + (int32_t)(rng_next(rng) % (uint64_t)(nodes - 1))
                           : (int32_t)(rng_next(rng) % (uint64_t)nodes);
  snprintf(inject, 64, "%s:%d:%d", kind, (int)rank, 2 + (int)(rng_next(rng) % 24));
  launch_proc lp;
  int rc = launch_start(&lp, L[0], L[1], L[2], inject, errlog);
  if (rc != 0) {
    fprintf(stderr, "bench faults: launch --inject %s did not start (%s)\n", inject, sc_strerror(rc));
    return rc;
  }
  reader rd = {.lp = &lp};
  pthread_t rt;
  pthread_create(&rt, NULL, reader_main, &rd);
  run_load(&lp, cp->reqs, cp->num_reqs, got, NULL, NULL);
  st->trials++;
  count_results(cp, got, st, false);
  const bool fired = fault_fired(errlog);
  st->missed += !fired;
  if (!fired) fprintf(stderr, "bench faults: --inject %s on (%d,%d,%d) did not fire\n", inject,
                      (int)L[0], (int)L[1], (int)L[2]);
  end_trial(&lp, &rd, rt, st);
  return 0;
}

enum { NODE_TRIALS, HEAD_TRIALS, INJECT_TRIALS };

/* The counts of one kind of trial into the report ("faults.node.hangs", ...; the lost and
 * differing requests for node and injection trials, whether the cluster came back for
 * head trials); returns their sum: every one must be 0. */
static int report_counts(sc_bench *b, int kind, const trial_stats *st) {
  static const char *const kinds[] = {"node", "head", "inject"};
  const struct {
    const char *name;
    int value;
    bool of[3]; /* reported for node, head, injection trials */
  } counts[] = {
      {"hangs", st->hangs, {true, true, true}},
      {"leftover_processes", st->leftover, {true, true, true}},
      {"lost_requests", st->lost, {true, false, true}},
      {"tokens_differ", st->differ, {true, false, true}},
      {"tokens_repeated", st->repeated, {true, true, true}},
      {"not_back", st->head_not_back, {false, true, false}},
      {"launch_not_stopped", st->unstopped, {true, true, true}},
      {"kill_missed", st->missed, {true, true, false}},
      {"not_fired", st->missed, {false, false, true}},
  };
  char name[64], params[32];
  snprintf(params, sizeof params, "\"trials\":%d", st->trials);
  int sum = 0;
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    if (!counts[i].of[kind]) continue;
    snprintf(name, sizeof name, "faults.%s.%s", kinds[kind], counts[i].name);
    const double x = counts[i].value;
    sc_bench_add(b, name, params, "count", &x, 1, NULL);
    sum += counts[i].value;
  }
  return sum;
}

static int env_int(const char *name, int def) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : def;
}

int sc_bench_faults(sc_bench *b) {
  sc_model_config model;
  sc_model_config_default(&model);
  const int node_trials = env_int("SC_BENCH_FAULTS_TRIALS", b->quick ? 3 : 100);
  const int head_trials = env_int("SC_BENCH_FAULTS_HEAD_TRIALS", b->quick ? 1 : 10);
  const int inject_trials = env_int("SC_BENCH_FAULTS_INJECT_TRIALS", b->quick ? 2 : 30);
  const int num_reqs = b->quick ? 8 : 12;
  static req_spec reqs[MAX_REQS];
  make_requests(reqs, num_reqs, model.vocab);
  static campaign cp;
  cp.reqs = reqs;
  cp.num_reqs = num_reqs;
  if (!b->json)
    printf("%d node kills, %d head kills and %d injected faults under launch, layouts (2,2,1) "
           "(4,4,1) (2,2,2), %d clients, %d requests each trial, the default model on the CPU\n",
           node_trials, head_trials, inject_trials, CLIENTS, num_reqs);
  /* the reference: the same set on one rank, no fault */
  launch_proc lp;
  int rc = launch_start(&lp, 1, 1, 1, NULL, NULL);
  if (rc != 0) return rc;
  run_load(&lp, reqs, num_reqs, cp.ref, NULL, NULL);
  const bool stopped = launch_stop(&lp);
  for (int i = 0; i < num_reqs; i++)
    if (!cp.ref[i].done || cp.ref[i].repeated) {
      fprintf(stderr, "bench faults: the fault-free reference run failed (request %d)\n", i);
      return SC_EIO;
    }
  if (!stopped) return SC_EIO;
  trial_stats node = {.recovery_ms = calloc((size_t)node_trials + 1, sizeof(double))};
  trial_stats head = {.notice_ms = calloc((size_t)(head_trials * num_reqs) + 1, sizeof(double))};
  static req_result got[MAX_REQS];
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  const uint64_t t0 = sc_now_ns();
  for (int i = 0; i < node_trials && rc == 0; i++) {
    rc = one_trial(&cp, i, false, &rng, &node, got);
    if (!b->json)
      fprintf(stderr, "  node trial %d/%d: %.1f s in, lost %d, differ %d, hangs %d, leftover %d\n",
              i + 1, node_trials, (double)(sc_now_ns() - t0) * 1e-9, node.lost, node.differ,
              node.hangs, node.leftover);
  }
  for (int i = 0; i < head_trials && rc == 0; i++) {
    rc = one_trial(&cp, i, true, &rng, &head, got);
    if (!b->json)
      fprintf(stderr, "  head trial %d/%d: not back %d, hangs %d, leftover %d\n", i + 1,
              head_trials, head.head_not_back, head.hangs, head.leftover);
  }
  trial_stats inj = {0};
  char errlog[64];
  snprintf(errlog, sizeof errlog, "/tmp/sparsecp-faults-%d.log", (int)getpid());
  for (int i = 0; i < inject_trials && rc == 0; i++) {
    char inject[64] = "";
    rc = inject_trial(&cp, i, &rng, &inj, got, errlog, inject);
    if (!b->json)
      fprintf(stderr, "  injection trial %d/%d (%s): lost %d, differ %d, not fired %d, hangs %d, "
              "leftover %d\n", i + 1, inject_trials, inject, inj.lost, inj.differ, inj.missed,
              inj.hangs, inj.leftover);
  }
  unlink(errlog);
  if (rc == 0) {
    int bad = report_counts(b, NODE_TRIALS, &node);
    char params[32], extra[96];
    snprintf(params, sizeof params, "\"trials\":%d", node.trials);
    snprintf(extra, sizeof extra, "\"requests_per_trial\":%d,\"recovered_trials\":%d", num_reqs,
             node.num_recovery);
    if (node.num_recovery > 0)
      sc_bench_add(b, "faults.node.recovery", params, "ms", node.recovery_ms, node.num_recovery,
                   extra);
    bad += node.num_recovery < node.trials;
    bad += report_counts(b, HEAD_TRIALS, &head);
    bad += report_counts(b, INJECT_TRIALS, &inj);
    snprintf(params, sizeof params, "\"trials\":%d", head.trials);
    if (head.num_notice > 0)
      sc_bench_add(b, "faults.head.client_notice", params, "ms", head.notice_ms, head.num_notice,
                   NULL);
    for (int i = 0; i < head.num_notice; i++) bad += head.notice_ms[i] > 2000.0;
    if (bad) {
      fprintf(stderr, "bench faults: the campaign found failures (see the counts)\n");
      rc = SC_EIO;
    }
  }
  free(node.recovery_ms);
  free(head.notice_ms);
  return rc;
}

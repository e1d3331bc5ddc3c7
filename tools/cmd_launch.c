/* cmd_launch.c - `sparsecp launch`: a whole local pipeline cluster as child processes,
 * kept up until stopped.
 *
 * The cluster itself (cluster file, one `sparsecp node` per rank, orderly stop) is
 * tools/local_cluster.c, shared with `sparsecp run`. Launch adds: one tap endpoint
 * forwarding the taps of all nodes (XSUB -> XPUB proxy), and supervision (supervise()): a
 * child that dies while the cluster runs is reported (stderr, and a JSON event on stdout)
 * and started again within a restart budget (the pipeline's rejoin_wait_ms keeps the
 * cluster waiting for it); past the budget the others get --grace-ms to notice before they
 * are stopped, and launch exits 1. SIGINT/SIGTERM stop all children. Children carry PR_SET_PDEATHSIG, so even a
 * SIGKILLed launch leaves no process behind. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "actors/runtime/sc_cluster.h"
#include "base/clock.h"
#include "base/jsonw.h"
#include "base/curve_key.h"
#include "base/zap.h"
#include "model/tokenizer.h"
#include "tools/cli.h"
#include "tools/local_cluster.h"

typedef struct proxy {
  void *ctx, *xsub, *xpub, *ctl;
  pthread_t thread;
  bool running;
  const char *ipc_file; /* the bound tap endpoint's socket file, if any */
  sc_zap *zap;          /* a tcp tap endpoint: admits the cluster's tap key only */
  char server_key[SC_CURVE_Z85_LEN + 1]; /* and its own public key ("" on ipc) */
} proxy;

static void *proxy_main(void *arg) {
  proxy *p = arg;
  void *ctl_sub = zmq_socket(p->ctx, ZMQ_PAIR);
  zmq_connect(ctl_sub, "inproc://launch-proxy-ctl");
  zmq_proxy_steerable(p->xsub, p->xpub, NULL, ctl_sub);
  zmq_close(ctl_sub);
  return NULL;
}

/* The nodes' taps are on tcp with CURVE: the XSUB subscribes to each as a CURVE client
 * with the cluster's tap key (the server key is set per connection: ZeroMQ takes the
 * socket's options at each zmq_connect). */
static int proxy_connect_taps(proxy *p, const sc_local_cluster *c, const uint8_t *tap_secret,
                              const uint8_t *tap_public) {
  sc_cluster cl;
  sc_diag d = {0};
  int rc = tap_secret ? sc_cluster_load(sc_local_cluster_file(c), &cl, &d) : 0;
  if (rc != 0) {
    sc_cli_error("launch", "%s", sc_diag_message(&d));
    return rc;
  }
  for (int32_t r = 0; rc == 0 && r < sc_local_cluster_size(c); r++) {
    const char *t = sc_local_cluster_tap(c, r);
    if (t[0] == '\0') continue;
    if (tap_secret)
      rc = sc_curve_make_client(p->xsub, tap_public, tap_secret, cl.nodes[r].public_key);
    if (rc == 0 && zmq_connect(p->xsub, t) != 0) rc = SC_EIO;
    if (rc != 0)
      sc_cli_error("launch", "cannot subscribe to node %d's tap %s: %s", (int)r, t,
                   zmq_strerror(zmq_errno()));
  }
  if (tap_secret) sc_cluster_free(&cl);
  return rc;
}

/* launch's own tap endpoint: on tcp a CURVE server of a fresh key pair that admits the
 * cluster's tap key (whose secret file the "launched" line names); on ipc its folder
 * must be private. */
static int proxy_secure_endpoint(proxy *p, const char *endpoint, const uint8_t *tap_public) {
  sc_diag d = {0};
  if (sc_endpoint_is_local(endpoint)) {
    if (sc_ipc_check_private(endpoint, &d) == 0) return 0;
    sc_cli_error("launch", "--tap %s", sc_diag_message(&d));
    return SC_EPERM;
  }
  char secret_z85[SC_CURVE_Z85_LEN + 1];
  const sc_zap_domain dom = {.domain = SC_ZAP_DOMAIN_TAP,
                             .keys = (const uint8_t(*)[32])tap_public, .num_keys = 1,
                             .name_prefix = "tap"};
  int rc = zmq_curve_keypair(p->server_key, secret_z85) == 0 ? 0 : SC_ENOTSUP;
  if (rc == 0) rc = sc_zap_start(p->ctx, &dom, 1, &p->zap, &d);
  uint8_t secret[32];
  if (rc == 0 && (zmq_z85_decode(secret, secret_z85) == NULL ||
                  sc_curve_make_server(p->xpub, secret, SC_ZAP_DOMAIN_TAP) != 0))
    rc = SC_EIO;
  sc_wipe(secret, sizeof secret);
  sc_wipe(secret_z85, sizeof secret_z85);
  if (rc != 0)
    sc_cli_error("launch", "cannot secure the tap endpoint %s: %s", endpoint,
                 d.msg[0] ? sc_diag_message(&d) : zmq_strerror(zmq_errno()));
  return rc;
}

static int proxy_start(proxy *p, const sc_local_cluster *c, const char *endpoint) {
  const int zero = 0;
  p->ctx = zmq_ctx_new();
  p->xsub = zmq_socket(p->ctx, ZMQ_XSUB);
  p->xpub = zmq_socket(p->ctx, ZMQ_XPUB);
  p->ctl = zmq_socket(p->ctx, ZMQ_PAIR);
  zmq_setsockopt(p->xsub, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(p->xpub, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(p->ctl, ZMQ_LINGER, &zero, sizeof zero);
  /* subscribers send subscriptions only; a stranger's handshake is not held for long */
  const int64_t max_message = 4096;
  const int handshake_ms = 5000;
  zmq_setsockopt(p->xpub, ZMQ_MAXMSGSIZE, &max_message, sizeof max_message);
  zmq_setsockopt(p->xpub, ZMQ_HANDSHAKE_IVL, &handshake_ms, sizeof handshake_ms);
  if (zmq_bind(p->ctl, "inproc://launch-proxy-ctl") != 0) return SC_EIO;
  /* the tap key: the nodes' tcp taps admit it, and so does this endpoint */
  uint8_t tap_secret[32], tap_public[32];
  const char *key_file = sc_local_cluster_tap_key_file(c);
  char tap_public_z85[SC_CURVE_Z85_LEN + 1];
  sc_diag d = {0};
  int rc = 0;
  if (key_file[0] &&
      ((rc = sc_curve_load_secret(key_file, tap_secret, tap_public_z85, &d)) != 0 ||
       (rc = sc_curve_decode(tap_public_z85, tap_public, &d)) != 0)) {
    sc_cli_error("launch", "%s", sc_diag_message(&d));
    return rc;
  }
  if (key_file[0] == '\0' && !sc_endpoint_is_local(endpoint)) {
    sc_cli_error("launch", "--tap %s: a tap on tcp needs --transport tcp (its key)", endpoint);
    return SC_EINVAL;
  }
  rc = proxy_secure_endpoint(p, endpoint, tap_public);
  if (rc == 0 && zmq_bind(p->xpub, endpoint) != 0) {
    sc_cli_error("launch", "cannot bind the tap endpoint %s: %s", endpoint,
                 zmq_strerror(errno));
    rc = SC_EIO;
  }
  /* libzmq leaves a bound ipc socket file behind; launch made it, launch removes it (an
   * abstract "@name" has no file) */
  if (rc == 0 && strncmp(endpoint, "ipc://", 6) == 0 && endpoint[6] != '@')
    p->ipc_file = endpoint + 6;
  if (rc == 0) rc = proxy_connect_taps(p, c, key_file[0] ? tap_secret : NULL, tap_public);
  sc_wipe(tap_secret, sizeof tap_secret);
  if (rc != 0) return rc;
  if (pthread_create(&p->thread, NULL, proxy_main, p) != 0) return SC_ESYS;
  p->running = true;
  return 0;
}

static void proxy_stop(proxy *p) {
  if (p->running) {
    zmq_send(p->ctl, "TERMINATE", 9, 0);
    pthread_join(p->thread, NULL);
  }
  if (p->ctx == NULL) return;
  zmq_close(p->xsub);
  zmq_close(p->xpub);
  zmq_close(p->ctl);
  sc_zap_stop(p->zap);
  zmq_ctx_term(p->ctx);
  if (p->ipc_file) unlink(p->ipc_file);
}

static void help(FILE *f) {
  fprintf(f,
          "usage: sparsecp launch [--pcp P] [--dcp N] [--tp T] [--device cpu|cuda]\n"
          "                       [--collectives host|nccl|ipc] [--gpus K]\n"
          "                       [--model FILE | --model-dir DIR]\n"
          "                       [--listen ENDPOINT] [--listen-key-file F] [--client-keys F]\n"
          "                       [--tap ENDPOINT]\n"
          "                       [--http HOST:PORT [--http-api-key-file F] [--http-timeout-s S]\n"
          "                        [--tokenizer tokenizer.json]]\n"
          "                       [--transport ipc|tcp]\n"
          "                       [--events] [--heartbeat-ms MS] [--heartbeat-timeout-ms MS]\n"
          "                       [--restarts N] [--restart-window-s T] [--rejoin-wait-ms MS]\n"
          "                       [--step-retries K]\n"
          "                       [--grace-ms MS] [--token-budget N] [--num-blocks B]\n"
          "                       [--inject KIND:RANK:STEP] [--profile]\n"
          "                       [--kv-format f32|bf16|fp8_ds_mla]\n"
          "                       [--index-format kv|fp8] [--gemm-precision f32|tf32]\n"
          "                       [--no-cuda-graphs] [--overlap auto|on|off]\n"
          "                       [--mps auto|on|off]\n\n"
          "Starts a local cluster of P*T node processes (default P = 1, N = 1, T = 1)\n"
          "running the inference pipeline (docs/pipeline.md) and keeps it up until\n"
          "Ctrl-C/SIGTERM (exit 0); a node that dies is reported and started again (see\n"
          "--restarts; exit 1 when it gives up). Clients\n"
          "connect to the head's endpoint (printed in the \"launched\" line;\n"
          "`sparsecp submit --connect ...`).\n"
          "  --listen E     the head's client endpoint (default: an ipc socket in the\n"
          "                 cluster's folder, or a free tcp port with --transport tcp)\n"
          "  --listen-key-file F  the client endpoint uses CURVE with the secret key in F\n"
          "                 (`sparsecp keygen`); the \"launched\" line gives the public key\n"
          "                 that clients need (`sparsecp submit --server-key`). Without\n"
          "                 --client-keys, anyone who holds that public key is served\n"
          "  --client-keys F  serve only the clients whose CURVE public keys F lists (one\n"
          "                 Z85 key per line, '#' comments; each client keeps the secret\n"
          "                 half: `sparsecp submit --client-key-file`); others never\n"
          "                 connect. Needs --listen-key-file\n"
          "  --tap E        one tap endpoint forwarding the taps of all nodes (nodes bind\n"
          "                 taps only then); on tcp (needs --transport tcp) it speaks\n"
          "                 CURVE and admits one key:\n"
          "                 the \"launched\" line gives tap_key_file and tap_server_key\n"
          "                 for `sparsecp tap --key F --server-key K`\n"
          "  --http A       serve the OpenAI completions API, /health and /metrics on\n"
          "                 HOST:PORT (port 0: a free one, in the launched line's \"http\";\n"
          "                 docs/http.md). Plain HTTP: bind it to loopback, or put TLS in\n"
          "                 front of it\n"
          "  --http-api-key-file F  HTTP clients must send \"Authorization: Bearer <F's\n"
          "                 contents>\" (all routes but /health); F must not be readable by\n"
          "                 others\n"
          "  --http-timeout-s S  an idle HTTP connection is closed after S s (default 30)\n"
          "  --tokenizer F  a Hugging Face tokenizer.json: HTTP prompts may be text and\n"
          "                 responses carry text (without one: token ids only)\n"
          "  --transport    ipc (default: sockets in a private temp folder) or tcp loopback\n"
          "                 (CURVE between all nodes, with key pairs made for this run)\n"
          "  --events       nodes print JSON event lines; launch adds its own\n"
          "  --heartbeat-ms, --heartbeat-timeout-ms  between nodes (default 200, 1000)\n"
          "  --restarts N, --restart-window-s T  a node that dies is started again, at\n"
          "                 most N times within T s (default 3 in 60); another node\n"
          "                 rejoins the running cluster (requests pause, none is lost:\n"
          "                 docs/pipeline.md, Recovery), after the head's death the whole\n"
          "                 cluster starts again. Past N, or with --restarts 0, a death\n"
          "                 ends the cluster (exit 1)\n"
          "  --rejoin-wait-ms MS  how long the head waits for a node's new process\n"
          "                 (default 10000)\n"
          "  --step-retries K  a step that fails while every node is up (a desync, a lost\n"
          "                 acknowledgement, a deadline) is run again, its requests failing\n"
          "                 only after K + 1 failures in a row (default 2; 0: at once)\n"
          "  --grace-ms     after a death that ends the cluster, time the others get\n"
          "                 before being stopped (default 2000)\n"
          "  --device, --collectives, --gpus, --model, --model-dir, --token-budget,\n"
          "  --num-blocks, --kv-format, --index-format, --gemm-precision,\n"
          "  --no-cuda-graphs, --overlap, --mps, --inject, --profile  as for `sparsecp run`\n"
          "                 (with --http, /metrics adds sparsecp_step_stage_seconds_total)\n");
}

/* The "launched" event line (DESIGN.md §7): through the JSON writer, since the cluster
 * file's path comes from $TMPDIR and the endpoints from the command line. */
static void print_launched(const sc_local_cluster *lc, const char *tap, const proxy *px,
                           const char *server_key) {
  const int32_t n = sc_local_cluster_size(lc);
  sc_jsonw w;
  sc_jsonw_init(&w);
  sc_jsonw_obj_begin(&w);
  sc_jsonw_kv_str(&w, "event", "launched");
  sc_jsonw_kv_int(&w, "nodes", n);
  sc_jsonw_kv_str(&w, "cluster", sc_local_cluster_file(lc));
  sc_jsonw_kv_str(&w, "listen", sc_local_cluster_listen(lc));
  sc_jsonw_kv_str(&w, "tap", tap ? tap : "");
  if (sc_local_cluster_http(lc)[0]) sc_jsonw_kv_str(&w, "http", sc_local_cluster_http(lc));
  if (server_key[0]) sc_jsonw_kv_str(&w, "server_key", server_key);
  if (px->server_key[0]) { /* a tcp tap: what `sparsecp tap --server-key --key` need */
    sc_jsonw_kv_str(&w, "tap_server_key", px->server_key);
    sc_jsonw_kv_str(&w, "tap_key_file", sc_local_cluster_tap_key_file(lc));
  }
  sc_jsonw_key(&w, "pids");
  sc_jsonw_arr_begin(&w);
  for (int32_t r = 0; r < n; r++) sc_jsonw_int(&w, sc_local_cluster_pid(lc, r));
  sc_jsonw_arr_end(&w);
  sc_jsonw_obj_end(&w);
  if (sc_jsonw_status(&w) == 0) printf("%s\n", sc_jsonw_str(&w));
  fflush(stdout);
  sc_jsonw_free(&w);
}

/* A node that ended: an "exited" line (stdout) and a sentence (stderr). *failed (ud)
 * turns true when it was killed or exited nonzero. */
static void report_exit(void *ud, const sc_local_exit *e) {
  char what[96];
  sc_local_exit_describe(e, what, sizeof what);
  fprintf(stderr, "sparsecp launch: %s\n", what);
  printf("{\"event\":\"exited\",\"rank\":%d,\"pid\":%d,\"%s\":%d}\n", (int)e->rank,
         (int)e->pid, e->signaled ? "signal" : "status", e->value);
  fflush(stdout);
  *(bool *)ud |= e->signaled || e->value != 0;
}

/* path made absolute into out (PATH_MAX), short enough for a cluster file; false (said)
 * when it is not. */
static bool absolute_path(const char *opt, const char *path, char *out) {
  if (realpath(path, out) == NULL) {
    sc_cli_error("launch", "%s %s: %s", opt, path, strerror(errno));
    return false;
  }
  if (strlen(out) >= SC_PATH_MAX) {
    sc_cli_error("launch", "%s: the path is longer than %d bytes", opt, SC_PATH_MAX - 1);
    return false;
  }
  return true;
}

static volatile sig_atomic_t g_stop;
static void on_stop_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

/* The restart policy (as an OTP supervisor's intensity and period): at most max
 * restarts within window_s seconds, the next death ends the cluster. */
typedef struct restart_policy {
  int64_t max, window_s;
  uint64_t *at;  /* [max] when the restarts in the window were made, oldest first */
  int64_t used;
} restart_policy;

/* Whether one more restart is within the policy now (counted when it is). */
static bool may_restart(restart_policy *p) {
  const uint64_t now = sc_now_ns(), window = (uint64_t)p->window_s * 1000000000ull;
  int64_t keep = 0;
  for (int64_t i = 0; i < p->used; i++)
    if (now - p->at[i] < window) p->at[keep++] = p->at[i];
  p->used = keep;
  if (p->used >= p->max) return false;
  p->at[p->used++] = now;
  return true;
}

static void print_restarted(const sc_local_cluster *lc, int32_t rank) {
  printf("{\"event\":\"restarted\",\"rank\":%d,\"pid\":%d}\n", (int)rank,
         (int)sc_local_cluster_pid(lc, rank));
  fflush(stdout);
}

/* Node `rank`, which ended, again; the injected faults are taken out of the cluster file
 * first (sc_local_cluster_clear_injections: one fault per launch, not one per restart). */
static int restart_node(sc_local_cluster *lc, int32_t rank, sc_diag *d) {
  int rc = sc_local_cluster_clear_injections(lc, d);
  if (rc == 0) rc = sc_local_cluster_restart(lc, rank, d);
  if (rc == 0) {
    fprintf(stderr, "sparsecp launch: node %d started again\n", (int)rank);
    print_restarted(lc, rank);
  }
  return rc;
}

static void reap_all(sc_local_cluster *lc, bool *failed);

/* The head died: once the others have stopped (reap_all), all nodes again (none when a
 * stop signal came meanwhile). */
static int restart_all(sc_local_cluster *lc, sc_diag *d) {
  bool unused = false;
  reap_all(lc, &unused);
  if (g_stop) return 0;
  fprintf(stderr, "sparsecp launch: the head died: starting the whole cluster again\n");
  int rc = 0;
  for (int32_t r = 0; r < sc_local_cluster_size(lc) && rc == 0; r++) rc = restart_node(lc, r, d);
  return rc;
}

/* The head died: the other nodes stop by themselves within a second of losing it
 * (docs/cluster-file.md); whatever is left after 3 s (a node started again that never
 * reached the head) is killed. Every end is reported. */
static void reap_all(sc_local_cluster *lc, bool *failed) {
  while (sc_local_cluster_wait(lc, 3000, report_exit, failed) > 0)
    sc_local_cluster_kill(lc, SIGKILL);
}

/* Ends of nodes handled together: at most one per node. */
#define BATCH_MAX SC_LOCAL_CLUSTER_MAX_NODES

/* A node that failed (exited nonzero, where a device fault ends one) on a GPU it shares
 * under MPS may have taken the GPU's MPS server down with it: every other client of the
 * server has lost its context too, and the server admits no new client (the node's new
 * process) until they have all gone. So its GPU's other nodes are killed and reaped into
 * the batch ex[0..n), every one of them (a process whose context faulted may take a while
 * to leave the driver), and the batch is then recovered as one GPU's failure: *gpu_batch,
 * one restart of the budget; with the head among them, the whole cluster starts again.
 * A node killed by a signal leaves the server whole (its peers go on). (Any failure
 * counts, not only a device's: a node's exit status says only that it failed, DESIGN.md
 * §7.) Returns the batch's new size; *head is the head's index in it. */
static int take_gpu_peers(sc_local_cluster *lc, sc_local_exit *ex, int n, int *head,
                          bool *gpu_batch) {
  bool unused = false, failed_shared[BATCH_MAX] = {false}, any = false;
  for (int i = 0; i < n; i++)
    if (!ex[i].signaled && ex[i].value > 0 && sc_local_cluster_mps_shared(lc, ex[i].rank) &&
        sc_local_cluster_kill_gpu_peers(lc, ex[i].rank, SIGKILL) > 0) {
      fprintf(stderr, "sparsecp launch: node %d failed on a GPU it shares under MPS: "
                      "stopping the other nodes on that GPU with it\n", (int)ex[i].rank);
      failed_shared[i] = any = true;
    }
  *gpu_batch = any;
  const uint64_t slow = sc_now_ns() + 5000000000ull;
  bool said = false;
  while (any && n < BATCH_MAX && !g_stop) {
    const int more = sc_local_cluster_reap(lc, ex + n, BATCH_MAX - n);
    for (int i = n; i < n + more; i++) {
      report_exit(&unused, &ex[i]);
      if (ex[i].rank == 0) *head = i;
    }
    n += more;
    any = false; /* whether a killed node has not been reaped yet */
    for (int i = 0; i < n; i++)
      any |= failed_shared[i] && sc_local_cluster_kill_gpu_peers(lc, ex[i].rank, 0) > 0;
    if (any && !said && sc_now_ns() > slow) {
      fprintf(stderr, "sparsecp launch: still waiting for the killed nodes to end\n");
      said = true;
    }
    if (more == 0 && any) usleep(20000);
  }
  return n;
}

/* Keeps the cluster up until SIGINT/SIGTERM: a node other than the head that fails
 * (killed, or exits nonzero) is started again and rejoins (its running requests recompute
 * their context, clients see a pause: docs/pipeline.md, "Recovery"); when the head dies,
 * the others stop by themselves and the whole cluster is started again (its clients got
 * SC_EDOWN). Past the policy's restarts, without restarts, or when the head stopped in
 * order (status 0: it was told to), an end ends the cluster: the others get the grace
 * period to notice (they see DOWN), then everything is stopped. Returns whether it ended
 * that way, or a stop signal came before a death was recovered (launch then exits 1). */
static bool supervise(sc_local_cluster *lc, restart_policy *policy, int64_t grace_ms) {
  uint64_t stop_at = 0;
  bool unused = false;
  bool unrecovered = false; /* a node ended and has not been started again (yet) */
  while (!g_stop && (stop_at == 0 || sc_now_ns() < stop_at)) {
    sc_local_exit ex[BATCH_MAX];
    sc_local_cluster_mps_check(lc); /* (says so once when the daemon ended) */
    const int k = sc_local_cluster_reap(lc, ex, BATCH_MAX);
    if (k == 0) {
      usleep(20000);
      continue;
    }
    int n = k, head = -1;
    bool orderly = false; /* a node other than the head ended with status 0 */
    unrecovered = true;
    for (int i = 0; i < n; i++) {
      report_exit(&unused, &ex[i]);
      if (ex[i].rank == 0) head = i;
      else orderly |= !ex[i].signaled && ex[i].value == 0;
    }
    if (stop_at != 0) continue; /* giving up already */
    /* A node that stops in order was told to by the head, which ends the cluster (for an
     * error, or on an orderly stop): the head's own end decides, so wait for it. */
    const uint64_t until = sc_now_ns() + 3000000000ull;
    while (orderly && head < 0 && n < BATCH_MAX && sc_now_ns() < until && !g_stop) {
      const int more = sc_local_cluster_reap(lc, ex + n, BATCH_MAX - n);
      for (int i = n; i < n + more; i++) {
        report_exit(&unused, &ex[i]);
        if (ex[i].rank == 0) head = i;
      }
      n += more;
      if (more == 0) usleep(20000);
    }
    if (g_stop) break;
    bool gpu_batch;
    n = take_gpu_peers(lc, ex, n, &head, &gpu_batch);
    if (g_stop) break; /* (a stop signal while the GPU's nodes were being reaped) */
    sc_diag d = {0};
    int rc = 0;
    if (head >= 0 && !ex[head].signaled && ex[head].value == 0) {
      /* the head stopped in order (it was told to): restarted only after a failure, as
       * an OTP supervisor's transient child, so the cluster ends */
      fprintf(stderr, "sparsecp launch: the head stopped in order: stopping the cluster\n");
      rc = SC_ECLOSED;
    } else if (head >= 0) {
      rc = may_restart(policy) ? restart_all(lc, &d) : SC_EFULL;
    } else if (gpu_batch) {
      /* one GPU's failure: one restart of the budget for all of its nodes */
      rc = may_restart(policy) ? 0 : SC_EFULL;
      for (int i = 0; i < n && rc == 0; i++) rc = restart_node(lc, ex[i].rank, &d);
    } else {
      for (int i = 0; i < n && rc == 0; i++)
        rc = may_restart(policy) ? restart_node(lc, ex[i].rank, &d) : SC_EFULL;
    }
    if (rc == 0) {
      unrecovered = false;
      continue;
    }
    if (rc == SC_EFULL && policy->max > 0)
      fprintf(stderr, "sparsecp launch: %lld restarts within %lld s already: giving up\n",
              (long long)policy->max, (long long)policy->window_s);
    else if (rc != SC_EFULL && rc != SC_ECLOSED)
      fprintf(stderr, "sparsecp launch: cannot start a node again: %s\n", sc_diag_message(&d));
    stop_at = sc_now_ns() + (uint64_t)grace_ms * 1000000ull;
  }
  /* (a stop signal while a death was being handled: that node was not recovered) */
  return stop_at != 0 || unrecovered;
}

int sc_cmd_launch(int argc, char **argv) {
  static const struct option opts[] = {
      SC_LOCAL_CLUSTER_LONG_OPTIONS, /* --pcp --dcp --tp --device --collectives --gpus --model
                                        --token-budget --num-blocks --inject --transport */
      {"listen", required_argument, NULL, 'L'},
      {"listen-key-file", required_argument, NULL, 'K'},
      {"client-keys", required_argument, NULL, 'C'},
      {"tap", required_argument, NULL, 'T'},
      {"events", no_argument, NULL, 'e'},
      {"heartbeat-ms", required_argument, NULL, 'b'},
      {"heartbeat-timeout-ms", required_argument, NULL, 'B'},
      {"grace-ms", required_argument, NULL, 'g'},
      {"restarts", required_argument, NULL, 'r'},
      {"restart-window-s", required_argument, NULL, 'w'},
      {"rejoin-wait-ms", required_argument, NULL, 'j'},
      {"step-retries", required_argument, NULL, 's'},
      {"http", required_argument, NULL, 'H'},
      {"http-api-key-file", required_argument, NULL, 'A'},
      {"http-timeout-s", required_argument, NULL, 'O'},
      {"tokenizer", required_argument, NULL, 'Z'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  sc_local_cluster_opts o = {.pcp = 1, .dcp = 1, .tp = 1};
  int64_t hb = 200, hbt = 1000, grace = 2000;
  /* 3 restarts in 60 s: a node that keeps dying ends the cluster within about a minute
   * instead of being restarted forever */
  int64_t restarts = 3, window_s = 60, rejoin_wait = 10000, step_retries = 2;
  const char *tap = NULL, *key_file = NULL, *client_keys = NULL, *api_key = NULL;
  const char *tokenizer = NULL;
  int64_t http_timeout = 0;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (opt) {
    case 'b': if (!sc_cli_int("launch", "--heartbeat-ms", optarg, 10, 600000, &hb)) return SC_EXIT_USAGE; break;
    case 'B': if (!sc_cli_int("launch", "--heartbeat-timeout-ms", optarg, 20, 3600000, &hbt)) return SC_EXIT_USAGE; break;
    case 'g': if (!sc_cli_int("launch", "--grace-ms", optarg, 0, 600000, &grace)) return SC_EXIT_USAGE; break;
    case 'r': if (!sc_cli_int("launch", "--restarts", optarg, 0, 1000, &restarts)) return SC_EXIT_USAGE; break;
    case 'w': if (!sc_cli_int("launch", "--restart-window-s", optarg, 1, 86400, &window_s)) return SC_EXIT_USAGE; break;
    case 'j': if (!sc_cli_int("launch", "--rejoin-wait-ms", optarg, 1, 3600000, &rejoin_wait)) return SC_EXIT_USAGE; break;
    case 's': if (!sc_cli_int("launch", "--step-retries", optarg, 0, 16, &step_retries)) return SC_EXIT_USAGE; break;
    case 'L': o.listen = optarg; break;
    case 'K': key_file = optarg; break;
    case 'C': client_keys = optarg; break;
    case 'T': tap = optarg; break;
    case 'H': o.http = optarg; break;
    case 'A': api_key = optarg; break;
    case 'O': if (!sc_cli_int("launch", "--http-timeout-s", optarg, 1, 3600, &http_timeout)) return SC_EXIT_USAGE; break;
    case 'Z': tokenizer = optarg; break;
    case 'e': o.events = true; break;
    case 'h': help(stdout); return SC_EXIT_OK;
    default: {
      const int r = sc_local_cluster_parse_opt("launch", opt, optarg, &o);
      if (r < 0) return SC_EXIT_USAGE;
      if (r == 0) {
        help(stderr);
        return SC_EXIT_USAGE;
      }
    }
    }
  }
  if (optind != argc) {
    help(stderr);
    return SC_EXIT_USAGE;
  }
  if (hbt <= hb) {
    sc_cli_error("launch", "--heartbeat-timeout-ms must exceed --heartbeat-ms");
    return SC_EXIT_USAGE;
  }
  o.heartbeat_ms = (int32_t)hb;
  o.heartbeat_timeout_ms = (int32_t)hbt;
  /* without restarts nothing comes back: a node's death ends the cluster at once */
  o.rejoin_wait_ms = restarts > 0 ? (int32_t)rejoin_wait : 0;
  o.step_retries = (int32_t)step_retries;
  uint64_t restart_at[1000];
  restart_policy policy = {.max = restarts, .window_s = window_s, .at = restart_at};
  /* the same checks as `sparsecp run`, before any node starts */
  if (sc_local_cluster_validate("launch", &o, NULL)) return SC_EXIT_USAGE;
  if (tap && !sc_endpoint_is_local(tap) && !o.tcp) {
    sc_cli_error("launch", "--tap %s: a tap on a network speaks CURVE, with the keys that "
                           "--transport tcp makes", tap);
    return SC_EXIT_USAGE;
  }
  sc_diag tap_why = {0};
  if (tap && sc_ipc_check_private(tap, &tap_why) != 0) {
    sc_cli_error("launch", "--tap %s", sc_diag_message(&tap_why));
    return SC_EXIT_USAGE;
  }
  sc_diag d = {0};
  /* the key files are read here first, so that a bad one is said before any node starts,
   * and by their absolute paths, so that the nodes find them whatever their directory */
  char key_path[PATH_MAX], list_path[PATH_MAX], server_key[SC_CURVE_Z85_LEN + 1] = "";
  if (client_keys && key_file == NULL) {
    sc_cli_error("launch", "--client-keys needs --listen-key-file: clients are told apart "
                           "by their CURVE keys");
    return SC_EXIT_USAGE;
  }
  if (client_keys) {
    if (!absolute_path("--client-keys", client_keys, list_path)) return SC_EXIT_USAGE;
    uint8_t(*keys)[32] = NULL;
    int32_t num = 0;
    const int rc = sc_curve_load_public_list(list_path, &keys, &num, &d);
    free(keys);
    if (rc != 0) {
      sc_cli_error("launch", "%s", sc_diag_message(&d));
      return SC_EXIT_USAGE;
    }
    o.client_keys_file = list_path;
  }
  char api_key_path[PATH_MAX];
  if (api_key) { /* said now rather than by the head node after the start */
    char text[258];
    size_t len = 0;
    if (!absolute_path("--http-api-key-file", api_key, api_key_path)) return SC_EXIT_USAGE;
    const int rc = sc_secret_read(api_key_path, text, sizeof text, &len, &d);
    sc_wipe(text, sizeof text);
    if (rc != 0) {
      sc_cli_error("launch", "--http-api-key-file: %s", sc_diag_message(&d));
      return SC_EXIT_USAGE;
    }
    o.http_api_key_file = api_key_path;
  }
  if ((api_key || http_timeout || tokenizer) && o.http == NULL) {
    sc_cli_error("launch", "--http-api-key-file, --http-timeout-s and --tokenizer need --http");
    return SC_EXIT_USAGE;
  }
  o.http_timeout_s = (int32_t)http_timeout;
  char tokenizer_path[PATH_MAX];
  if (tokenizer) { /* loaded once here, so that a bad file is said before any node starts */
    if (!absolute_path("--tokenizer", tokenizer, tokenizer_path)) return SC_EXIT_USAGE;
    sc_tokenizer *t = NULL;
    const int rc = sc_tokenizer_load(tokenizer_path, &t, &d);
    sc_tokenizer_free(t);
    if (rc != 0) {
      sc_cli_error("launch", "--tokenizer %s: %s", tokenizer, sc_diag_message(&d));
      return SC_EXIT_USAGE;
    }
    o.tokenizer = tokenizer_path;
  }
  if (key_file) {
    uint8_t secret[32];
    if (!absolute_path("--listen-key-file", key_file, key_path)) return SC_EXIT_USAGE;
    const int rc = sc_curve_load_secret(key_path, secret, server_key, &d);
    sc_wipe(secret, sizeof secret);
    if (rc != 0) {
      sc_cli_error("launch", "%s", sc_diag_message(&d));
      return rc == SC_ENOTSUP ? SC_EXIT_FAILURE : SC_EXIT_USAGE;
    }
    o.listen_key_file = key_path;
  }

  /* SIGINT/SIGTERM end the wait below; the children are then stopped in order */
  sc_cli_catch_stop_signals(on_stop_signal);
  signal(SIGPIPE, SIG_IGN);
  sc_local_cluster *lc = NULL;
  o.taps = tap != NULL; /* a node binds a tap only when one is asked for */
  const int start_rc = sc_local_cluster_start(&o, &lc, &d);
  if (start_rc != 0) {
    sc_cli_error("launch", "%s", sc_diag_message(&d));
    /* (a --http address that is not one is bad input; the rest are failures) */
    return start_rc == SC_EINVAL ? SC_EXIT_USAGE : SC_EXIT_FAILURE;
  }
  proxy px = {0};
  int exit_code = SC_EXIT_OK;
  bool failed = false; /* a node was killed or exited nonzero (report_exit) */
  if (tap && proxy_start(&px, lc, tap) != 0) {
    exit_code = SC_EXIT_FAILURE;
    goto out;
  }
  print_launched(lc, tap, &px, server_key);

  if (supervise(lc, &policy, grace)) exit_code = SC_EXIT_FAILURE;
out:
  proxy_stop(&px);
  /* Every node's end is reported, also during the stop: one killed just before a stop
   * signal used to pass unseen (exit 0, no "exited" line) when the loop above had not
   * looked since. Nodes that the stop ends leave with status 0; any other end fails. */
  sc_local_cluster_stop_report(lc, report_exit, &failed);
  if (failed) exit_code = SC_EXIT_FAILURE;
  return exit_code;
}

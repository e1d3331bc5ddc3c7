/* cmd_node.c - `sparsecp node --cluster FILE --rank R`: runs one node of a cluster until
 * it is told to stop (node_shutdown from the head, SIGINT/SIGTERM, or losing the head).
 *
 * --events prints one JSON line per node event on stdout ({"event": "ready" | "down" |
 * "rejoined" | "shutdown" | "stopped", "rank", "code", "detail", "time_ms"}; "rejoined":
 * a new process of node `rank` joined the running cluster), which `launch` and the
 * integration tests read. When the cluster file has a "pipeline" section, the node also
 * runs the inference pipeline's actors (actors/pipeline.h): the list is identical in
 * every process of the cluster (see sc_node.h). */
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "actors/pipeline.h"
#include "actors/rank_ctx.h"
#include "actors/runtime/sc_node.h"
#include "base/clock.h"
#include "base/curve_key.h"
#include "tools/cli.h"

/* The node that SIGINT/SIGTERM stop. A handler may run on any thread, so the node is
 * destroyed only once it is cleared here and no handler still holds it (g_in_handler). */
static _Atomic(sc_node *) g_node;
static _Atomic int g_in_handler;
/* The pipeline's per-process state; the startup arguments point at this slot. */
static sc_rank_ctx *g_rank_ctx;

static void on_signal(int sig) {
  (void)sig;
  atomic_fetch_add(&g_in_handler, 1);
  sc_node *n = atomic_load(&g_node);
  if (n) sc_node_request_stop(n, 0);
  atomic_fetch_sub(&g_in_handler, 1);
}

static void print_event(void *ud, const char *event, int32_t rank, int code,
                        const char *detail) {
  (void)ud;
  /* detail comes from the runtime (fixed sentences without quotes or backslashes) */
  printf("{\"event\":\"%s\",\"rank\":%d,\"code\":%d,\"detail\":\"%s\",\"time_ms\":%.3f}\n",
         event, (int)rank, code, detail, (double)sc_now_ns() / 1e6);
  fflush(stdout);
}

/* When the cluster file has a "pipeline" section: loads it, creates this rank's context
 * into g_rank_ctx and fills startup (room for SC_PIPELINE_NUM_ACTORS) with *num entries.
 * A cluster without a pipeline leaves g_rank_ctx NULL and *num 0. key: this node's key
 * pair with a keyed cluster (its collectives use it too), else NULL. */
static int setup_pipeline(const char *cluster_path, const sc_cluster *cluster, int32_t rank,
                          const sc_node_key *key, sc_startup_actor *startup, int32_t *num,
                          sc_diag *d) {
  *num = 0;
  sc_pipeline_config cfg;
  bool present;
  int rc = sc_pipeline_config_load(cluster_path, cluster, &cfg, &present, d);
  if (rc || !present) return rc;
  /* only the head serves clients, and only its host needs the secret key file */
  if (rank == 0 && cfg.listen_key_file[0] != '\0') {
    rc = sc_curve_load_secret(cfg.listen_key_file, cfg.listen_secret, cfg.listen_public, d);
    cfg.listen_curve = rc == 0;
  }
  if (key) cfg.node_key = *key;
  if (rc == 0) rc = sc_rank_ctx_create(&cfg, rank, &g_rank_ctx, d);
  sc_wipe(cfg.listen_secret, sizeof cfg.listen_secret);
  sc_pipeline_config_free(&cfg);
  if (rc) return rc;
  sc_pipeline_startup(&g_rank_ctx, startup);
  *num = SC_PIPELINE_NUM_ACTORS;
  return 0;
}

static void help(FILE *f) {
  fprintf(f,
          "usage: sparsecp node --cluster FILE.json --rank R [--events] [--loops K]\n"
          "                     [--ready-timeout MS]\n\n"
          "Runs node R of the cluster described by FILE (docs/cluster-file.md) until the\n"
          "head shuts the cluster down, the head is lost, or SIGINT/SIGTERM arrives.\n"
          "  --events          print node events as JSON lines on stdout\n"
          "  --loops K         actor loop threads (default: the cluster file's \"loops\")\n"
          "  --ready-timeout   give up when the cluster is not ready after MS (default 30000)\n");
}

int sc_cmd_node(int argc, char **argv) {
  static const struct option opts[] = {{"cluster", required_argument, NULL, 'c'},
                                       {"rank", required_argument, NULL, 'r'},
                                       {"events", no_argument, NULL, 'e'},
                                       {"loops", required_argument, NULL, 'l'},
                                       {"ready-timeout", required_argument, NULL, 't'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *cluster_path = NULL;
  int64_t rank = -1, loops = 0, ready_ms = 30000;
  bool events = false;
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
    case 'c': cluster_path = optarg; break;
    case 'r':
      if (!sc_cli_int("node", "--rank", optarg, 0, SC_CLUSTER_MAX_NODES - 1, &rank))
        return SC_EXIT_USAGE;
      break;
    case 'l':
      if (!sc_cli_int("node", "--loops", optarg, 1, 32, &loops)) return SC_EXIT_USAGE;
      break;
    case 't':
      if (!sc_cli_int("node", "--ready-timeout", optarg, 1, 3600000, &ready_ms))
        return SC_EXIT_USAGE;
      break;
    case 'e': events = true; break;
    case 'h': help(stdout); return SC_EXIT_OK;
    default: help(stderr); return SC_EXIT_USAGE;
    }
  }
  if (cluster_path == NULL || rank < 0 || optind != argc) {
    help(stderr);
    return SC_EXIT_USAGE;
  }
  sc_diag d = {0};
  sc_cluster cluster;
  int rc = sc_cluster_load(cluster_path, &cluster, &d);
  if (rc != 0) {
    sc_cli_error("node", "%s", sc_diag_message(&d));
    return SC_EXIT_USAGE;
  }
  if (rank >= cluster.num_nodes) {
    sc_cli_error("node", "--rank %lld: the cluster has ranks 0..%d", (long long)rank,
                 (int)cluster.num_nodes - 1);
    sc_cluster_free(&cluster);
    return SC_EXIT_USAGE;
  }
  sc_node_opts o;
  sc_node_opts_default(&o);
  o.cluster = &cluster;
  o.rank = (int32_t)rank;
  o.loops = (int32_t)loops;
  /* the key pair is read once, for the node's sockets and its rank's collectives */
  sc_node_key key;
  rc = cluster.curve ? sc_cluster_load_node_key(&cluster, (int32_t)rank, &key, &d) : 0;
  o.key = cluster.curve ? &key : NULL;
  sc_startup_actor startup[SC_PIPELINE_NUM_ACTORS];
  int32_t num_startup = 0;
  if (rc == 0)
    rc = setup_pipeline(cluster_path, &cluster, (int32_t)rank, o.key, startup, &num_startup,
                        &d);
  if (rc != 0) {
    sc_cli_error("node", "%s", sc_diag_message(&d));
    sc_wipe(&key, sizeof key);
    sc_cluster_free(&cluster);
    return rc == SC_EINVAL ? SC_EXIT_USAGE : SC_EXIT_FAILURE;
  }
  o.startup = startup;
  o.num_startup = num_startup;
  int exit_code = SC_EXIT_FAILURE;
  sc_node *node = NULL;
  rc = sc_node_create(&o, &node, &d);
  sc_wipe(&key, sizeof key); /* (the node keeps its copy) */
  atomic_store(&g_node, node);
  if (rc != 0) {
    sc_cli_error("node", "%s", sc_diag_message(&d));
    goto out;
  }
  if (events) sc_node_set_event_cb(node, print_event, NULL);
  sc_cli_catch_stop_signals(on_signal);
  signal(SIGPIPE, SIG_IGN);
  rc = sc_node_start(node, &d);
  if (rc != 0) {
    sc_cli_error("node", "%s", sc_diag_message(&d));
    goto out;
  }
  rc = sc_node_wait_ready(node, ready_ms);
  if (rc != 0 && rc != SC_ECLOSED) {
    char why[160];
    int32_t gone = -1;
    for (int32_t r = 0; rc == SC_EDOWN && r < cluster.num_nodes && gone < 0; r++)
      if (sc_node_peer_down(node, r)) gone = r;
    if (rc == SC_EDOWN)
      snprintf(why, sizeof why, "node %d went down before the cluster was ready", (int)gone);
    else
      snprintf(why, sizeof why, "the cluster was not ready within %lld ms", (long long)ready_ms);
    sc_cli_error("node", "rank %lld: %s", (long long)rank, why);
    /* the head's clients may have sent requests meanwhile (they wait in the queue: no
     * step starts before ready): they hear why the cluster ends */
    if (rank == 0) sc_pipeline_stop_clients(node, why);
    goto out;
  }
  /* the scheduler starts steps from now on (requests may have waited meanwhile) */
  if (rank == 0 && rc == 0) sc_pipeline_cluster_ready(node);
  /* (at once when a signal stopped the node while it waited for the cluster) */
  rc = sc_node_wait_shutdown(node, -1);
  if (rank == 0) {
    /* on an orderly stop, clients first hear that their requests end (a stop for an
     * error has told them already, and a node with no pipeline has nothing to say);
     * then the head takes the others down with it, and gives them a moment */
    if (rc == 0) sc_pipeline_stop_clients(node, "head stopping");
    sc_node_broadcast_shutdown(node, rc == 0 ? "head stopping" : sc_strerror(rc));
    const uint64_t until = sc_now_ns() + 500000000ull;
    for (;;) {
      bool all_down = true;
      for (int32_t r = 1; r < cluster.num_nodes; r++)
        if (!sc_node_peer_down(node, r)) all_down = false;
      if (all_down || sc_now_ns() > until) break;
      usleep(5000);
    }
  }
  if (events) print_event(NULL, "stopped", (int32_t)rank, rc, rc == 0 ? "" : sc_strerror(rc));
  exit_code = rc == 0 ? SC_EXIT_OK : SC_EXIT_FAILURE;
  if (rc != 0) sc_cli_error("node", "rank %lld stopped: %s", (long long)rank, sc_strerror(rc));
out:
  {
    sc_node *n = atomic_exchange(&g_node, NULL);
    while (atomic_load(&g_in_handler) > 0) sched_yield(); /* a handler that read n */
    sc_node_destroy(n);
    sc_rank_ctx_destroy(g_rank_ctx); /* after the actors that used it have stopped */
    g_rank_ctx = NULL;
  }
  sc_cluster_free(&cluster);
  return exit_code;
}

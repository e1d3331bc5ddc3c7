/* local_cluster.h - a cluster of `sparsecp node` child processes on this machine, for
 * `sparsecp run` (and the pipeline's integration tests through it).
 *
 * Start writes a cluster file (ipc endpoints in a private temporary folder under $TMPDIR
 * or /tmp, or tcp
 * loopback ports) with a "pipeline" section built from the options, and starts one
 * node per rank (P x T ranks, SPEC.md §1). Children carry PR_SET_PDEATHSIG, so even a
 * SIGKILLed parent leaves none behind. Poll reports children that died. Stop sends
 * SIGTERM, waits up to 3 s, then SIGKILLs what is left, reaps everything and removes the
 * folder.
 *
 * Ownership: the cluster owns its children (its MPS daemon among them) and folder.
 * Threads: one thread; the caller must not reap children itself.
 *
 * The command-line options both commands take for the cluster (--pcp --dcp --tp --device
 * --collectives --gpus --model --model-dir --token-budget --num-blocks --inject --transport
 * --mps ...) are parsed and checked here too, so that `run` and `launch` accept and refuse
 * the same input before any process starts.
 *
 * Ranks that share a GPU run under an MPS server (the mps option): the cluster starts a
 * private MPS control daemon (mps_daemon.h) before its nodes, unless the environment names
 * one, and stops it after them.
 */
#ifndef SC_LOCAL_CLUSTER_H
#define SC_LOCAL_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "actors/runtime/sc_cluster.h"
#include "base/error.h"
#include "model/model_config.h"

#define SC_LOCAL_CLUSTER_MAX_INJECT 4

/* Nodes of a local cluster: each takes two of a cluster's endpoints (its node endpoint
 * and its collectives endpoint). */
#define SC_LOCAL_CLUSTER_MAX_NODES (SC_CLUSTER_MAX_NODES / 2)

typedef struct sc_local_cluster_opts {
  int32_t pcp, dcp, tp;
  bool tcp;                     /* tcp loopback instead of ipc, every node with an
                                   ephemeral CURVE key pair in the folder */
  bool plaintext_tcp;           /* with tcp: no keys ("plaintext_tcp" in the cluster file):
                                   only to measure what CURVE costs (bench e2e) */
  bool taps;                    /* every node binds a tap (tcp: CURVE, admitting the key
                                   of sc_local_cluster_tap_key_file) */
  const char *model_file;       /* NULL: the embedded default model */
  const char *model_dir;        /* a DeepSeek-V3.2 checkpoint directory (--model-dir;
                                   CPU only), or NULL; excludes model_file */
  int32_t token_budget;         /* 0: the pipeline default */
  int32_t num_blocks;           /* 0: the pipeline default */
  int32_t block_size;           /* 0: the pipeline default */
  int32_t deadline_ms;          /* 0: the pipeline default */
  int32_t max_model_len;        /* 0: the pipeline default */
  int32_t heartbeat_ms, heartbeat_timeout_ms; /* 0: the cluster defaults */
  /* "desync:R:S" / "kill:R:S", num_inject of them (borrowed strings) */
  const char *inject[SC_LOCAL_CLUSTER_MAX_INJECT];
  int32_t num_inject;
  const char *log_level;        /* SPARSECP_LOG of the children, NULL: inherited */
  bool quiet;                   /* children's stderr to /dev/null */
  const char *exe;              /* the sparsecp binary; NULL: this process's own */
  bool cuda;                    /* ranks compute on GPUs */
  int32_t gpus;                 /* with cuda: rank r uses GPU r % gpus (each process sees
                                   only that one, through CUDA_VISIBLE_DEVICES); 0 = 1 */
  bool nccl;                    /* NCCL collectives instead of the host backend */
  bool ipc;                     /* device collectives of ranks sharing one GPU */
  const char *listen;           /* the head's client endpoint; NULL: one in the folder */
  const char *listen_key_file;  /* CURVE secret key file for it (absolute path); NULL:
                                   plain */
  const char *client_keys_file; /* the public keys of the clients it serves (absolute
                                   path; needs listen_key_file); NULL: any client that
                                   holds the server key */
  bool events;                  /* nodes print their events as JSON lines on stdout */
  const char *http;             /* the head's HTTP address HOST:PORT (port 0: a free one);
                                   NULL: none */
  const char *http_api_key_file; /* its API key file (absolute path); NULL: none */
  int32_t http_timeout_s;       /* 0: the default */
  const char *tokenizer;        /* a tokenizer.json for text prompts; NULL: none */
  bool profile;                 /* executors time each step's stages (pipeline "profile") */
  bool no_cuda_graphs;          /* pipeline "cuda_graphs": false (every op launched as
                                   called; the baseline of a comparison) */
  const char *kv_format;        /* pipeline "kv_format": "f32", "bf16", "fp8_ds_mla"; NULL:
                                   the default (f32) */
  const char *index_format;     /* pipeline "index_format": "kv" (the keys in the KV rows)
                                   or "fp8" (in fp8 rows of their own); NULL: the default
                                   (sc_pipeline_kv_formats) */
  const char *overlap;          /* pipeline "overlap": "auto", "on" or "off"; NULL: auto */
  bool gemm_tf32;               /* pipeline "gemm_precision": "tf32" (CUDA), not f32 */
  int32_t rejoin_wait_ms;       /* pipeline.rejoin_wait_ms (0: a node's death ends the
                                   cluster): set by a caller that restarts nodes */
  int32_t step_retries;         /* pipeline.step_retries (0: a failed step's requests
                                   fail at once) */
  const char *mps;              /* ranks sharing a GPU (--device cuda, more ranks than
                                   --gpus) under an MPS server (tools/mps_daemon.h):
                                   "auto" (NULL): the MPS daemon the environment names, else
                                   one of the cluster's own, else without MPS and a warning;
                                   "on": the same but an error instead; "off": none */
} sc_local_cluster_opts;

typedef struct sc_local_cluster sc_local_cluster;

int sc_local_cluster_start(const sc_local_cluster_opts *o, sc_local_cluster **out,
                           sc_diag *d);
/* The client endpoint of the head's gateway, and the tap endpoint of node `rank`. */
const char *sc_local_cluster_tap(const sc_local_cluster *c, int32_t rank);
const char *sc_local_cluster_listen(const sc_local_cluster *c);
/* The head's HTTP address with its port chosen ("" without --http). */
const char *sc_local_cluster_http(const sc_local_cluster *c);
/* With tcp taps: the secret key file of the one subscriber key they admit; else "". */
const char *sc_local_cluster_tap_key_file(const sc_local_cluster *c);
const char *sc_local_cluster_file(const sc_local_cluster *c);
int32_t sc_local_cluster_size(const sc_local_cluster *c);
pid_t sc_local_cluster_pid(const sc_local_cluster *c, int32_t rank);
/* Whether node `rank`'s process has not been seen to end (reaped) yet. */
bool sc_local_cluster_alive(const sc_local_cluster *c, int32_t rank);

/* Starts node `rank`, which has ended (and was reaped), again with the same command
 * line: a new process of it, which rejoins the running cluster (docs/runtime.md,
 * "Rejoining"), or joins a cluster being started again. */
int sc_local_cluster_restart(sc_local_cluster *c, int32_t rank, sc_diag *d);
/* Takes the injected faults (--inject) out of the cluster file, for the nodes started
 * from now on: an injection is one fault of the run, not one per restart (a restarted
 * head counts its steps from 1 again and would meet it again, without end). */
int sc_local_cluster_clear_injections(sc_local_cluster *c, sc_diag *d);

/* A child that ended. */
typedef struct sc_local_exit {
  int32_t rank;
  pid_t pid;
  bool signaled;  /* value is the signal, else the exit status */
  int value;      /* -1: unknown (the child was reaped by something else) */
} sc_local_exit;

/* "node R (pid P) exited with status S" / "was killed by signal S" / "ended (...)". */
void sc_local_exit_describe(const sc_local_exit *e, char *out, size_t len);
/* Called for each child that ended (the commands report it). */
typedef void (*sc_local_exit_fn)(void *ud, const sc_local_exit *e);

/* Reaps children without blocking: writes up to max exits and returns how many. */
int sc_local_cluster_reap(sc_local_cluster *c, sc_local_exit *out, int max);
/* As reap, describing the first exit in msg ("node 1 (pid 123) was killed by signal
 * 9"); returns the number of children that ended. */
int sc_local_cluster_poll(sc_local_cluster *c, char *msg, size_t len);
/* Reaps children (each end to report, when given) until none runs or timeout_ms has
 * passed; returns how many still run. */
int32_t sc_local_cluster_wait(sc_local_cluster *c, int64_t timeout_ms, sc_local_exit_fn report,
                              void *ud);
/* Sends sig to every child still running. */
void sc_local_cluster_kill(sc_local_cluster *c, int sig);
/* Logs a warning the first time the cluster's own MPS daemon, when it has one, is found
 * ended: nodes started from then on run without MPS. */
void sc_local_cluster_mps_check(sc_local_cluster *c);
/* Whether node `rank` shares its GPU with other nodes under an MPS server (the cluster's
 * own or the environment's). Their fates are tied: a device fault in one MPS client
 * reaches every client of its server, and the server admits no new client until all of
 * those have gone (measured on one H200: a new process of the faulted node could not
 * create its context while the head still ran). */
bool sc_local_cluster_mps_shared(const sc_local_cluster *c, int32_t rank);
/* Sends sig (0: none) to every node still running on node `rank`'s GPU other than rank
 * itself; returns how many there are. */
int32_t sc_local_cluster_kill_gpu_peers(sc_local_cluster *c, int32_t rank, int sig);
/* Stops and reaps every child, removes the folder, frees c. NULL is a no-op. */
void sc_local_cluster_stop(sc_local_cluster *c);
/* The same, calling report(ud, exit) for every child that ends meanwhile (on this
 * thread), whether it ended before the stop or because of it. */
void sc_local_cluster_stop_report(sc_local_cluster *c, sc_local_exit_fn report, void *ud);

/* The shared options as getopt_long entries, for a command's `struct option` array
 * (needs <getopt.h>): `{SC_LOCAL_CLUSTER_LONG_OPTIONS, {"own", ...}, ..., {NULL, 0, NULL,
 * 0}}`. Their values are the SC_LCOPT_* codes, outside any short option's range. */
enum {
  SC_LCOPT_PCP = 0x1000,
  SC_LCOPT_DCP,
  SC_LCOPT_TP,
  SC_LCOPT_DEVICE,
  SC_LCOPT_COLLECTIVES,
  SC_LCOPT_GPUS,
  SC_LCOPT_MODEL,
  SC_LCOPT_TOKEN_BUDGET,
  SC_LCOPT_NUM_BLOCKS,
  SC_LCOPT_INJECT,
  SC_LCOPT_TRANSPORT,
  SC_LCOPT_PROFILE,
  SC_LCOPT_MODEL_DIR,
  SC_LCOPT_KV_FORMAT,
  SC_LCOPT_INDEX_FORMAT,
  SC_LCOPT_NO_CUDA_GRAPHS,
  SC_LCOPT_OVERLAP,
  SC_LCOPT_MPS,
  SC_LCOPT_GEMM_PRECISION,
};
#define SC_LOCAL_CLUSTER_LONG_OPTIONS                                                    \
  {"pcp", required_argument, NULL, SC_LCOPT_PCP},                                        \
      {"dcp", required_argument, NULL, SC_LCOPT_DCP},                                    \
      {"tp", required_argument, NULL, SC_LCOPT_TP},                                      \
      {"device", required_argument, NULL, SC_LCOPT_DEVICE},                              \
      {"collectives", required_argument, NULL, SC_LCOPT_COLLECTIVES},                    \
      {"gpus", required_argument, NULL, SC_LCOPT_GPUS},                                  \
      {"model", required_argument, NULL, SC_LCOPT_MODEL},                                \
      {"token-budget", required_argument, NULL, SC_LCOPT_TOKEN_BUDGET},                  \
      {"num-blocks", required_argument, NULL, SC_LCOPT_NUM_BLOCKS},                      \
      {"inject", required_argument, NULL, SC_LCOPT_INJECT},                              \
      {"transport", required_argument, NULL, SC_LCOPT_TRANSPORT},                        \
      {"profile", no_argument, NULL, SC_LCOPT_PROFILE},                                  \
      {"model-dir", required_argument, NULL, SC_LCOPT_MODEL_DIR},                        \
      {"kv-format", required_argument, NULL, SC_LCOPT_KV_FORMAT},                        \
      {"index-format", required_argument, NULL, SC_LCOPT_INDEX_FORMAT},                  \
      {"no-cuda-graphs", no_argument, NULL, SC_LCOPT_NO_CUDA_GRAPHS},                    \
      {"overlap", required_argument, NULL, SC_LCOPT_OVERLAP},                            \
      {"mps", required_argument, NULL, SC_LCOPT_MPS},                                    \
      {"gemm-precision", required_argument, NULL, SC_LCOPT_GEMM_PRECISION}

/* Applies getopt_long's result ch (with its optarg) to o when it is one of the shared
 * options. Returns 1 when it was and its value is good, 0 when ch is not a shared option
 * (the caller handles it), SC_EINVAL when the value is bad: the error is printed as
 * "sparsecp CMD: error: ..." (the caller exits with status 2). o keeps arg (argv) for
 * --model, --model-dir and --inject. */
int sc_local_cluster_parse_opt(const char *cmd, int ch, const char *arg,
                               sc_local_cluster_opts *o);

/* Checks the whole configuration once all options are parsed, before any process
 * starts: the model file or directory (loaded into *model when model is not NULL; the
 * default model without either), the plan configuration, the model's heads against --tp, --collectives
 * nccl against --device and --gpus, and the --inject specs against the ranks. Returns 0,
 * or SC_EINVAL with the first problem printed as for sc_local_cluster_parse_opt. */
int sc_local_cluster_validate(const char *cmd, const sc_local_cluster_opts *o,
                              sc_model_config *model);

#endif

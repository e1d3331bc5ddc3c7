/* pipeline_config.h - the configuration of a cluster's inference pipeline: the
 * "pipeline" section of a cluster file (docs/cluster-file.md) with its defaults, and
 * what follows from it (the scheduler's pool is the engines' cache, the client limits
 * follow the model). `sparsecp node` loads it; every rank's context copies it.
 *
 * Threads: any; a config is read-only once loaded.
 */
#ifndef SC_PIPELINE_CONFIG_H
#define SC_PIPELINE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "actors/fault.h"
#include "actors/runtime/sc_cluster.h"
#include "actors/scheduler/sched.h"
#include "messages/messages.h"
#include "model/engine.h"

/* pipeline.overlap: whether the scheduler plans a step while the one before runs (issue
 * 20, docs/pipeline.md "Overlapped steps"). auto: where the device runs a step while the
 * host goes on (CUDA); on: also on the CPU (whose ops run as they are queued, so a step
 * planned ahead runs before the step before's tokens are sent: only for tests). Either
 * way not while steps are profiled. Several ranks overlap only with host collectives
 * (whose outcome is known when a step's forward pass has been queued, where NCCL's is
 * read at its completion). */
typedef enum sc_overlap { SC_OVERLAP_AUTO = 0, SC_OVERLAP_ON, SC_OVERLAP_OFF } sc_overlap;

typedef struct sc_pipeline_config {
  sc_engine_config engine;        /* plan layout (pcp, dcp, tp, interleave, ...), model,
                                     weights, KV pool, kernel threads */
  char weights_path[1024];        /* storage for engine.weights ("" = synthetic) */
  sc_sched_config sched;          /* token budget, running limit, pool, max length */
  sc_msg_limits limits;           /* the gateway's untrusted-input limits */
  int64_t deadline_ms;            /* per collective */
  int64_t rejoin_wait_ms;         /* a node other than the head that goes down: how long
                                     the head waits for a new process of it to rejoin
                                     (requests wait meanwhile, their running ones back
                                     in the queue), 0: the cluster ends at once (the
                                     default; `launch` sets it when it restarts nodes) */
  int32_t step_retries;           /* a step that fails while every node is up (a refused
                                     collective, a lost acknowledgement, a deadline): its
                                     requests run it again up to this many times in a row
                                     before their clients get the error (0: at once, the
                                     default; `launch` sets 2) */
  bool nccl;                      /* NCCL collectives (one GPU per rank) instead of the
                                     host backend (CPU ranks, or ranks sharing a GPU,
                                     their device buffers staged through host memory) */
  bool ipc;                       /* "collectives": "ipc": device collectives between
                                     ranks sharing one GPU (collectives/backend_ipc.h) */
  sc_faults inject;               /* `--inject KIND:RANK:STEP` (fault.h) */
  bool profile;                   /* executors time each step's stages (step_prof.h) */
  sc_overlap overlap;             /* steps planned ahead (sc_pipeline_overlaps) */
  int32_t num_ranks;
  char (*coll_endpoints)[256];    /* [num_ranks] host collective endpoints */
  uint8_t (*rank_keys)[32];       /* [num_ranks] CURVE public keys (NULL: plain) */
  sc_node_key node_key;           /* with rank_keys: this rank's key pair, filled by the
                                     node's program (sc_cluster_load_node_key) */
  char listen[256];               /* the gateway's client endpoint */
  char listen_key_file[512];      /* its CURVE secret key file ("": plain) */
  char client_keys_file[512];     /* the public keys of the clients served ("": any client
                                     that holds the server key) */
  bool listen_curve;              /* the head's program read that file: */
  uint8_t listen_secret[32];      /* the key, and its public half in Z85 for the log */
  char listen_public[41];
  /* the HTTP front (docs/http.md) */
  char http[256];                 /* HOST:PORT ("": none) */
  char http_api_key_file[512];    /* the Bearer key's file ("": none), read by the gateway */
  int32_t http_timeout_s;
  char model_file[1024];          /* pipeline.model_file as resolved ("": none) */
  char model_dir[1024];           /* pipeline.model_dir: a DeepSeek-V3.2 checkpoint
                                     directory (model/hf_model.h), resolved ("": none) */
  char tokenizer_path[1024];      /* pipeline.tokenizer: a tokenizer.json ("": none) */
  char served_model_name[128];    /* pipeline.served_model_name ("": from model_file) */
} sc_pipeline_config;

/* Reads the "pipeline" section and the nodes' "coll" endpoints of a cluster file
 * (docs/cluster-file.md), with the parallel layout of `cluster`. *present says whether
 * the file has a pipeline section at all (when not, out stays empty and 0 is returned). */
int sc_pipeline_config_load(const char *cluster_path, const sc_cluster *cluster,
                            sc_pipeline_config *out, bool *present, sc_diag *d);
void sc_pipeline_config_free(sc_pipeline_config *c);

/* The KV cache's row format and whether the index keys live apart in fp8 rows, from
 * pipeline.kv_format ("f32", the default; "bf16"; "fp8_ds_mla") and pipeline.index_format
 * ("kv", the default; "fp8"; the only one and the default of fp8_ds_mla rows) for model m
 * (fp8_ds_mla rows are DeepSeek-V3.2's: kv_lora_rank 512, rope_dim 64). NULL: not given.
 * SC_EINVAL + message for a combination the cache cannot hold. */
int sc_pipeline_kv_formats(const char *kv_format, const char *index_format,
                           const sc_model_config *m, sc_kfmt *kv, bool *index_fp8, sc_diag *d);

/* Whether steps are planned ahead (sc_overlap): not profiled; on CUDA or forced on; several
 * ranks only with host collectives. */
bool sc_pipeline_overlaps(const sc_pipeline_config *c);
#endif

/* coll.h - the collective API every backend implements, and the plan-checked session
 * through which executors reach it.
 *
 * Backends (in-memory threads for the test harness, host over ZeroMQ between node
 * processes, NCCL on GPUs) implement sc_coll_ops. Nothing calls a backend directly except
 * sc_coll_session_run(): it compares each request with the next entry of the step's
 * collective plan and refuses a mismatch *before* anything is launched (DESIGN.md §4).
 *
 * Semantics, for a group of G ranks with this rank at index r (sc_comm.group_rank):
 *   all_gather:     send holds rows*width elements; recv receives G*rows*width,
 *                   rank-major (rank k's block at offset k*rows*width).
 *   all_reduce:     sum over the group of rows*width elements; recv may equal send.
 *   reduce_scatter: send holds rows*width elements viewed as G equal contiguous blocks;
 *                   recv receives the element-wise sum of block r over the group
 *                   (rows*width/G elements). rows*width must be divisible by G.
 * Reductions exist for f32 and bf16; W32 words are only gathered.
 *
 * Threads: a comm and its sessions belong to one thread (the rank's executor or the
 * harness thread of that rank), except abort, and the NCCL watch (backend_nccl.h).
 */
#ifndef SC_COLL_H
#define SC_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "plan/coll_types.h"
#include "plan/plan.h"

typedef struct sc_coll_ops {
  /* Runs one collective `op` (semantics above) over group g. One entry point, not one
   * per op: every backend shares its set-up, deadline and bookkeeping across the ops.
   * Returns 0 or a negative SC_E* code (SC_ETIMEDOUT past the deadline, SC_EABORTED
   * when the group was aborted). `count` is in elements of send. A stream-ordered
   * backend (NCCL, which has `finish`) only queues the collective at its place among the
   * device work and returns; failures on the device are reported by `finish`. d (may be
   * NULL) receives a sentence on failure, naming the peer when one is to blame (a block
   * of the wrong size, a block that never came). seq is the entry's position in the
   * step's plan: a backend whose failures surface later (finish) names the collective
   * by it. */
  int (*run)(void *self, int32_t seq, sc_coll_op op, sc_group g, sc_dtype dt,
             const void *send, void *recv, size_t count, sc_diag *d);
  /* Aborts the collectives of step `epoch` (the epoch of reset), 0: of every step from
   * now on: wakes a collective of that step blocked on this comm with SC_EABORTED, and
   * later calls of that step fail the same way. An abort for a step before the current
   * epoch is ignored: it was sent while its step ran and may come after the next one
   * started (it used to fail that healthy step). May be called from another thread.
   * May be NULL. */
  void (*abort)(void *self, uint64_t epoch);
  /* Starts a new step (epoch, increasing): clears an earlier abort and forgets anything
   * left over from a failed step. Called by the executor's thread between steps, when no
   * collective is running, or, on a backend whose steps overlap (`overlaps`), while the
   * device may still run the step before's. May be NULL (nothing to reset). */
  void (*reset)(void *self, uint64_t epoch);
  /* Stream-ordered backends only (NULL elsewhere: run has finished each collective when
   * it returns, and the session counts its wall time). Called once the device work
   * queued after the collectives of step `epoch` has completed: returns 0 and the device
   * seconds of its collectives 0..n-1, or the first failure on the device with *failed
   * the index of the collective concerned (a failure in a later step, queued already
   * when steps overlap, is that step's: this one returns 0). */
  int (*finish)(void *self, uint64_t epoch, double *seconds, int32_t n, int32_t *failed);
  /* The collective plan of step `epoch` (num entries, borrowed for the call only), told
   * by sc_coll_session_begin before the step's first collective: a backend that receives
   * blocks from its peers sizes and admits them by it (backend_host.h). The executor
   * resets the comm for the step first (sc_step_gate_enter, then the forward pass begins
   * the session); a backend also accepts the plan of a step it has not been reset to
   * yet, for the reset that follows. May be NULL (nothing to learn). */
  void (*expect)(void *self, uint64_t epoch, const sc_coll *plan, int32_t num);
  /* Optional pair (both NULL where not offered): the decode attention's LSE merge
   * (SPEC.md §7) in one exchange where the plan has two, the LSE's all_gather and the
   * partial outputs' all_reduce or reduce_scatter (`op`) over group g. lse_fits says
   * whether it is offered for n_rows rows of `width` f32 (a pure function of the shapes
   * and the comm's set-up, so every member of g answers alike and runs the same
   * exchanges). lse_reduce then does what the gather of lse (n_rows f32 a member), the
   * kernels' lse_scale of part and the reduction of the scaled parts give, bit for bit:
   * recv gets, per row i (for reduce_scatter only this member's rows of n_rows / G),
   * Σ_m w_m(i) * part_m[i] over members 0..G-1 in order, each product rounded before its
   * add, w the weights of kernels/lse_math.h; part is not changed. seq is the gather's
   * plan position (its device time counts both; the reduction's counts none). */
  bool (*lse_fits)(void *self, sc_group g, sc_coll_op op, size_t n_rows, size_t width);
  int (*lse_reduce)(void *self, int32_t seq, sc_coll_op op, sc_group g, const float *lse,
                    const float *part, float *recv, size_t n_rows, size_t width, sc_diag *d);
  /* Whether a step's collectives may be recorded with its kernels (a CUDA graph) and
   * replayed: run only queues device work on the compute stream, which reads nothing
   * the host writes between replays and needs no host call to complete (backend_ipc.h).
   * A replayed step's collectives are checked against its plan before the replay is
   * launched (sc_coll_session_replay), as run checks each one. */
  bool recordable;
  /* Stream-ordered, and steps may overlap (docs/pipeline.md, "Overlapped steps"): the
   * next step's reset, plan and collectives may be queued before this one's finish
   * (which names its step). The IPC backend's; NCCL's counts a step's collectives from
   * its reset, so its steps run one at a time. (A backend without finish completes
   * each collective in run: its steps overlap anyway.) */
  bool overlaps;
} sc_coll_ops;

/* Per-purpose totals the session keeps (for logs and benchmarks). bus_bytes follows the
 * usual bus-bandwidth convention: an all_gather of S bytes per rank over G ranks moves
 * (G-1)*S, a reduce_scatter of S bytes (G-1)/G*S, an all_reduce 2(G-1)/G*S. */
typedef struct sc_coll_stat {
  uint64_t calls;
  double bus_bytes;
  double seconds;
} sc_coll_stat;

/* What the comm remembers about its last failed collective, for the step_abort report. */
typedef struct sc_coll_failure {
  uint64_t step;
  int code;         /* 0: no failure recorded */
  int32_t seq;      /* plan position */
  sc_coll expected; /* SC_EDESYNC: the planned entry (zeros if the plan had ended) */
  sc_coll actual;   /*             and what was requested */
} sc_coll_failure;

typedef struct sc_comm {
  const sc_coll_ops *ops;
  void *self;                          /* backend state */
  sc_rank_coords coords;
  int32_t group_size[SC_GROUP_COUNT];  /* tp = T, pcp = P, dcp = N */
  int32_t group_rank[SC_GROUP_COUNT];
  /* Fault injection (`--inject desync:RANK:STEP`): in the session of this step, the
   * first request is asked with one row too many, as a buggy executor would; the plan
   * check must refuse it before anything is launched. 0: off. */
  uint64_t inject_desync_step;
  sc_coll_failure last_failure; /* written by the session on failure (the one record) */
  sc_coll_stat stats[SC_PURPOSE_COUNT];
  /* Which comm this is: sc_comm_init_groups gives every comm built in the process a new
   * number (a recorded step's collectives hold the addresses of the comm they were
   * recorded with: model/forward.c keys its recordings by it). */
  uint64_t instance;
} sc_comm;

/* Fills sizes and ranks of the three groups of global rank g (SPEC.md §1), and a new
 * instance number. */
void sc_comm_init_groups(sc_comm *comm, const sc_plan_config *cfg, int32_t global_rank);

/* Global ranks of the members of `group` containing global rank g, in group-rank order
 * (SPEC.md §1); writes group_size(group) entries into out and returns that count. */
int32_t sc_comm_group_members(const sc_plan_config *cfg, int32_t g, sc_group group,
                              int32_t *out);

/* One step's walk through the collective plan. The plan entries are borrowed for the
 * session's lifetime. sc_coll_session_begin tells the backend the plan (expect). */
typedef struct sc_coll_session {
  sc_comm *comm;
  const sc_coll *plan;
  int32_t num;
  int32_t next;    /* index of the next planned entry */
  uint64_t step;
  int failed;      /* first error of the session (sticky), 0 if none */
  sc_diag diag;    /* its message */
  bool inject_desync;  /* see sc_comm.inject_desync_step */
} sc_coll_session;

void sc_coll_session_begin(sc_coll_session *s, sc_comm *comm, const sc_coll *plan,
                           int32_t num, uint64_t step);

/* Checks `req` (layer, group, op, dtype, purpose, rows, width; seq and chunk ignored)
 * against the next planned entry. On a match launches it on the backend and advances;
 * on a mismatch launches nothing and returns SC_EDESYNC with a message naming rank,
 * step, sequence number, expected and actual shapes. After any failure every later call
 * fails with the same code (the step is dead). */
int sc_coll_session_run(sc_coll_session *s, const sc_coll *req, const void *send,
                        void *recv);

/* Whether the next two planned entries are the decode attention's LSE gather and the
 * reduction of its partial outputs (SPEC.md §7: an all_gather of rows x heads f32 a
 * member, then an all_reduce or reduce_scatter of rows x heads * dc) and the backend
 * merges them in one exchange (sc_coll_ops.lse_fits). Decided from the plan alone, so
 * every member of the group decides alike whatever it asks. */
bool sc_coll_session_lse_fused(const sc_coll_session *s);

/* The pair in one exchange (where sc_coll_session_lse_fused): checks `gather` and then
 * `reduce` against the next two planned entries, as sc_coll_session_run would one by
 * one (a mismatch of either is refused, naming its position, before anything is
 * launched), and runs sc_coll_ops.lse_reduce: recv gets what the gather of lse, the
 * kernels' lse_scale of part and the planned reduction of the scaled parts into recv
 * give; part is left as it was (recv may be part). SC_EINVAL, nothing checked, where
 * not fused. */
int sc_coll_session_run_lse(sc_coll_session *s, const sc_coll *gather, const sc_coll *reduce,
                            const float *lse, const float *part, float *recv);

/* A recorded step about to be replayed (sc_coll_ops.recordable): checks the n
 * collectives the recording queued, in order, against the next planned entries as
 * sc_coll_session_run does (the same refusal and message on a mismatch) and counts
 * them as run, launching nothing: the replay queues them. Call it before the replay,
 * so that a desync is refused before a byte moves. */
int sc_coll_session_replay(sc_coll_session *s, const sc_coll *reqs, int32_t n);

/* Checks that every planned entry was run; SC_EDESYNC otherwise. */
int sc_coll_session_end(sc_coll_session *s);

/* After the step's device work has completed: collects what a stream-ordered backend
 * reports (the first failure on the device, named like a failed run, and each
 * collective's device time into the per-purpose stats). 0 at once for other backends,
 * or the session's earlier failure. */
int sc_coll_session_finish(sc_coll_session *s);

/* "all_gather dcp f32 rows=13 width=640 (context_kv, layer 0)" */
void sc_coll_describe(const sc_coll *c, char *buf, size_t len);

#endif

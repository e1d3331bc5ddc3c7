/* backend_mem.h - an in-memory collective backend for ranks running as threads of one
 * process (the threaded test harness of issue 5).
 *
 * A world holds one rendezvous per group instance (SPEC.md §1: P TP groups, T PCP
 * groups, and the DCP groups). A collective is a two-phase barrier: every member
 * publishes its send pointer; once all have arrived, each member reads the others' send
 * buffers directly (no staging copy) and writes its own recv; a second barrier keeps
 * every send buffer alive until all readers are done. Reductions sum f32 in group-rank
 * order 0..G-1 on every member, so all members get bit-identical results (bf16 sums in
 * f32 and rounds once, to nearest even).
 *
 * Deadlines and abort: only the arrival wait can block indefinitely (the reading phase
 * involves no waiting on other work), so the deadline applies there. A member whose
 * deadline passes gets SC_ETIMEDOUT and poisons the whole world: every member blocked in
 * any collective, and every later call, gets SC_EABORTED, so a step fails on all ranks
 * instead of hanging. sc_mem_world_abort() does the same from any thread.
 * sc_mem_world_reset() clears the poison for the next step once no rank is inside a
 * collective.
 *
 * Buffers: all_gather recv must not overlap send, except that send may sit exactly at
 * recv + group_rank*count (in place, as in NCCL). all_reduce/reduce_scatter may use
 * recv == send. Members must agree on op, dtype and count; a disagreement fails the
 * collective on every member with SC_EDESYNC (the plan-checked session normally refuses
 * it earlier).
 *
 * Ownership and threads: the world owns its rendezvous state and outlives every comm
 * made from it. Each comm (sc_mem_comm_create) is used by one thread, its rank's. abort
 * and the world's destroy/reset are called by the harness thread.
 */
#ifndef SC_BACKEND_MEM_H
#define SC_BACKEND_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/coll.h"

typedef struct sc_mem_world sc_mem_world;

/* Creates the world for the parallel layout of cfg (pcp, dcp, tp; cfg must be valid). */
int sc_mem_world_create(const sc_plan_config *cfg, sc_mem_world **out);
void sc_mem_world_destroy(sc_mem_world *w);

/* Fills comm for global rank g: groups, ranks, the backend vtable and the deadline
 * (milliseconds per collective; <= 0: none). */
int sc_mem_comm_create(sc_comm *comm, sc_mem_world *w, int32_t global_rank,
                       int64_t deadline_ms);

/* Queues the collectives of comm where its rank's kernel work is queued instead of
 * running them at once: queue(ctx, fn, args, size) runs fn on a copy of args at its place
 * among that work, or now, returning fn's result (kernels_recorder.h's
 * sc_kernels_recorder_call: recorded steps, whose replays then run the collectives in
 * order with the ops). The comm then says it is recordable (coll.h), so that the
 * forward's recorded steps with collectives run in the CPU tests (model/harness.h). */
typedef int (*sc_mem_queue_fn)(void *ctx, int (*fn)(const void *args), const void *args,
                               size_t size);
void sc_mem_comm_queue_through(sc_comm *comm, sc_mem_queue_fn queue, void *ctx);

/* Poisons the world: blocked and later collectives fail with SC_EABORTED. Any thread. */
void sc_mem_world_abort(sc_mem_world *w);

/* Clears the poison. Only when no rank is inside a collective. */
void sc_mem_world_reset(sc_mem_world *w);

#endif

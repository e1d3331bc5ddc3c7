/* backend_ipc.h - collectives between ranks that share one GPU, done on the device.
 *
 * Why. Ranks sharing a GPU (MPS) cannot use NCCL (one rank a device), so today they take
 * the host backend staged through host memory: each collective a read-back, a host sync,
 * a ZeroMQ exchange and an upload, ~0.1-0.18 ms each and seven a default-model decode
 * step, which keeps four ranks at 4.2-4.4x one rank's TPOT (issue 20's goal: 2x;
 * bench/gpu-step.md, "Several ranks overlapped"). Here a collective is two kernels on the
 * rank's compute stream that exchange blocks through one device region the group shares
 * (CUDA IPC), so a step needs no host round trip and can be one CUDA graph again.
 *
 * The region. Member 0 of a group instance allocates it (sc_ipc_region_create) and its
 * handle travels to the other members where NCCL's unique id does (the comm actor's id
 * exchange: sc_ipc_id has the same 128 bytes); every member maps it. Layout: a header of
 * per-member words, then two slots (by collective parity) of `members` blocks of
 * block_bytes each. The header, per member m:
 *   written[m]  the sequence number of the last block m wrote into its slot (release);
 *   read[m]     the last sequence number whose blocks m has finished reading;
 *   arrive[p][m] m's own count of its blocks done with phase p (the last one publishes).
 * Round s (1, 2, ..; a collective is as many rounds as its bytes need blocks, and every
 * member runs the same sequence, because every member runs the same plan; the counter
 * lives on the device, so a graph replays it):
 *   put:     wait until every read[m] >= s - 2 (slot s & 1 is free: its last use, s - 2,
 *            is read everywhere), copy send into slot[s & 1][me], the last block
 *            publishes written[me] = s;
 *   combine: wait until every written[m] >= s, gather or sum the members' blocks in
 *            member order 0..G-1 (so every member gets bit-identical sums: coll_reduce.h's
 *            rule, bf16 widened, summed in f32 and rounded once), the last block
 *            publishes read[me] = s and advances the counter.
 * Waits spin (one thread a block) against a deadline (%globaltimer) and a host-mapped
 * abort word; a timeout or an abort raises the rank's device status, records the code
 * and the collective's plan position in a host-mapped record (so `finish` reads it
 * without a copy), and every later round of the comm returns at once (dead, as an
 * aborted NCCL communicator). Kernels of several processes run at once only under MPS:
 * without it a waiting kernel holds the GPU until its context's time slice ends.
 *
 * The decode attention's LSE merge (sc_coll_ops.lse_reduce, coll.h) is one round where
 * the plan has two: put copies the member's LSE and, from sc_ipc_lse_part_at, its
 * partial outputs into its block; combine weighs each row by the members' LSE
 * (kernels/lse_math.h) and sums the weighted parts in member order, each product rounded
 * before its add, so its bits are those of the LSE's gather, lse_scale and the reduction.
 * Offered where both fit one block (lse_fits) and member 0 created the region under
 * SPARSECP_IPC_LSE_ROUND=1 (its id says so: members that disagreed would pair rounds of
 * different kinds). Off by default: not run on a GPU yet (session 58 got no device).
 *
 * Recordable (sc_coll_ops.recordable): a round reads its sequence number from the
 * device and nothing from the host but the abort word, so a step's collectives may be
 * captured into its CUDA graph with its kernels (model/forward.c checks a replay's
 * collectives against the plan first). Device times come from events around each
 * collective, except while captured (a replayed step's collectives have none).
 *
 * Regions outlive their comms: a member that created one keeps it after a rebuild until
 * its rank ends (actors/rank_ctx.c), since a peer may still map it.
 *
 * Overlapped steps (sc_coll_ops.overlaps; docs/pipeline.md): the next step's rounds may
 * be queued before this one's finish. Events are kept per step parity; a failure record
 * holds the device's count of steps with collectives (a kernel before each step's first
 * collective adds one), which `expect` maps to the host's step, so that finish reports
 * a failure with the step it happened in.
 *
 * Status: wired in as `"collectives": "ipc"` / `--collectives ipc` (every rank on one
 * GPU), the comm actor's id exchange and rebuild as for NCCL (actors/rank_ctx.h). Run on
 * one H200 on 2026-12-05 (bench/gpu-step.md): tests/gpu/test_gpu_ipc.c with and without
 * MPS, `run --verify` at P2 N2 and P4 N4 (identical to one rank), the desync, devfault
 * and kill injections (ending as with NCCL); four ranks decode at 2.2x one rank's TPOT
 * (1.70-2.46x over thirteen rounds on one H100 with the words at GPU scope, 2026-12-06).
 * Not run over it yet: a rank's recovery (rejoin and rebuild). */
#ifndef SC_BACKEND_IPC_H
#define SC_BACKEND_IPC_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/coll.h"

#define SC_IPC_ID_BYTES 128
#define SC_IPC_MEMBERS_MAX 16

/* A region's cudaIpcMemHandle_t and its geometry, as plain bytes for the control plane. */
typedef struct sc_ipc_id {
  unsigned char bytes[SC_IPC_ID_BYTES];
} sc_ipc_id;

/* Member 0 of a group: allocates the group's region on the current device for `members`
 * ranks exchanging blocks of up to block_bytes, and fills *id. *owned is freed by
 * sc_ipc_region_destroy once every member has unmapped it (the owner must outlive the
 * mappings: freeing an exported region first is undefined). */
int sc_ipc_region_create(int32_t members, size_t block_bytes, sc_ipc_id *id, void **owned);
void sc_ipc_region_destroy(void *owned);

/* A region's note: up to SC_IPC_NOTE_BYTES that member 0 writes into its region before
 * the region's id leaves (sc_ipc_region_note_write, after sc_ipc_region_create) and every
 * member reads once it mapped the region (sc_ipc_comm_note_read; member 0 reads its own).
 * Zeros where nothing was written. What travels in it is the writer's (actors/rank_ctx.c:
 * the handle of the weights that the group's ranks share). */
#define SC_IPC_NOTE_BYTES 128
int sc_ipc_region_note_write(void *owned, const void *note, size_t n);
int sc_ipc_comm_note_read(const sc_comm *comm, int group, void *note, size_t n);

/* Creates the comm of global rank g: maps each group's region (ids[group]; DCP shares
 * PCP's when P > 1, as with NCCL), or takes owned[group] where this rank created it (a
 * process cannot open its own handle), on compute_stream (a cudaStream_t). deadline_ms
 * bounds every wait (<= 0: none). Fills comm (groups, ranks, vtable). */
int sc_ipc_comm_create(sc_comm *comm, const sc_plan_config *cfg, int32_t global_rank,
                       const sc_ipc_id ids[SC_GROUP_COUNT], void *const owned[SC_GROUP_COUNT],
                       void *compute_stream, int64_t deadline_ms);
void sc_ipc_comm_destroy(sc_comm *comm);

/* Aborts the comm's collectives from any thread: the waits on the device return and the
 * comm is dead. */
void sc_ipc_abort(sc_comm *comm);

#endif

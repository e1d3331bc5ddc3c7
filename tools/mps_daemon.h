/* mps_daemon.h - a private CUDA MPS control daemon for the ranks of a local cluster that
 * share a GPU.
 *
 * Why. Ranks on one GPU are separate processes, each with its own CUDA context, and they
 * meet at every collective. Without MPS the GPU time-slices among the contexts, so at
 * every meeting a rank's queued kernels wait for the others' slices. On one H200
 * (bench/gpu-step.md, "Ranks sharing a GPU"), tests/gpu/ctx_share.cu's lock step costs
 * 17 us a round in one process and 561 us in four; under an MPS server, where the four
 * share one context, 21 us. Four ranks of the default model: 6.35 ms a decode step
 * without MPS, 1.62 ms with it.
 *
 * The daemon runs in the foreground as our child (`nvidia-cuda-mps-control -f`), its
 * pipe and log folders inside the cluster's private folder. Only the processes given
 * CUDA_MPS_PIPE_DIRECTORY (this cluster's nodes) find it, and it goes with the cluster:
 * stop sends it `quit`, and PR_SET_PDEATHSIG ends it when we die without stopping (the
 * signal comes when the thread that started it ends: start it from the main thread).
 *
 * Start also starts the MPS server for our user and checks that it is listed. A host
 * where MPS cannot work (say a container without the rights the server needs) is then
 * found before any node starts, rather than as a CUDA error in each node.
 *
 * Ownership: the caller owns the sc_mps and its child process. Threads: one thread. The
 * caller reaps only its own children by pid (waitpid(-1) would take the daemon's end).
 */
#ifndef SC_MPS_DAEMON_H
#define SC_MPS_DAEMON_H

#include <stdbool.h>

#include "base/error.h"

typedef struct sc_mps sc_mps;

/* Starts a daemon whose folders are dir/mps and dir/mps-log (dir: an existing private
 * folder, absolute), and its server. Errors (why in d): SC_ENOENT, no
 * nvidia-cuda-mps-control on PATH; SC_EINVAL, dir too long for the daemon's socket
 * paths; SC_EIO, the daemon or its server did not start (its log's last line, when it
 * wrote one); SC_ESYS, SC_ENOMEM. */
int sc_mps_start(const char *dir, sc_mps **out, sc_diag *d);

/* The folder to give the nodes as CUDA_MPS_PIPE_DIRECTORY (and the log folder, for
 * CUDA_MPS_LOG_DIRECTORY). */
const char *sc_mps_pipe_dir(const sc_mps *m);
const char *sc_mps_log_dir(const sc_mps *m);

/* Whether the daemon still runs: false once it has ended (then reaped, with why in d:
 * "exited with status S" or "was killed by signal S"). A daemon that ended serves no new
 * node: those run without MPS. */
bool sc_mps_alive(sc_mps *m, sc_diag *d);

/* Whether a daemon answers at pipe_dir (one the environment names): 0 when the control
 * program, run as its client, says which servers it runs; SC_EIO when it fails (no daemon
 * listens there: a socket left behind), SC_ENOENT when there is no control program to
 * ask, SC_EINVAL, SC_ENOMEM. */
int sc_mps_probe(const char *pipe_dir);

/* Asks the daemon to quit (it stops its server), waits up to 3 s, then kills it; reaps
 * it and frees m. Call it after the nodes ended. NULL is a no-op. */
void sc_mps_stop(sc_mps *m);

#endif

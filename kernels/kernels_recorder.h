/* kernels_recorder.h - recordings (kernels.h record_begin) for a backend that has none,
 * by keeping the calls: while recording, every op's arguments are kept instead of the
 * op running; a replay calls the inner backend's ops with them again, in order.
 *
 * What it is for: the forward pass's recorded steps (model/forward.c, step_recorded) on
 * the CPU, so that the code that decides what to record, when a recording is stale and
 * what a replay may rely on runs in the CPU test suite and not only on a GPU (where the
 * CUDA backend records real graphs). A replay here costs what running the ops costs: it
 * is never faster, so nothing but tests uses it.
 *
 * Contract as kernels.h states it: while recording, host copies, sync, notify, alloc and
 * free are refused with SC_EAGAIN and fail the recording (so are, beyond kernels.h's
 * list, fault injection and the reads of marks and busy times: they act on the device's
 * state at call time); nothing runs until a replay. Arguments are not checked until the
 * replay runs the op (the CUDA backend checks them as it records). A recording holds pointers and scalars only (the buffers' contents
 * are read when the replay runs). The inner backend's scratch is its own business: ops
 * run afresh at each replay, so recordings go stale only when a test says so
 * (sc_kernels_recorder_invalidate).
 *
 * Ownership: the wrapper owns the inner context (destroyed with it). One thread, as the
 * inner context. */
#ifndef SC_KERNELS_RECORDER_H
#define SC_KERNELS_RECORDER_H

#include <stddef.h>

#include "kernels/kernels.h"

/* Wraps inner (which must have no recordings of its own) into *out. On failure inner
 * is left to the caller. */
int sc_kernels_recorder_wrap(sc_kernels *inner, sc_kernels **out);

/* A host call kept in order with the ops, as a backend that queues work on the stream
 * would queue it (collectives/backend_mem.h queues its collectives here when its ranks
 * record: their replays then run them at their place among the ops): while recording,
 * a copy of the `size` bytes at args is kept and fn runs on it at that place in every
 * replay (a failure fails the replay); otherwise fn(args) runs now and its result is
 * returned. SC_EINVAL when k is not a recorder. */
int sc_kernels_recorder_call(sc_kernels *k, int (*fn)(const void *args), const void *args,
                             size_t size);

/* Makes every recording made so far stale, as the CUDA backend's are once its scratch
 * moves: their replay answers SC_EAGAIN without running anything (so that a test can
 * take its caller through that path). SC_EINVAL when k is not a recorder. */
int sc_kernels_recorder_invalidate(sc_kernels *k);

#endif

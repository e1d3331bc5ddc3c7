/* backend_staged.h - collectives on device buffers through a host-memory backend
 * (DESIGN.md §8: several ranks sharing one GPU cannot use NCCL, which refuses two ranks on
 * one device, so they use the host backend with their device buffers staged through host
 * memory).
 *
 * sc_staged_comm_create() turns a comm whose backend works on host memory into one that
 * accepts kernel-context buffers: each collective copies its send buffer to host scratch
 * (k->ops->copy, which returns once the host holds the data, i.e. after the compute
 * queued before it), runs the inner backend there, and copies the result back. abort and
 * reset go straight to the inner backend.
 *
 * The wrap is in place (the sc_comm keeps its address, so anything holding a pointer to
 * it, like a forward pass, sees the staged backend); sc_staged_comm_destroy() restores
 * the inner backend, which must then be destroyed by its owner.
 *
 * Ownership: the wrapper owns its scratch and borrows the kernel context. Threads: as
 * the inner backend (the rank's executor thread; abort from any thread).
 */
#ifndef SC_BACKEND_STAGED_H
#define SC_BACKEND_STAGED_H

#include "collectives/coll.h"
#include "kernels/kernels.h"

int sc_staged_comm_create(sc_comm *comm, sc_kernels *k, sc_diag *d);
void sc_staged_comm_destroy(sc_comm *comm);

#endif

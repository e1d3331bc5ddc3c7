/* gpu_spin.h - test helper: a kernel that keeps a stream busy, so that a collective
 * queued behind it cannot finish before its deadline. */
#ifndef SC_GPU_SPIN_H
#define SC_GPU_SPIN_H

#ifdef __cplusplus
extern "C" {
#endif

/* Queues one single-thread kernel on `stream` (a cudaStream_t) that spins for about
 * `ms` milliseconds of GPU time (globaltimer). 0 or a negative SC_E* code. */
int sc_test_gpu_spin(void *stream, int ms);

#ifdef __cplusplus
}
#endif

#endif

/* hostdev.h - SC_HOSTDEV marks a small pure inline function that both the host code
 * and the CUDA kernels call (bf16 conversion, DCP ownership, the LSE merge rule), so the
 * rule is written once: under nvcc it is __host__ __device__, elsewhere plain static
 * inline. Such functions may use only what device code has (no libc beyond memcpy and
 * math.h). */
#ifndef SC_HOSTDEV_H
#define SC_HOSTDEV_H

#ifdef __CUDACC__
#define SC_HOSTDEV __host__ __device__ static inline
#else
#define SC_HOSTDEV static inline
#endif

#endif

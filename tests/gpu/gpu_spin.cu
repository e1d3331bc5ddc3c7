/* gpu_spin.cu - see gpu_spin.h. */
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "base/error.h"
#include "tests/gpu/gpu_spin.h"

__global__ void k_spin(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

extern "C" int sc_test_gpu_spin(void *stream, int ms) {
  k_spin<<<1, 1, 0, (cudaStream_t)stream>>>((uint64_t)ms * 1000000ull);
  return cudaGetLastError() == cudaSuccess ? 0 : SC_ESYS;
}

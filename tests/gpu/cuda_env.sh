# cuda_env.sh - sourced by the scripts that run on the GPU machine: puts the carried
# libraries (DIR, the first argument) and the machine's cuBLAS on LD_LIBRARY_PATH. cuBLAS
# (over 500 MB) is not carried; the machine has it under its CUDA toolkit or inside
# PyTorch's install.
sc_cublas_dir=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib \
  /opt/torch/.venv/lib/python3*/site-packages/nvidia/cublas/lib 2>/dev/null |
  while read -r d; do [ -e "$d/libcublas.so.13" ] && echo "$d"; done | head -1 || true)
# (|| true: callers may run under set -e and pipefail, and ls fails on the folders missing)
if [ -z "$sc_cublas_dir" ]; then
  sc_cublas_dir=$(dirname "$(find / -name 'libcublas.so.13' 2>/dev/null | head -1 || true)")
fi
export LD_LIBRARY_PATH=$1:$sc_cublas_dir
echo "cublas from: $sc_cublas_dir"

#!/bin/bash
# build.sh - session 38 (2026-12-06), issue 18: what the bytes cost the few-heads
# attention (model-long's 8 heads over bf16 rows; ~34 of a 32k prompt's 77.6 ms TTFT on
# one H100): the same kernel loading only each row's first 41 of 72 16-byte parts (656
# bytes, an fp8_ds_mla row's size: "p41") and none ("p0": the compute alone, over
# whatever shared memory holds). Wrong results by design: timing only. ~4 minutes.
export VARIANTS_DIR=bench/results/few-bytes-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" ""
build_variant p41 "fewbytes" "-DFEW_LOAD_PARTS=41"
build_variant p0 "fewbytes" "-DFEW_LOAD_PARTS=0"
stage_devrun main p41 p0
rm -f .devrun/{p41,p0}/test_gpu_kernels.xz

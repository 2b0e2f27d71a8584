// The attention-backward harness (attention_bwd.cu) on the sm_90a kernels of cuda/fa2/flash_bwd_sm90.cuh,
// e.g. PROBE_ARGS="4 4096 32 8 128 0" bash tools/probe/probe.sh attention_bwd_sm90 cuda/fa2/flash_bwd_sm90.cuh base
#define PROBE_BWD_SM90 1
#include "attention_bwd.cu"

# The default cases of tools/ncu_issue.sh and tools/ncu_clock.sh (sourced): the long-row kernels of
# issue 3, "name kernel_regex op kind RxH" each (tools/profile_one.py runs op / kind / shape).
NCU_DEFAULT_CASES=(
  "lnf4k fwd_reg layer_norm fwd 32768x4096" "lnf65k fwd_reg layer_norm fwd 2048x65536"
  "rmsf65k fwd_reg rms_norm fwd 2048x65536" "lnb65k bwd_cluster layer_norm bwd 2048x65536"
  "rmsb65k bwd_cluster rms_norm bwd 2048x65536" "lnb8k bwd_reg layer_norm bwd 8192x8192"
  "lnb16k bwd_reg layer_norm bwd 4096x16384" "lnb128 bwd_reg layer_norm bwd 262144x128"
  "smf256k rows_reg softmax fwd 512x262144" "smb256k rows_reg softmax bwd 512x262144"
  "smf64 rows_warp softmax fwd 1048576x64"
)

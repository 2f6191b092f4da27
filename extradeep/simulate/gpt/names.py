"""Names as real GPT trainings write them: kernels, NCCL kernels and calls, framework markers, process groups.

Kernel names follow cuBLAS/Apex/PyTorch kernels of a Megatron-LM run on Ampere (bf16 GEMMs
`ampere_bf16_s16816gemm_*` with tn / nn / nt layouts for forward, data gradient and weight gradient,
Megatron's fused softmax, Apex layer norm and fused Adam). NCCL kernels are named as NCCL 2.19+
names them (`ncclDevKernel_AllReduce_Sum_bf16_RING_LL`, `ncclDevKernel_SendRecv`). Framework markers:
Megatron-LM's `nvtx_decorator` names a range after the module and function (its point-to-point
calls, the interleaved schedule's warm-up / steady / cooldown); DeepSpeed's `instrument_w_nvtx`
after the function's qualified name; FSDP2's `record_function` ranges `FSDP::pre_forward (module)`.
Process-group descriptions are the ones Megatron-Core passes as `group_desc`, DeviceMesh's
`mesh_<dim>`, or `undefined` (DeepSpeed).
"""

from __future__ import annotations

GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_{}"
EW = "void at::native::vectorized_elementwise_kernel<4, {}, at::detail::Array<char *, 3>>(int, {}, at::detail::Array<char *, 3>)"

KERNELS = {
    "layernorm_fwd": (
        "cuApplyLayerNorm",
        "void cuApplyLayerNorm<c10::BFloat16, float, c10::BFloat16>(c10::BFloat16 *, float *, float *, "
        "const c10::BFloat16 *, int, int, float, const c10::BFloat16 *, const c10::BFloat16 *)",
    ),
    "layernorm_bwd": (
        "cuComputeGradInput",
        "void cuComputeGradInput<c10::BFloat16, float, c10::BFloat16>(const c10::BFloat16 *, "
        "const c10::BFloat16 *, int, int, const float *, const float *, float, const c10::BFloat16 *, "
        "c10::BFloat16 *)",
    ),
    "softmax_fwd": (
        "scaled_upper_triang_masked_softmax_warp_forward",
        "void (anonymous namespace)::scaled_upper_triang_masked_softmax_warp_forward<c10::BFloat16, "
        "c10::BFloat16, float, 11>(c10::BFloat16 *, const c10::BFloat16 *, float, int, int, int)",
    ),
    "softmax_bwd": (
        "scaled_upper_triang_masked_softmax_warp_backward",
        "void (anonymous namespace)::scaled_upper_triang_masked_softmax_warp_backward<c10::BFloat16, "
        "c10::BFloat16, float, 11>(c10::BFloat16 *, c10::BFloat16 *, const c10::BFloat16 *, float, int, int, int)",
    ),
    # Megatron's unfused fallback (forward_torch_softmax, softmax in fp32): casts, scale, causal mask fill
    "softmax_up_fwd": (
        "vectorized_elementwise_kernel",
        EW.format("at::native::direct_copy_kernel_cuda", "CopyFunctor"),
    ),
    "softmax_scale_fwd": (
        "vectorized_elementwise_kernel",
        EW.format(
            "at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>",
            "AUnaryFunctor",
        ),
    ),
    "softmax_mask_fwd": (
        "elementwise_kernel",
        "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
        "at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)"
        "::{lambda()#1}::operator()() const::{lambda(float, bool)#1}>>(int, at::native::gpu_kernel_impl_nocast)",
    ),
    "dropout_add": (
        "fused_dropout_kernel_vec",
        "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::BFloat16, float, unsigned int, "
        "1, 4, bool>(at::cuda::detail::TensorInfo<const c10::BFloat16, unsigned int>, "
        "at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, "
        "at::cuda::detail::TensorInfo<bool, unsigned int>, unsigned int, float, at::PhiloxCudaState)",
    ),
    "dropout_add_bwd": ("vectorized_elementwise_kernel", EW.format("at::native::MulFunctor<float>", "MulFunctor")),
    "gelu_fwd": ("vectorized_elementwise_kernel", EW.format("at::native::GeluCUDAKernelImpl", "GeluFunctor")),
    "gelu_bwd": ("vectorized_elementwise_kernel", EW.format("at::native::GeluBackwardCUDAKernelImpl", "GeluBwd")),
    "embedding_fwd": (
        "indexSelectLargeIndex",
        "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, "
        "-2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, "
        "at::cuda::detail::TensorInfo<const c10::BFloat16, unsigned int>, "
        "at::cuda::detail::TensorInfo<const long, unsigned int>, int, int, unsigned int, unsigned int, long)",
    ),
    "embedding_bwd": (
        "embedding_backward_feature_kernel",
        "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::BFloat16, float, long>"
        "(const long *, const c10::BFloat16 *, c10::BFloat16 *, int, long, int)",
    ),
    "softmax_ce_fwd": (
        "cunn_SoftMaxForward",
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
        "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float *, const float *, int)",
    ),
    "softmax_ce_bwd": (
        "cunn_SoftMaxBackward",
        "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, "
        "at::native::(anonymous namespace)::SoftMaxBackwardEpilogue>(float *, const float *, const float *, int)",
    ),
    "zero_grad": ("[CUDA memset]", "[CUDA memset]"),
    "grad_norm": (
        "multi_tensor_apply_kernel",
        "void multi_tensor_apply_kernel<TensorListMetadata<1>, L2NormFunctor<float>, float *, float *, "
        "bool, int>(long, int volatile *, TensorListMetadata<1>, L2NormFunctor<float>, float *, float *, bool, int)",
    ),
    "adam": (
        "multi_tensor_apply_kernel",
        "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, "
        "float, float, adamMode_t, float>(long, int volatile *, TensorListMetadata<4>, AdamFunctor<float>, "
        "float, float, float, float, float, float, adamMode_t, float)",
    ),
}
# the fallback's PyTorch softmax is cross entropy's fp32 one; its backward's casts, mask fill and
# scale run the forward's kernels again
KERNELS["softmax_torch_fwd"], KERNELS["softmax_torch_bwd"] = KERNELS["softmax_ce_fwd"], KERNELS["softmax_ce_bwd"]
for _key in ("up", "scale", "mask"):
    KERNELS[f"softmax_{_key}_bwd"] = KERNELS[f"softmax_{_key}_fwd"]
KERNELS["softmax_down_fwd"] = KERNELS["softmax_down_bwd"] = KERNELS["softmax_up_fwd"]
for _key, _layout in {
    "gemm_qkv": "tn",
    "gemm_proj": "tn",
    "gemm_fc1": "tn",
    "gemm_fc2": "tn",
    "gemm_logits": "tn",
    "bmm_qk": "tn",
    "bmm_av": "nn",
    "bmm_qk_bwd": "nt",
    "bmm_av_bwd": "nn",
}.items():
    KERNELS[_key] = (GEMM.format(_layout), GEMM.format(_layout))
for _key in ("gemm_qkv", "gemm_proj", "gemm_fc1", "gemm_fc2", "gemm_logits"):
    KERNELS[f"{_key}_dgrad"] = (GEMM.format("nn"), GEMM.format("nn"))
    KERNELS[f"{_key}_wgrad"] = (GEMM.format("nt"), GEMM.format("nt"))

NCCL_ARGS = "(ncclDevKernelArgsStorage<4096ul>)"
NCCL_KERNELS = {
    "allreduce": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
    "allreduce_f32": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "reducescatter": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL",
    "allgather": "ncclDevKernel_AllGather_RING_LL",
    "sendrecv": "ncclDevKernel_SendRecv",
}
# NCCL's own NVTX range per call, and PyTorch's record_function name for the c10d op
NCCL_CALLS = {
    "allreduce": ("ncclAllReduce", "nccl:all_reduce", "allreduce"),
    "allreduce_f32": ("ncclAllReduce", "nccl:all_reduce", "allreduce"),
    "reducescatter": ("ncclReduceScatter", "nccl:_reduce_scatter_base", "_reduce_scatter_base"),
    "allgather": ("ncclAllGather", "nccl:_all_gather_base", "_allgather_base"),
    "send": ("ncclSend", "nccl:send", "send"),
    "recv": ("ncclRecv", "nccl:recv", "recv"),
}

MEGATRON_P2P = "megatron.core.pipeline_parallel.p2p_communication.{}"
MEGATRON_INTERLEAVED = "megatron.core.pipeline_parallel.schedules.forward_backward_pipelining_with_interleaving.{}"
DEEPSPEED = {
    "forward": "DeepSpeedEngine.forward",
    "backward": "DeepSpeedEngine.backward",
    "step": "DeepSpeedEngine.step",
    "optimizer": {
        0: "FP16_Optimizer.step",
        1: "DeepSpeedZeroOptimizer.step",
        2: "DeepSpeedZeroOptimizer.step",
        3: "DeepSpeedZeroOptimizer_Stage3.step",
    },
}
FSDP_RANGES = (
    "FSDP::pre_forward ({})",
    "FSDP::post_forward ({})",
    "FSDP::pre_backward ({})",
    "FSDP::post_backward ({})",
)
TORCH_OPTIMIZER = "Optimizer.step#FusedAdam.step"

MEGATRON_GROUPS = (
    "DATA_PARALLEL_GROUP",
    "DATA_PARALLEL_GROUP_GLOO",
    "CONTEXT_PARALLEL_GROUP",
    "MODEL_PARALLEL_GROUP",
    "TENSOR_MODEL_PARALLEL_GROUP",
    "PIPELINE_MODEL_PARALLEL_GROUP",
    "EMBEDDING_GROUP",
    "TENSOR_AND_DATA_PARALLEL_GROUP",
)

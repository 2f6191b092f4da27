"""The simulated workload: GPU operations with their ground-truth per-step time as PMNF terms.

A ResNet-50-like data-parallel training step. Every operation's per-step time (all its instances
in one training step) is a sum of PMNF terms in the roles `ranks` and `batch` (batch per rank,
reference 64); other named parameters scale compute kernels linearly. Growth classes are chosen
so that modeling is interesting: most compute is constant in the number of ranks, a few kernels
grow like log p, p^0.5 and p, and the gradient all-reduce like p log p.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, replace

BATCH_REF = 64
SAMPLE_BYTES = 12288  # one 32x32x3 float32 image
PARAM_BYTES = 94_000_000  # ResNet-50 gradients (23.5 M float32)
HTOD_BANDWIDTH = 12e9
DTOH_BYTES = 4  # the loss scalar copied back by .item()

# (role -> (i, j)) exponents of one term; a role is "ranks" or "batch".
Term = tuple[float, dict]


@dataclass(frozen=True)
class OpSpec:
    """One GPU operation of the step program and its ground truth."""

    name: str  # region name as the reader reports it (kernel short name, memcpy/memset label)
    demangled: str
    kind: str  # kernel | memcpy | memset
    category: str  # computation | communication | memory
    block: str  # data | zero_grad | forward | backward | bucket | optimizer | between | warmup
    visits: int  # instances per step
    terms: tuple  # per-step time, PMNF terms with role exponents, at batch BATCH_REF
    batch_scaled: bool = True  # compute time proportional to batch per rank
    bandwidth_terms: tuple = ()  # indexes of terms that scale with 1/bandwidth (NCCL)
    library: tuple | None = None  # ("cudnn"|"cublas", API name) wrapping the launch
    copy_kind: int = 0  # memcpy: 1 HtoD, 2 DtoH
    bytes_terms: tuple = ()  # per-step bytes as PMNF terms (memcpy/memset)
    grid: tuple = (128, 1, 1, 256, 1, 1)
    registers: int = 64
    scale: float = 1.0  # what-if factor applied by kernel_scale (reported in truth.json)


def _k(name, demangled, block, visits, coef, exps=None, library=None, grid=(128, 1, 1, 256, 1, 1), floor=0.0):
    terms = ((coef, exps or {}),) + (((floor, {}),) if floor else ())
    return OpSpec(name, demangled, "kernel", "computation", block, visits, terms, library=library, grid=grid)


def _nccl(name, block, visits, latency, coef, exps, nbytes):
    """A collective: per-step time = visits x latency + bandwidth term; nbytes per step (payload)."""
    return OpSpec(
        name,
        f"{name}(ncclDevComm *, unsigned long, ncclWork *)",
        "kernel",
        "communication",
        block,
        visits,
        ((latency * visits, {}), (coef, exps)),
        batch_scaled=False,
        bandwidth_terms=(1,),
        bytes_terms=((nbytes, {}),),
        grid=(2, 1, 1, 544, 1, 1),
        registers=96,
    )


CONV_FWD = ("cudnn", "cudnnConvolutionForward")
CONV_BWD_D = ("cudnn", "cudnnConvolutionBackwardData")
CONV_BWD_W = ("cudnn", "cudnnConvolutionBackwardFilter")
BN_FWD = ("cudnn", "cudnnBatchNormalizationForwardTraining")
BN_BWD = ("cudnn", "cudnnBatchNormalizationBackward")
SGEMM = ("cublas", "cublasSgemm_v2")
XMMA = "sm80_xmma_{}_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_kernel"
EW = "void at::native::{}<4, at::native::{}, at::detail::Array<char *, 2>>(int, at::native::{}, at::detail::Array<char *, 2>)"


def default_catalogue(
    ddp: bool = False, buckets: int | None = None, gradients: int | None = None, foreach: bool = False
) -> list[OpSpec]:
    """The op list; buckets = gradient all-reduce buckets per step (default 2, 4 with ddp; 1 = fused).
    DDP only: `gradients` = backward layers (each multi-instance backward kernel runs once per layer
    but the first, see extradeep.simulate.gradients); `foreach` = the optimizer's many tiny kernels
    as one launch (the same GPU time)."""
    buckets = buckets or (4 if ddp else 2)
    ops = [
        OpSpec(
            "[CUDA memcpy HtoD]",
            "[CUDA memcpy HtoD]",
            "memcpy",
            "memory",
            "data",
            1,
            ((8e-6, {}), (SAMPLE_BYTES / HTOD_BANDWIDTH, {"batch": (1, 0)})),
            batch_scaled=False,
            copy_kind=1,
            bytes_terms=((SAMPLE_BYTES, {"batch": (1, 0)}),),
        ),
        OpSpec(
            "[CUDA memset]",
            "[CUDA memset]",
            "memset",
            "memory",
            "zero_grad",
            1,
            ((6.3e-5, {}),),
            batch_scaled=False,
            bytes_terms=((PARAM_BYTES, {}),),
        ),
        _nccl("ncclDevKernel_Broadcast_RING_LL", "forward", 1, 2e-5, 4e-5, {"ranks": (0.5, 0)}, 212_992),
        _k(
            "implicit_convolve_sgemm",
            "void cudnn::detail::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, true, false, true>(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, float const*, float const*, bool, int, int)",
            "forward",
            2,
            6.0e-3,
            library=CONV_FWD,
        ),
        _k(
            XMMA.format("fprop"),
            "void " + XMMA.format("fprop") + "(cudnn::cnn::xmma_params)",
            "forward",
            2,
            5.0e-3,
            library=CONV_FWD,
        ),
        _k(
            "bn_fw_tr_1C11_kernel_NCHW",
            "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, float*, float*, float, float)",
            "forward",
            2,
            1.5e-3,
            library=BN_FWD,
        ),
        _k(
            "vectorized_elementwise_kernel",
            EW.format(
                "vectorized_elementwise_kernel",
                "(anonymous namespace)::launch_clamp_scalar",
                "(anonymous namespace)::launch_clamp_scalar",
            ),
            "forward",
            2,
            1.2e-3,
        ),
        _k(
            "max_pool_forward_nchw",
            "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*, long, long, long, int, int, int, int, int, int, int, int, int, int, float*, long*)",
            "forward",
            1,
            1.1e-4,
        ),
        _k("ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn", "forward", 1, 3.0e-4, library=SGEMM),
        _k(
            "cunn_SoftMaxForward",
            "void (anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, (anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)",
            "forward",
            1,
            2.0e-5,
        ),
        _k(
            "nll_loss_forward_reduce_cuda_kernel_2d",
            "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)",
            "forward",
            1,
            1.2e-5,
        ),
        _k(
            "DeviceRadixSortOnesweepKernel",
            "void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<at_cuda_detail::cub::DeviceRadixSortPolicy<long, long, int>::Policy800, false, long, long, int, int>(int*, int*, long*, long const*, long*, long const*, int, int, int)",
            "forward",
            1,
            3.0e-5,
            {"ranks": (0, 1)},
            floor=5e-6,
        ),
        _k(
            XMMA.format("dgrad"),
            "void " + XMMA.format("dgrad") + "(cudnn::cnn::xmma_params)",
            "backward",
            2,
            8.0e-3,
            library=CONV_BWD_D,
        ),
        _k(
            XMMA.format("wgrad"),
            "void " + XMMA.format("wgrad") + "(cudnn::cnn::xmma_params)",
            "backward",
            2,
            9.0e-3,
            library=CONV_BWD_W,
        ),
        _k(
            "bn_bw_1C11_kernel_new",
            "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float, float, float, cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float*, float*, float const*, float const*, float)",
            "backward",
            2,
            2.5e-3,
            library=BN_BWD,
        ),
        _k(
            "vectorized_elementwise_kernel",
            EW.format(
                "vectorized_elementwise_kernel",
                "(anonymous namespace)::threshold_backward",
                "(anonymous namespace)::threshold_backward",
            ),
            "backward",
            2,
            1.3e-3,
        ),
        _k(
            "elementwise_kernel",
            "void at::native::elementwise_kernel<128, 4, at::native::AddFunctor<float>>(int, at::native::AddFunctor<float>)",
            "backward",
            1,
            4.0e-4,
        ),
        _k(
            "gemmSN_TN_kernel",
            "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>>(cublasGemmSmallNParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>)",
            "backward",
            1,
            2.0e-4,
            library=SGEMM,
        ),
        _k(
            "max_pool_backward_nchw",
            "void at::native::(anonymous namespace)::max_pool_backward_nchw<float, float>(float const*, long const*, int, long, long, long, int, int, int, int, int, int, int, int, int, int, float*)",
            "backward",
            1,
            1.6e-4,
        ),
        _k(
            "cunn_SoftMaxBackward",
            "void (anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, (anonymous namespace)::LogSoftMaxBackwardEpilogue>(float*, float const*, float const*, int)",
            "backward",
            1,
            2.2e-5,
        ),
        _k(
            "batch_norm_collect_statistics_kernel",
            "void at::native::batch_norm_collect_statistics_kernel<at::native::InvStd, float, float, float, int>(at::native::GenericPackedTensorAccessor<float const, 3, at::native::RestrictPtrTraits, int>, float, float, at::native::GenericPackedTensorAccessor<float, 1, at::native::RestrictPtrTraits, int>, at::native::GenericPackedTensorAccessor<float, 1, at::native::RestrictPtrTraits, int>)",
            "backward",
            1,
            2.0e-5,
            {"ranks": (1, 0)},
        ),
        _nccl(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "bucket", buckets, 1.5e-4, 2.0e-4, {"ranks": (1, 1)}, PARAM_BYTES
        ),
        _nccl("ncclDevKernel_AllGather_RING_LL", "optimizer", 1, 1e-5, 1.0e-4, {"ranks": (1, 0)}, 65_536),
        _k(
            "multi_tensor_apply_kernel",
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>)",
            "optimizer",
            2,
            9.0e-4,
        ),
        _k(
            "reduce_kernel",
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator ()(at::TensorIterator &)::[lambda(float, float) (instance 1)]>, unsigned int, float, 4>>(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator ()(at::TensorIterator &)::[lambda(float, float) (instance 1)]>, unsigned int, float, 4>)",
            "between",
            1,
            6.0e-6,
        ),
        OpSpec(
            "[CUDA memcpy DtoH]",
            "[CUDA memcpy DtoH]",
            "memcpy",
            "memory",
            "between",
            1,
            ((2.0e-6, {}),),
            batch_scaled=False,
            copy_kind=2,
            bytes_terms=((DTOH_BYTES, {}),),
        ),
        _k(
            "fft2d_r2c_32x32",
            "void fft2d_r2c_32x32<float, false, 1u, false>(float2*, float const*, int, int, int, int, int, int, int, int, int, cudnn::reduced_divisor, bool, int2, int, int)",
            "warmup",
            4,
            2.0e-3,
            library=CONV_FWD,
        ),
        _k(
            "winograd_nonfused_4x4_fwd",
            "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams<float, float>)",
            "warmup",
            4,
            1.5e-3,
            library=CONV_FWD,
        ),
    ]
    if ddp:
        ops = [op for op in ops if op.category != "communication"] + ring_collectives(buckets)
        # foreach-less optimizer: many tiny kernels, CPU launch overhead dominates (launch-bound phase)
        ops.append(
            _k(
                "unrolled_elementwise_kernel",
                EW.format(
                    "unrolled_elementwise_kernel",
                    "AUnaryFunctor<float, float, float, at::native::MulFunctor<float>>",
                    "AUnaryFunctor<float, float, float, at::native::MulFunctor<float>>",
                ),
                "optimizer",
                1 if foreach else 120,
                3.0e-4,
                grid=(2, 1, 1, 128, 1, 1),
            )
        )
        if gradients:
            ops = [replace(op, visits=gradients - 1) if op.block == "backward" and op.visits == 2 else op for op in ops]
    return ops


# DDP mode: alpha-beta collectives (the ring/tree cost models of the predictor issue)
NCCL_ALPHA = 6e-6  # s per ring hop
NCCL_BANDWIDTH = 25e9  # B/s bus bandwidth
NCCL_LAUNCH = 4e-6  # s per collective even on one rank


def ring_collectives(buckets: int) -> list[OpSpec]:
    """All-reduce 2(p-1)a + 2(p-1)/p m/B per bucket, all-gather (p-1)a + (p-1)/p m/B, broadcast
    log2(p) a + m/B, each plus a launch floor; bandwidth terms are listed for nccl_bandwidth_scale."""
    a, bw, m = NCCL_ALPHA, NCCL_BANDWIDTH, PARAM_BYTES
    p1, pm1, logp = {"ranks": (1, 0)}, {"ranks": (-1, 0)}, {"ranks": (0, 1)}

    def spec(name, block, visits, terms, bandwidth, nbytes):
        return OpSpec(
            name,
            f"{name}(ncclDevComm *, unsigned long, ncclWork *)",
            "kernel",
            "communication",
            block,
            visits,
            terms,
            batch_scaled=False,
            bandwidth_terms=bandwidth,
            bytes_terms=((nbytes, {}),),
            grid=(2, 1, 1, 544, 1, 1),
            registers=96,
        )

    gather, bcast = 65_536, 212_992
    return [
        spec(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "bucket",
            buckets,
            (
                (NCCL_LAUNCH * buckets, {}),
                (2 * a * buckets, p1),
                (-2 * a * buckets, {}),
                (2 * m / bw, {}),
                (-2 * m / bw, pm1),
            ),
            (3, 4),
            m,
        ),
        spec(
            "ncclDevKernel_AllGather_RING_LL",
            "optimizer",
            1,
            ((NCCL_LAUNCH, {}), (a, p1), (-a, {}), (gather / bw, {}), (-gather / bw, pm1)),
            (3, 4),
            gather,
        ),
        spec(
            "ncclDevKernel_Broadcast_RING_LL",
            "forward",
            1,
            ((NCCL_LAUNCH, {}), (a, logp), (bcast / bw, {})),
            (2,),
            bcast,
        ),
    ]


def apply_scales(ops: list[OpSpec], kernel_scale: dict | None, bandwidth_scale: float) -> list[OpSpec]:
    """What-if factors: kernel_scale {fnmatch pattern on the name (case-insensitive): factor}; NCCL
    bandwidth terms divided by bandwidth_scale."""
    out = []
    for op in ops:
        factor = 1.0
        for pattern, value in (kernel_scale or {}).items():
            if fnmatch.fnmatch(op.name.lower(), pattern.lower()):
                factor *= float(value)
        terms = tuple(
            (c * factor / (bandwidth_scale if i in op.bandwidth_terms else 1.0), e) for i, (c, e) in enumerate(op.terms)
        )
        out.append(replace(op, terms=terms, scale=factor))
    return out


def resolve_terms(terms, batch_scaled: bool, params: list[str], batch: int, refs: dict) -> list[Term]:
    """Role terms -> terms in the run's parameter names. Roles that are not parameters become
    constants (batch: the fixed batch per rank); extra parameters scale compute linearly."""
    out = []
    for coef, exps in terms:
        coef, named = float(coef), {}
        if batch_scaled:
            exps = {**exps, "batch": (exps.get("batch", (0, 0))[0] + 1, 0)}
            coef /= BATCH_REF
        for role, (i, j) in exps.items():
            if role in params:
                named[role] = (i, j)
            else:
                value = batch if role == "batch" else 1.0
                coef *= value**i * math.log2(value) ** j if j else value**i
        if batch_scaled:
            for name in params:
                if name not in ("ranks", "batch"):
                    named[name] = (1, 0)
                    coef /= refs[name]
        out.append((coef, named))
    return out


def evaluate(terms: list[Term], point: dict) -> float:
    total = 0.0
    for coef, exps in terms:
        value = coef
        for name, (i, j) in exps.items():
            x = float(point[name])
            value *= x**i * (math.log2(x) ** j if j else 1.0)
        total += value
    return total


def merge_terms(groups) -> list[Term]:
    """Sum several term lists, combining terms with the same exponents."""
    merged: dict[tuple, float] = {}
    for terms in groups:
        for coef, exps in terms:
            key = tuple(sorted(exps.items()))
            merged[key] = merged.get(key, 0.0) + coef
    return [(c, dict(k)) for k, c in merged.items()]


def format_terms(terms: list[Term], prefixes: dict) -> str:
    parts = []
    for coef, exps in terms:
        factors = [f"{abs(coef) if parts else coef:.6g}"]
        for name, (i, j) in sorted(exps.items()):
            sym = prefixes.get(name, name)
            if i:
                factors.append(sym if i == 1 else f"{sym}^{_num(i)}")
            if j:
                factors.append(f"log2({sym})" if j == 1 else f"log2({sym})^{_num(j)}")
        parts.append((" - " if coef < 0 and parts else " + " if parts else "") + " * ".join(factors))
    return "".join(parts) if parts else "0"


def terms_json(terms: list[Term]) -> list[dict]:
    return [{"coefficient": c, "exponents": {k: [_num(i), _num(j)] for k, (i, j) in e.items()}} for c, e in terms]


def _num(x):
    return int(x) if float(x).is_integer() else float(x)

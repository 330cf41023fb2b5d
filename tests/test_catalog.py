"""The catalog's vocabulary as its readers see it: an algorithm's scheme, the kernels it runs, and what the
cost model, the evidence and the review derive from them."""

from __future__ import annotations

from artune import catalog
from artune.catalog import Scheme, scheme_of
from artune.costmodel import forms, gpu
from artune.costmodel.published import MODEL_KERNELS
from artune.evidence.kernels import kernel_of

KiB, MiB = 1 << 10, 1 << 20


def test_every_algorithm_has_its_scheme() -> None:
    assert {n for n, s in catalog.SPECS.items() if s.scheme is Scheme.ONE_SHOT} == {
        "shm_one_shot",
        "custom_ar",  # its first kernel, 1-stage; vLLM picks 2-stage above a size
        "symm_mem_one_shot",
        "1shot_push",
        "1shot_pull",
        "trtllm_oneshot",
        "aiter_ar",  # its first kernel, 1-stage; AITER's C++ picks 2-stage above a size
        "custom_ar_v1_1stage",
    }
    assert {n for n, s in catalog.SPECS.items() if s.scheme is Scheme.TWO_SHOT} >= {
        f"quick_ar_{level}" for level in catalog.QUICK_REDUCE_LEVELS
    }
    assert {n for n, s in catalog.SPECS.items() if s.scheme is Scheme.MULTICAST} == {
        "symm_mem_multimem",
        "2shot_pull_mc",
    }
    # each picks its own scheme per call inside one kernel (FlashInfer; SGLang's legacy one/two-stage switch)
    assert {n for n, s in catalog.SPECS.items() if s.scheme is None} == {"hier_shm", "flashinfer_ar", "custom_ar_v1"}
    assert scheme_of("custom_ar/2stage") is Scheme.TWO_SHOT and scheme_of("gloo") is Scheme.LIBRARY
    assert scheme_of("no-such-name") is None
    assert catalog.ALGORITHM_OF_KERNEL["push_ar"] == "1shot_push"


def test_the_cost_model_reads_the_scheme_and_kernels_from_the_catalog() -> None:
    assert forms.form_for("gloo") is forms.FORMS["library"] and forms.form_for("2shot_push") is forms.FORMS["two_shot"]
    assert forms.form_for("hier_shm") is None and forms.form_for("flashinfer_ar") is None
    assert gpu.KERNEL_OF["2shot_pull_mc"] == "multicast/custom"
    assert gpu.KERNEL_OF["symm_mem_multimem"] == "multicast/torch"
    assert gpu.KERNEL_OF["nccl"] == "library/nccl" and gpu.KERNEL_OF["1shot_push"] == "one_shot/custom"
    # two kernels of two schemes, picked per call: no one kernel; CPU and window kernels have no GPU form
    assert not {"custom_ar", "flashinfer_ar", "gloo", "shm_one_shot", "nccl_symmetric"} & gpu.KERNEL_OF.keys()
    assert set(gpu.KERNEL_OF.values()) <= set(gpu.KERNELS)
    assert gpu.candidate("2shot_push") == "2shot_pull" and gpu.candidate("flashinfer_ar") is None
    assert MODEL_KERNELS["custom_ar/2stage"] == "two_shot/custom" and MODEL_KERNELS["push_ar"] == "one_shot/custom"
    assert "nccl/in_place" not in MODEL_KERNELS and "nccl_symm" not in MODEL_KERNELS  # no form describes them


def test_the_evidence_kernel_of_a_choice() -> None:
    assert kernel_of("custom_ar", 8, 128 * KiB, True) == "custom_ar/1stage"
    assert kernel_of("custom_ar", 8, 1 * MiB, True) == "custom_ar/2stage"
    assert kernel_of("flashinfer_ar", 4, MiB, False) == "flashinfer/trtllm"
    assert kernel_of("symm_mem_multimem", 8, MiB, True) == "symm_mem/multimem"
    assert kernel_of("2shot_pull", 8, MiB, True) == "sglang/2shot_pull"
    assert kernel_of("trtllm_oneshot", 8, MiB, True) == "trtllm/oneshot"  # TensorRT-LLM's benchmark column
    assert kernel_of("shm_one_shot", 2, MiB, False) == "shm_one_shot"
    assert kernel_of("hier_shm", 2, MiB, False) == "hier_shm"

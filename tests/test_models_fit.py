"""Memory estimates from GGUF headers, the fit verdict, and what the machine reports.

Expected figures are worked out by hand in each test from the shape written into the file.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from ggufgen import write_random_model

from agentworld_tui.models.catalog import CatalogEntry, load_catalog
from agentworld_tui.models.fit import (
    DEFAULT_CONTEXT,
    OVERHEAD_BYTES,
    MemoryEstimate,
    estimate_entry_fit,
    estimate_fit,
    estimate_memory,
    read_shape,
    recommend,
    shape_from_fields,
    verdict,
)
from agentworld_tui.models.hardware import (
    GIB,
    GPU,
    MachineMemory,
    gpu_reinstall_command,
    llama_build,
    machine_memory,
    parse_meminfo,
    parse_nvidia_smi,
    parse_system_info,
    ram,
)

MIB = 1 << 20


def write_header_model(path: Path, arch: str, **keys: object) -> Path:
    """A GGUF file with the given architecture keys and one tiny tensor (not loadable)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    for name, value in keys.items():
        key = f"{arch}.{name}"
        if isinstance(value, list):
            writer.add_array(key, value)
        else:
            writer.add_uint32(key, int(value))  # type: ignore[call-overload]
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


QWEN35MOE_KEYS = {
    "block_count": 40,
    "context_length": 262144,
    "embedding_length": 2048,
    "attention.head_count": 16,
    "attention.head_count_kv": 2,
    "attention.key_length": 256,
    "attention.value_length": 256,
    "ssm.conv_kernel": 4,
    "ssm.inner_size": 4096,
    "ssm.state_size": 128,
    "ssm.group_count": 16,
}


def test_hybrid_model_counts_only_attention_layers(tmp_path: Path) -> None:
    path = write_header_model(
        tmp_path / "agentworld.gguf", "qwen35moe", **QWEN35MOE_KEYS, full_attention_interval=4
    )
    shape = read_shape(path)
    assert shape.architecture == "qwen35moe"
    assert (shape.n_layers, shape.attention_layers) == (40, 10)
    # 10 attention layers * 2 KV heads * (256 K + 256 V) * 2 bytes (f16)
    assert shape.kv_bytes_per_token == 20480
    # 30 DeltaNet layers * (conv (4-1)*(4096 + 2*16*128) + state 128*4096) * 4 bytes (f32)
    assert shape.recurrent_bytes == 30 * (3 * 8192 + 524288) * 4 == 65_863_680
    assert shape.trained_context == 262144
    assert shape.weights_bytes == path.stat().st_size
    assert shape.assumptions == ()

    estimate = estimate_memory(shape, 32768)
    assert estimate.kv_cache == 640 * MIB
    assert estimate.total == path.stat().st_size + 640 * MIB + 65_863_680 + OVERHEAD_BYTES
    default = estimate_memory(shape)  # context 0: the engine default, within the trained one
    assert default.n_ctx == DEFAULT_CONTEXT
    assert any("default" in note for note in default.assumptions)


def test_hybrid_without_interval_key_assumes_one_in_four(tmp_path: Path) -> None:
    path = write_header_model(tmp_path / "m.gguf", "qwen35moe", **QWEN35MOE_KEYS)
    shape = read_shape(path)
    assert shape.attention_layers == 10
    assert shape.kv_bytes_per_token == 20480
    assert any("assumed 1 attention layer in 4" in a for a in shape.assumptions)


def test_per_layer_kv_heads_and_derived_head_size(tmp_path: Path) -> None:
    path = write_header_model(
        tmp_path / "jamba.gguf",
        "jamba",
        block_count=8,
        context_length=4096,
        embedding_length=512,
        **{"attention.head_count": 8, "attention.head_count_kv": [0, 0, 0, 4, 0, 0, 0, 4]},
    )
    shape = read_shape(path)
    assert shape.attention_layers == 2
    # 2 layers * 4 KV heads * (64 + 64) * 2 bytes, head size 512 / 8 = 64
    assert shape.kv_bytes_per_token == 2048
    assert shape.recurrent_bytes == 0
    joined = " ".join(shape.assumptions)
    assert "64 = embedding_length / head_count" in joined
    assert "recurrent state not counted" in joined
    assert estimate_memory(shape).n_ctx == 4096  # the trained context caps the default


def test_generated_llama_model_matches_hand_arithmetic(tmp_path: Path) -> None:
    path = write_random_model(
        tmp_path / "small.gguf", n_embd=64, n_layer=2, n_ff=128, n_head=4, n_ctx_train=8192
    )
    shape = read_shape(path)
    assert (shape.architecture, shape.n_layers, shape.attention_layers) == ("llama", 2, 2)
    # 2 layers * 4 heads * (16 + 16) * 2 bytes
    assert shape.kv_bytes_per_token == 512
    estimate = estimate_memory(shape, 0)
    assert estimate.n_ctx == 8192
    assert estimate.kv_cache == 4 * MIB


def test_llama_cpp_allocates_the_kv_cache_we_estimate(tmp_path: Path) -> None:
    """Cross-check with the real library: its own report of the KV buffer it allocated."""
    import ctypes

    import llama_cpp
    import llama_cpp._logger

    from agentworld_tui.engines.llama import loading as engine

    path = write_random_model(
        tmp_path / "small.gguf", n_embd=64, n_layer=2, n_ff=128, n_head=4, n_ctx_train=8192
    )
    expected = estimate_memory(read_shape(path), 8192).kv_cache
    messages: list[str] = []

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def collect(_level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        messages.append(text.decode("utf-8", "replace"))

    llama_cpp.llama_log_set(collect, ctypes.c_void_p(0))
    try:
        model = llama_cpp.Llama(str(path), n_ctx=8192, n_gpu_layers=0, verbose=True)
        del model
    finally:  # give llama.cpp back the callback it had (the engine's or the library's)
        previous = engine._log_callback or llama_cpp._logger.llama_log_callback
        llama_cpp.llama_log_set(previous, ctypes.c_void_p(0))
    log = "".join(messages)
    sizes = re.findall(r"KV buffer size\s*=\s*([\d.]+) MiB", log)
    assert sizes, log[-2000:]
    assert sum(float(s) for s in sizes) * MIB == pytest.approx(expected)


def test_unreadable_file_is_a_value_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 64)
    with pytest.raises(ValueError, match="cannot read the GGUF header"):
        read_shape(bad)


def cpu_machine(total_gib: float, available_gib: float | None = None) -> MachineMemory:
    total = int(total_gib * GIB)
    available = int((available_gib if available_gib is not None else total_gib) * GIB)
    return MachineMemory(ram_total=total, ram_available=available)


def estimate_of(weights_gib: float, kv_gib: float = 0.5, n_ctx: int = 32768) -> MemoryEstimate:
    return MemoryEstimate(
        weights=int(weights_gib * GIB),
        kv_cache=int(kv_gib * GIB),
        recurrent=0,
        overhead=OVERHEAD_BYTES,
        n_ctx=n_ctx,
    )


def test_verdict_thresholds_on_a_cpu_machine() -> None:
    need = estimate_of(20)  # 20 + 0.5 + 0.5 = 21 GiB
    roomy = verdict(need, cpu_machine(32), gpu_offload=False)
    assert (roomy.status, roomy.placement, roomy.gpu_layers) == ("fits", "cpu", 0)
    assert roomy.proposals == ()
    # 24 GiB: 21 GiB fits in RAM but leaves less than the 2.4 GiB reserve
    squeezed = verdict(need, cpu_machine(23), gpu_offload=False)
    assert squeezed.status == "tight"
    busy = verdict(need, cpu_machine(32, available_gib=12), gpu_offload=False)
    assert busy.status == "tight" and "other programs" in busy.notes[0]
    small = verdict(need, cpu_machine(16), gpu_offload=False)
    assert small.status == "does_not_fit"
    assert "does not fit: needs about 21.0 GiB" in small.summary()


def test_smaller_quant_is_proposed_from_the_catalog() -> None:
    catalog = load_catalog()
    q8 = catalog.get("agentworld-35b-q8_0")
    assert q8 is not None
    result = estimate_entry_fit(
        q8, 32768, machine=cpu_machine(32), gpu_offload=False, catalog=catalog
    )
    assert result.status == "does_not_fit"
    # 32 GiB, 3.2 GiB reserve: Q5_K_M (25 GB = 23.3 GiB + 0.6 KV + 0.5) is the largest that fits
    assert result.proposals[0].kind == "quant"
    assert result.proposals[0].entry == "agentworld-35b-q5_k_m"
    tiny = estimate_entry_fit(q8, 32768, machine=cpu_machine(6), gpu_offload=False, catalog=catalog)
    assert [p.entry for p in tiny.proposals] == ["fallback-qwen2.5-3b-q4_k_m"]
    assert "fallback" in tiny.proposals[0].text


def test_entry_estimate_uses_the_catalog_shape() -> None:
    entry = CatalogEntry("m", "a/b", "Q4_K_M", size_gb=21, kv_bytes_per_token=20480)
    estimate = estimate_entry_fit(entry, 32768, machine=cpu_machine(64), gpu_offload=False).estimate
    assert estimate.weights == 21_000_000_000
    assert estimate.kv_cache == 640 * MIB
    unknown = replace(entry, kv_bytes_per_token=0)
    guessed = estimate_entry_fit(unknown, 1024, machine=cpu_machine(64), gpu_offload=False)
    assert guessed.estimate.kv_cache == 1024 * 128 * 1024
    assert any("assumed" in a for a in guessed.estimate.assumptions)


def test_smaller_context_is_proposed_when_the_kv_cache_is_the_problem() -> None:
    # 10 GiB of weights, 1 MiB of KV per token: 32 GiB of KV at 32768 tokens
    need = estimate_of(10, kv_gib=32, n_ctx=32768)
    result = verdict(need, cpu_machine(24), gpu_offload=False)
    assert result.status == "does_not_fit"
    # 16384 tokens: 10 + 16 + 0.5 > 21.6; 8192 tokens: 10 + 8 + 0.5 = 18.5 fits
    assert result.proposals[0].kind == "context"
    assert result.proposals[0].n_ctx == 8192
    assert "--ctx 8192" in result.proposals[0].text


def test_gpu_placement_whole_and_partial() -> None:
    gpu = GPU(0, "Test GPU", 24 * GIB, 23 * GIB)
    machine = MachineMemory(ram_total=32 * GIB, ram_available=30 * GIB, gpus=(gpu,))
    on_gpu = verdict(estimate_of(20), machine, gpu_offload=True, n_layers=40)
    assert (on_gpu.status, on_gpu.placement, on_gpu.gpu_layers) == ("fits", "gpu", -1)
    assert on_gpu.budget == int(23.5 * GIB)
    # 30 GiB needed, 23.5 GiB usable VRAM: 40 * 23.5 / 30 = 31.3 -> 31 layers on the GPU
    split = verdict(estimate_of(29), machine, gpu_offload=True, n_layers=40)
    assert (split.status, split.placement, split.gpu_layers) == ("fits", "split", 31)
    assert split.proposals[-1].kind == "gpu_layers" and split.proposals[-1].gpu_layers == 31
    # a CPU-only llama.cpp build ignores the GPU
    cpu_only = verdict(estimate_of(20), machine, gpu_offload=False, n_layers=40)
    assert cpu_only.placement == "cpu"
    too_big = verdict(estimate_of(60), machine, gpu_offload=True, n_layers=40)
    assert too_big.status == "does_not_fit"


def test_unified_memory_allows_three_quarters_to_the_gpu() -> None:
    mac = MachineMemory(ram_total=32 * GIB, ram_available=30 * GIB, unified=True)
    assert verdict(estimate_of(20), mac, gpu_offload=True).status == "fits"
    assert verdict(estimate_of(26), mac, gpu_offload=True).status == "tight"
    assert verdict(estimate_of(40), mac, gpu_offload=True).status == "does_not_fit"


def test_recommend_picks_what_fits() -> None:
    catalog = load_catalog()

    def pick(total_gib: float) -> str | None:
        found = recommend(catalog, cpu_machine(total_gib), gpu_offload=False)
        return found.name if found else None

    assert pick(64) == "agentworld-35b-q4_k_m"  # the default when it fits
    assert pick(20) == "agentworld-35b-q3_k_m"  # 17 GB + KV fits in 20 - 2 GiB
    assert pick(8) == "fallback-qwen2.5-3b-q4_k_m"
    assert pick(2) is None


def test_estimate_fit_on_a_file_uses_its_header(tmp_path: Path) -> None:
    path = write_header_model(tmp_path / "m.gguf", "qwen35moe", **QWEN35MOE_KEYS)
    result = estimate_fit(path, 32768, machine=cpu_machine(8), gpu_offload=False)
    assert result.status == "fits"
    assert result.estimate.kv_cache == 640 * MIB


def test_meminfo_and_this_machine() -> None:
    sample = "MemTotal:       16318460 kB\nMemFree:  1000 kB\nMemAvailable:   12000000 kB\n"
    assert parse_meminfo(sample) == (16318460 * 1024, 12000000 * 1024)
    assert parse_meminfo("MemTotal: 2048 kB\nMemFree: 1024 kB\n") == (2048 * 1024, 1024 * 1024)
    total, available = ram()
    assert total > 0 and 0 < available <= total
    assert machine_memory(gpus=False).ram_total == total


def test_nvidia_smi_output_is_parsed() -> None:
    text = "0, NVIDIA H200, 143771, 143000\n1, NVIDIA GeForce RTX 4090, 24564, 2000\n\nbad line\n"
    assert parse_nvidia_smi(text) == [
        GPU(0, "NVIDIA H200", 143771 * MIB, 143000 * MIB),
        GPU(1, "NVIDIA GeForce RTX 4090", 24564 * MIB, 2000 * MIB),
    ]


def test_llama_build_reading() -> None:
    cuda = "CUDA : ARCHS = 890 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | CPU : SSE3 = 1 | AVX = 1 |"
    assert parse_system_info(cuda) == ("CUDA", "CPU")
    assert parse_system_info("Metal : EMBED_LIBRARY = 1 | CPU : NEON = 1 |") == ("Metal", "CPU")
    build = llama_build()
    assert build is not None
    assert "CPU" in build.backends
    if not build.gpu_offload:
        assert build.kind == "CPU"


def test_gpu_reinstall_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no rocminfo or vulkaninfo in sight
    nvidia = MachineMemory(16 * GIB, 8 * GIB, gpus=(GPU(0, "GPU", 8 * GIB, 8 * GIB),))
    assert gpu_reinstall_command(nvidia, "0.3.36", system="Linux") == (
        "CUDA",
        'CMAKE_ARGS="-DGGML_CUDA=on" pipx runpip agentworld-tui install --force-reinstall '
        "--no-cache-dir llama-cpp-python==0.3.36",
    )
    mac = MachineMemory(16 * GIB, 8 * GIB, unified=True)
    metal = gpu_reinstall_command(mac, "", system="Darwin")
    assert metal is not None and metal[0] == "Metal" and '"-DGGML_METAL=on"' in metal[1]
    assert gpu_reinstall_command(MachineMemory(16 * GIB, 8 * GIB), system="Linux") is None


@pytest.mark.parametrize("layers", [4097, (1 << 32) - 1])
def test_a_header_with_absurd_layers_is_unreadable_not_a_hang(tmp_path: Path, layers: int) -> None:
    """A file's header is untrusted: billions of layers would be billions of list items."""
    keys = {**QWEN35MOE_KEYS, "block_count": layers}
    path = write_header_model(tmp_path / "m.gguf", "qwen35moe", **keys)
    with pytest.raises(ValueError, match=f"{layers} layers"):
        read_shape(path)
    with pytest.raises(ValueError, match=f"{layers} layers"):
        estimate_fit(path, machine=cpu_machine(16), gpu_offload=False)


def test_header_numbers_that_are_not_counts_do_not_crash() -> None:
    fields: dict[str, object] = {
        "general.architecture": "llama",
        "llama.block_count": 4,
        "llama.attention.head_count": float("inf"),
        "llama.attention.head_count_kv": [float("nan"), -8, 2, 2],
        "llama.embedding_length": -4096,
        "llama.context_length": float("inf"),
    }
    shape = shape_from_fields(fields, 1000)
    assert shape.n_layers == 4 and shape.kv_bytes_per_token >= 0
    assert shape.trained_context == 0
    assert estimate_memory(shape).total >= 1000

"""Will a model fit this machine? An estimate made before loading, so a load does not fail.

Memory needed = weights (the GGUF file size) + KV cache for the chosen context + recurrent
state (hybrid models) + a fixed allowance for llama.cpp's compute buffers. The GGUF header
(read with the ``gguf`` package, without loading tensors) gives the shape: only attention
layers keep a KV cache, which matters for Qwen-AgentWorld (``qwen35moe``): 3 of every 4
layers are Gated DeltaNet with a small fixed state, so its KV cache is a quarter of what a
plain transformer of the same shape would need. Every figure that is assumed rather than
read is listed in the estimate's ``assumptions``.

A header is untrusted (a downloaded or shared file): a count that is not a whole number
of 0 or more counts as unknown, and a layer count beyond any model makes the file
unreadable rather than an estimate that would build lists of billions of layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from agentworld_tui.models.catalog import MAX_LAYERS, Catalog, CatalogEntry
from agentworld_tui.models.hardware import GIB, MachineMemory
from agentworld_tui.models.quant import SPLIT_PATTERN

DEFAULT_CONTEXT = 32768
"""The engine's default context when the setting is 0 (and the model allows it)."""
KV_BYTES_PER_ELEMENT = 2
"""llama.cpp keeps K and V in f16 unless told otherwise."""
STATE_BYTES_PER_ELEMENT = 4
"""Recurrent (SSM / DeltaNet) state is kept in f32."""
OVERHEAD_BYTES = GIB // 2
"""Compute buffers, output logits and runtime: an allowance, not a measurement."""
UNKNOWN_KV_BYTES_PER_TOKEN = 128 * 1024
"""For an entry with no shape recorded: a 7B-class transformer with grouped KV heads."""
HYBRID_ARCHITECTURES = {"qwen3next": 4, "qwen35": 4, "qwen35moe": 4}
"""Architectures whose layers are mostly recurrent: attention every N layers (default N)."""
VRAM_RESERVE_PER_GPU = GIB // 2
"""CUDA context and fragmentation on each GPU."""
UNIFIED_GPU_SHARE = 0.75
"""macOS lets Metal use about three quarters of the RAM by default."""

FitStatus = Literal["fits", "tight", "does_not_fit"]
Placement = Literal["gpu", "split", "cpu"]


@dataclass(frozen=True)
class ModelShape:
    """What the GGUF header says about memory use."""

    architecture: str
    n_layers: int
    attention_layers: int
    kv_bytes_per_token: int
    recurrent_bytes: int
    trained_context: int
    weights_bytes: int
    assumptions: tuple[str, ...] = ()


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int
    kv_cache: int
    recurrent: int
    overhead: int
    n_ctx: int
    assumptions: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.recurrent + self.overhead


@dataclass(frozen=True)
class Proposal:
    kind: Literal["quant", "context", "gpu_layers"]
    text: str
    entry: str = ""
    n_ctx: int = 0
    gpu_layers: int = 0


@dataclass(frozen=True)
class FitVerdict:
    status: FitStatus
    estimate: MemoryEstimate
    machine: MachineMemory
    placement: Placement
    gpu_layers: int
    """-1 = all layers on the GPU, 0 = none, N = the first N layers."""
    budget: int
    """The memory the estimate was compared with (RAM, VRAM, or both), bytes."""
    proposals: tuple[Proposal, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def fits(self) -> bool:
        return self.status == "fits"

    def summary(self) -> str:
        word = {"fits": "fits", "tight": "tight", "does_not_fit": "does not fit"}[self.status]
        where = {"gpu": "on the GPU", "split": "split between GPU and RAM", "cpu": "in RAM"}
        text = (
            f"{word}: needs about {gib(self.estimate.total)} "
            f"(weights {gib(self.estimate.weights)} + KV cache {gib(self.estimate.kv_cache)} "
            f"at {self.estimate.n_ctx} tokens), {gib(self.budget)} {where[self.placement]}"
        )
        if self.proposals:
            text += "; " + self.proposals[0].text
        return text


def gib(count: int | float) -> str:
    return f"{count / GIB:.1f} GiB"


def split_parts(path: Path) -> list[Path]:
    """All parts of a split GGUF given its first part (or just the file)."""
    match = SPLIT_PATTERN.match(path.name)
    if not match:
        return [path]
    count = int(match["count"])
    return [
        path.with_name(f"{match['stem']}-{i:05d}-of-{match['count']}.gguf")
        for i in range(1, count + 1)
    ]


def read_shape(path: Path) -> ModelShape:
    """The model's memory-relevant shape from its GGUF header; raises ValueError if unreadable."""
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # gguf raises plain ValueError/struct errors on damaged files
        raise ValueError(f"cannot read the GGUF header of {path}: {exc}") from None
    fields: dict[str, Any] = {}
    for name, reader_field in reader.fields.items():
        if name.startswith("tokenizer.") or (
            name.startswith("general.") and name != "general.architecture"
        ):
            continue  # large vocabularies are slow to decode and say nothing about memory
        try:
            fields[name] = reader_field.contents()
        except Exception:  # a field the reader cannot decode is not one we need
            continue
    parts = split_parts(path)
    weights = sum(p.stat().st_size for p in parts if p.exists())
    return shape_from_fields(fields, weights)


def shape_from_fields(fields: dict[str, Any], weights_bytes: int) -> ModelShape:
    """The arithmetic of ``read_shape``, on header fields already decoded."""
    assumptions: list[str] = []
    arch = str(fields.get("general.architecture") or "")

    def key(name: str) -> Any:
        return fields.get(f"{arch}.{name}")

    n_layers = _as_int(key("block_count"))
    if n_layers > MAX_LAYERS:
        raise ValueError(
            f"the GGUF header says {n_layers} layers (more than {MAX_LAYERS}): not a model "
            "this estimate can read"
        )
    n_head = key("attention.head_count")
    n_head_kv = key("attention.head_count_kv")
    n_embd = _as_int(key("embedding_length"))
    heads = _per_layer(n_head, n_layers)
    kv_heads = _per_layer(n_head_kv, n_layers) if n_head_kv is not None else list(heads)
    if n_head_kv is None:
        assumptions.append("no head_count_kv in the header: KV heads = attention heads")
    head_q = max(heads) if heads else 0
    key_length = _as_int(key("attention.key_length"))
    value_length = _as_int(key("attention.value_length"))
    if not key_length or not value_length:
        derived = n_embd // head_q if head_q else 0
        key_length = key_length or derived
        value_length = value_length or derived
        assumptions.append(
            f"no key/value length in the header: {derived} = embedding_length / head_count"
        )

    interval = _as_int(key("full_attention_interval"))
    if isinstance(n_head_kv, list):
        attention = [i for i, h in enumerate(kv_heads) if h > 0]
    elif interval > 0:
        attention = [i for i in range(n_layers) if (i + 1) % interval == 0]
    elif arch in HYBRID_ARCHITECTURES:
        interval = HYBRID_ARCHITECTURES[arch]
        attention = [i for i in range(n_layers) if (i + 1) % interval == 0]
        assumptions.append(
            f"{arch} is hybrid and its header gives no full_attention_interval: "
            f"assumed 1 attention layer in {interval}"
        )
    else:
        attention = list(range(n_layers))
    per_token = sum(
        kv_heads[i] * (key_length + value_length) * KV_BYTES_PER_ELEMENT for i in attention
    )

    recurrent_layers = n_layers - len(attention)
    recurrent = 0
    if recurrent_layers:
        d_conv = _as_int(key("ssm.conv_kernel"))
        d_inner = _as_int(key("ssm.inner_size"))
        d_state = _as_int(key("ssm.state_size"))
        n_group = _as_int(key("ssm.group_count"))
        if d_inner and d_state:
            conv = max(d_conv - 1, 0) * (d_inner + 2 * n_group * d_state)
            state = d_state * d_inner
            recurrent = recurrent_layers * (conv + state) * STATE_BYTES_PER_ELEMENT
        else:
            assumptions.append("no ssm sizes in the header: recurrent state not counted")
    return ModelShape(
        architecture=arch,
        n_layers=n_layers,
        attention_layers=len(attention),
        kv_bytes_per_token=per_token,
        recurrent_bytes=recurrent,
        trained_context=_as_int(key("context_length")),
        weights_bytes=weights_bytes,
        assumptions=tuple(assumptions),
    )


def _as_int(value: Any) -> int:
    """A header count; anything but a whole number of 0 or more is 0 (unknown)."""
    if isinstance(value, list):
        return max((_as_int(v) for v in value), default=0)
    try:
        return max(0, int(value))
    except (TypeError, ValueError, OverflowError):
        return 0


def _per_layer(value: Any, n_layers: int) -> list[int]:
    if isinstance(value, list):
        values = [_as_int(v) for v in value]
        return (values + [values[-1] if values else 0] * n_layers)[:n_layers]
    return [_as_int(value)] * n_layers


def choose_context(n_ctx: int, trained: int) -> int:
    if n_ctx > 0:
        return n_ctx
    return min(trained, DEFAULT_CONTEXT) if trained > 0 else DEFAULT_CONTEXT


def estimate_memory(shape: ModelShape, n_ctx: int = 0) -> MemoryEstimate:
    ctx = choose_context(n_ctx, shape.trained_context)
    notes = list(shape.assumptions)
    notes.append(f"compute buffers: {gib(OVERHEAD_BYTES)} allowed")
    if n_ctx <= 0:
        notes.append(f"context {ctx} tokens (the default)")
    return MemoryEstimate(
        weights=shape.weights_bytes,
        kv_cache=shape.kv_bytes_per_token * ctx,
        recurrent=shape.recurrent_bytes,
        overhead=OVERHEAD_BYTES,
        n_ctx=ctx,
        assumptions=tuple(notes),
    )


def estimate_entry_memory(entry: CatalogEntry, n_ctx: int = 0) -> MemoryEstimate:
    """An estimate from the catalog alone, before the file is downloaded."""
    ctx = choose_context(n_ctx, 0)
    notes = [f"weights: the catalog's size ({entry.size_gb:g} GB)"]
    per_token = entry.kv_bytes_per_token
    if per_token <= 0:
        per_token = UNKNOWN_KV_BYTES_PER_TOKEN
        notes.append(f"KV cache: {per_token // 1024} KiB per token assumed (shape unknown)")
    notes.append(f"compute buffers: {gib(OVERHEAD_BYTES)} allowed")
    return MemoryEstimate(
        weights=entry.size_bytes,
        kv_cache=per_token * ctx,
        recurrent=0,
        overhead=OVERHEAD_BYTES,
        n_ctx=ctx,
        assumptions=tuple(notes),
    )


def ram_reserve(machine: MachineMemory) -> int:
    """RAM left to the system and other programs: 10 % of it, at least 2 GiB."""
    return max(2 * GIB, machine.ram_total // 10)


@dataclass(frozen=True)
class _Judgement:
    status: FitStatus
    placement: Placement
    gpu_layers: int
    budget: int
    notes: tuple[str, ...] = ()


def judge(
    estimate: MemoryEstimate, machine: MachineMemory, *, gpu_offload: bool, n_layers: int = 0
) -> _Judgement:
    """Compare the estimate with the machine: where the model would go and how it fits."""
    need = estimate.total
    reserve = ram_reserve(machine)
    if gpu_offload and machine.gpus:
        usable = max(0, machine.vram_total - VRAM_RESERVE_PER_GPU * len(machine.gpus))
        free = max(0, machine.vram_free - VRAM_RESERVE_PER_GPU * len(machine.gpus))
        if need <= usable:
            status: FitStatus = "fits" if need <= free else "tight"
            notes = () if status == "fits" else ("other programs hold part of the GPU memory",)
            return _Judgement(status, "gpu", -1, usable, notes)
        combined = usable + max(0, machine.ram_total - reserve)
        if need <= combined:
            share = usable / need if need else 0.0
            layers = int(n_layers * share) if n_layers else 0
            status = "fits" if need - usable <= machine.ram_available else "tight"
            return _Judgement(
                status,
                "split",
                layers,
                combined,
                ("partial GPU offload: layers beyond the GPU run on the CPU, slower",),
            )
        return _Judgement("does_not_fit", "split", 0, usable + machine.ram_total)
    if gpu_offload and machine.unified:
        limit = int(machine.ram_total * UNIFIED_GPU_SHARE)
        if need <= limit:
            status = "fits" if need <= machine.ram_available else "tight"
            return _Judgement(status, "gpu", -1, limit)
        if need <= machine.ram_total:
            return _Judgement(
                "tight",
                "gpu",
                -1,
                limit,
                ("above the share of memory macOS gives the GPU by default",),
            )
        return _Judgement("does_not_fit", "gpu", -1, machine.ram_total)
    if machine.ram_total <= 0:
        return _Judgement("tight", "cpu", 0, 0, ("the machine's memory could not be read",))
    if need <= machine.ram_total - reserve:
        status = "fits" if need <= machine.ram_available else "tight"
        notes = () if status == "fits" else ("other programs hold part of the RAM",)
        return _Judgement(status, "cpu", 0, machine.ram_total, notes)
    if need <= machine.ram_total:
        return _Judgement(
            "tight", "cpu", 0, machine.ram_total, ("little RAM would be left for the system",)
        )
    return _Judgement("does_not_fit", "cpu", 0, machine.ram_total)


def verdict(
    estimate: MemoryEstimate,
    machine: MachineMemory,
    *,
    gpu_offload: bool,
    n_layers: int = 0,
    entry: CatalogEntry | None = None,
    catalog: Catalog | None = None,
) -> FitVerdict:
    """Judge the estimate and, when it does not fit comfortably, say what would."""
    found = judge(estimate, machine, gpu_offload=gpu_offload, n_layers=n_layers)
    proposals: list[Proposal] = []
    if found.status != "fits":
        smaller_ctx = _smaller_context(estimate, machine, gpu_offload, n_layers)
        if smaller_ctx:
            proposals.append(smaller_ctx)
        if entry is not None and catalog is not None:
            proposals += _smaller_quants(estimate, machine, gpu_offload, n_layers, entry, catalog)
    if found.placement == "split" and found.gpu_layers > 0 and found.status != "does_not_fit":
        proposals.append(
            Proposal(
                "gpu_layers",
                f"offload {found.gpu_layers} of {n_layers} layers (--gpu-layers {found.gpu_layers})",
                gpu_layers=found.gpu_layers,
            )
        )
    return FitVerdict(
        status=found.status,
        estimate=estimate,
        machine=machine,
        placement=found.placement,
        gpu_layers=found.gpu_layers,
        budget=found.budget,
        proposals=tuple(proposals),
        notes=found.notes,
    )


def _smaller_context(
    estimate: MemoryEstimate, machine: MachineMemory, gpu_offload: bool, n_layers: int
) -> Proposal | None:
    ctx = estimate.n_ctx // 2
    per_token = estimate.kv_cache / estimate.n_ctx if estimate.n_ctx else 0
    while ctx >= 4096:
        smaller = replace(estimate, kv_cache=int(per_token * ctx), n_ctx=ctx)
        if judge(smaller, machine, gpu_offload=gpu_offload, n_layers=n_layers).status == "fits":
            return Proposal("context", f"use a context of {ctx} tokens (--ctx {ctx})", n_ctx=ctx)
        ctx //= 2
    return None


def _smaller_quants(
    estimate: MemoryEstimate,
    machine: MachineMemory,
    gpu_offload: bool,
    n_layers: int,
    entry: CatalogEntry,
    catalog: Catalog,
) -> list[Proposal]:
    """The largest smaller entry that fits: same repository first, then the fallbacks."""
    per_token = estimate.kv_cache / estimate.n_ctx if estimate.n_ctx else 0

    def fits(candidate: CatalogEntry) -> bool:
        kv = (
            candidate.kv_bytes_per_token * estimate.n_ctx
            if candidate.kv_bytes_per_token and candidate.repo != entry.repo
            else int(per_token * estimate.n_ctx)
        )
        trial = replace(estimate, weights=candidate.size_bytes, kv_cache=kv)
        status = judge(trial, machine, gpu_offload=gpu_offload, n_layers=n_layers).status
        return status == "fits"

    smaller = [
        e
        for e in catalog.entries
        if e.name != entry.name and 0 < e.size_bytes < estimate.weights and fits(e)
    ]
    same_model = [e for e in smaller if not e.fallback and e.repo == entry.repo]
    others = [e for e in smaller if not e.fallback and e.repo != entry.repo]
    fallbacks = [e for e in smaller if e.fallback]
    proposals: list[Proposal] = []
    for group, label in (
        (same_model, ""),
        (others, ""),
        (fallbacks, " (fallback, lower fidelity)"),
    ):
        if group:
            best = max(group, key=lambda e: e.size_gb)
            proposals.append(
                Proposal("quant", f"try {best.name} ({best.size_gb:g} GB){label}", entry=best.name)
            )
            if group is not fallbacks:
                break
    return proposals


def _gpu_offload_default() -> bool:
    from agentworld_tui.models.hardware import llama_build

    build = llama_build()
    return bool(build and build.gpu_offload)


def estimate_fit(
    path: Path,
    n_ctx: int = 0,
    *,
    machine: MachineMemory | None = None,
    gpu_offload: bool | None = None,
    entry: CatalogEntry | None = None,
    catalog: Catalog | None = None,
) -> FitVerdict:
    """Fit of a GGUF file on disk (header only). Raises ValueError for an unreadable file."""
    from agentworld_tui.models.hardware import machine_memory

    shape = read_shape(path)
    estimate = estimate_memory(shape, n_ctx)
    return verdict(
        estimate,
        machine or machine_memory(),
        gpu_offload=_gpu_offload_default() if gpu_offload is None else gpu_offload,
        n_layers=shape.n_layers,
        entry=entry,
        catalog=catalog,
    )


def estimate_entry_fit(
    entry: CatalogEntry,
    n_ctx: int = 0,
    *,
    machine: MachineMemory | None = None,
    gpu_offload: bool | None = None,
    catalog: Catalog | None = None,
) -> FitVerdict:
    """Fit of a catalog entry before download, from its recorded size and shape."""
    from agentworld_tui.models.hardware import machine_memory

    return verdict(
        estimate_entry_memory(entry, n_ctx),
        machine or machine_memory(),
        gpu_offload=_gpu_offload_default() if gpu_offload is None else gpu_offload,
        n_layers=entry.n_layers,
        entry=entry,
        catalog=catalog,
    )


def recommend(
    catalog: Catalog,
    machine: MachineMemory,
    *,
    gpu_offload: bool,
    n_ctx: int = 0,
) -> CatalogEntry | None:
    """The entry to offer first: the catalog's default if it fits, else the largest
    world-model entry that fits, else the largest fallback that fits, else None."""

    def status(e: CatalogEntry) -> FitStatus:
        estimate = estimate_entry_memory(e, n_ctx)
        return judge(estimate, machine, gpu_offload=gpu_offload, n_layers=e.n_layers).status

    default = catalog.recommended()
    if default is not None and status(default) == "fits":
        return default
    for pool in (
        [e for e in catalog.entries if not e.fallback],
        [e for e in catalog.entries if e.fallback],
    ):
        fitting = [e for e in pool if status(e) == "fits"]
        if fitting:
            return max(fitting, key=lambda e: e.size_gb)
    return None


def parallel_slots(shape: ModelShape, n_ctx: int, free_bytes: int, *, limit: int = 8) -> int:
    """Conversations a model can serve at once in ``free_bytes`` (RAM or VRAM): what is left
    after the weights and the overhead, over what one slot takes (its context's KV cache,
    its recurrent state and a few checkpoints of it); at least 1, at most ``limit``."""
    ctx = n_ctx or min(DEFAULT_CONTEXT, shape.trained_context or DEFAULT_CONTEXT)
    per_slot = shape.kv_bytes_per_token * ctx + shape.recurrent_bytes * 9
    left = free_bytes - shape.weights_bytes - OVERHEAD_BYTES
    if per_slot <= 0:
        return limit
    return max(1, min(limit, left // per_slot))

"""The model catalog: shipped entries, the user's overrides, and malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentworld_tui.models.catalog import (
    Catalog,
    CatalogEntry,
    CatalogError,
    load_catalog,
    merge_catalog_text,
    resolve,
    user_catalog_path,
)


def write_user(config: Path, text: str) -> Path:
    config.mkdir(parents=True, exist_ok=True)
    path = config / "models.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_catalog_loads_cleanly() -> None:
    catalog = load_catalog()
    assert catalog.problems == []
    names = [e.name for e in catalog.entries]
    assert len(names) == len(set(names))
    default = catalog.recommended()
    assert default is not None and default.name == "agentworld-35b-q4_k_m"
    assert default.repo == "unsloth/Qwen-AgentWorld-35B-A3B-GGUF"
    assert default.quant == "Q4_K_M"
    assert default.kv_bytes_per_token == 10 * 2 * (256 + 256) * 2
    fallbacks = [e for e in catalog.entries if e.fallback]
    assert fallbacks and all("FALLBACK" in e.description for e in fallbacks)
    assert {e.repo for e in catalog.entries} >= {
        "unsloth/Qwen-AgentWorld-35B-A3B-GGUF",
        "AtomicChat/qwen-agentworld-35b-GGUF",
        "DhruvalLabs/Qwen-AgentWorld-35B-A3B-GGUF",
    }


def test_user_file_overrides_fields_and_adds_entries(isolated_dirs: dict[str, Path]) -> None:
    path = write_user(
        isolated_dirs["config"],
        'default = "my-model"\n'
        "\n"
        "[[model]]\n"
        'name = "agentworld-35b-q4_k_m"\n'
        'repo = "mirror/AgentWorld-GGUF"\n'
        "\n"
        "[[model]]\n"
        'name = "my-model"\n'
        'repo = "me/tiny-GGUF"\n'
        'quant = "Q8_0"\n'
        "size_gb = 1\n",
    )
    assert user_catalog_path() == path
    catalog = load_catalog()
    assert catalog.problems == []
    overridden = catalog.get("agentworld-35b-q4_k_m")
    assert overridden is not None
    assert overridden.repo == "mirror/AgentWorld-GGUF"
    assert overridden.quant == "Q4_K_M"  # untouched fields keep the shipped values
    assert overridden.size_gb == 21
    assert overridden.source == str(path)
    added = catalog.get("my-model")
    assert added is not None and added.size_bytes == 1_000_000_000
    assert catalog.entries[-1] is added
    assert catalog.recommended() is added


def test_malformed_user_file_reports_the_line_and_keeps_shipped(
    isolated_dirs: dict[str, Path],
) -> None:
    path = write_user(isolated_dirs["config"], '[[model]]\nname = "broken\nrepo = "x/y"\n')
    catalog = load_catalog()
    assert len(catalog.problems) == 1
    problem = catalog.problems[0]
    assert str(path) in problem and "line 2" in problem and "ignored" in problem
    assert catalog.get("agentworld-35b-q4_k_m") is not None
    assert catalog.default == "agentworld-35b-q4_k_m"


def test_bad_entries_are_skipped_with_their_line() -> None:
    catalog = Catalog()
    text = (
        'default = "nowhere"\n'  # 1
        "colour = 3\n"  # 2
        "[[model]]\n"  # 3
        'name = "good"\n'  # 4
        'repo = "a/b"\n'  # 5
        'quant = "Q4_K_M"\n'  # 6
        "[[model]]\n"  # 7
        'name = "bad-size"\n'  # 8
        'repo = "a/b"\n'  # 9
        'quant = "Q4_K_M"\n'  # 10
        'size_gb = "big"\n'  # 11
        "[[model]]\n"  # 12
        'name = "bad-repo"\n'  # 13
        'repo = "not a repo"\n'  # 14
        'quant = "Q4_K_M"\n'  # 15
        "[[model]]\n"  # 16
        'name = "no-quant"\n'  # 17
        'repo = "a/b"\n'  # 18
        "flavour = 1\n"  # 19
        "[[model]]\n"  # 20
        'repo = "a/b"\n'  # 21
    )
    merge_catalog_text(catalog, text, "user.toml", origin="user.toml")
    assert [e.name for e in catalog.entries] == ["good"]
    problems = "\n".join(catalog.problems)
    assert "user.toml:2: unknown key 'colour'" in problems
    assert "user.toml:11: model 'bad-size': size_gb has the wrong type" in problems
    assert "user.toml:14: model 'bad-repo': repo 'not a repo' is not OWNER/NAME" in problems
    assert "user.toml:19: model 'no-quant': unknown key 'flavour'" in problems
    assert "user.toml:16: model 'no-quant': a new entry needs quant" in problems
    assert "user.toml:20: [[model]] without a name" in problems
    assert "user.toml:1: default 'nowhere' names no catalog entry" in problems
    assert catalog.default == ""


def test_a_boolean_is_not_a_size() -> None:
    catalog = Catalog()
    merge_catalog_text(
        catalog,
        '[[model]]\nname = "x"\nrepo = "a/b"\nquant = "Q4_0"\nsize_gb = true\n',
        "f",
        origin="f",
    )
    assert catalog.entries == []
    assert "size_gb has the wrong type" in catalog.problems[0]


def test_resolve_by_name_and_by_repo_quant() -> None:
    catalog = load_catalog()
    assert resolve(catalog, "AGENTWORLD-35B-Q8_0").quant == "Q8_0"
    known = resolve(catalog, "unsloth/Qwen-AgentWorld-35B-A3B-GGUF:q3_k_m")
    assert known.name == "agentworld-35b-q3_k_m"
    adhoc = resolve(catalog, "someone/Other-GGUF:IQ4_XS")
    assert (adhoc.repo, adhoc.quant, adhoc.name) == (
        "someone/Other-GGUF",
        "IQ4_XS",
        "someone/Other-GGUF:IQ4_XS",
    )
    with pytest.raises(CatalogError, match="unknown model 'nope'"):
        resolve(catalog, "nope")
    with pytest.raises(CatalogError):
        resolve(catalog, "no-slash:Q4_K_M")


NUMBERS = [
    ("size_gb", "1e308"),
    ("size_gb", "inf"),
    ("size_gb", "-inf"),
    ("size_gb", "nan"),
    ("size_gb", "-0.5"),
    ("size_gb", "1e9"),
    ("kv_bytes_per_token", "-1"),
    ("kv_bytes_per_token", "9223372036854775807"),
    ("n_layers", "-3"),
    ("n_layers", "1000000000"),
    ("n_layers", "9" * 400),
    ("size_gb", "-" + "9" * 400),
]


@pytest.mark.parametrize(("key", "value"), NUMBERS, ids=[f"{k}={v[:12]}" for k, v in NUMBERS])
def test_a_number_out_of_range_is_a_catalog_problem(key: str, value: str) -> None:
    """The entry is skipped with its name, key and line; an override keeps the shipped entry."""
    catalog = load_catalog()
    shipped = catalog.get("agentworld-35b-q4_k_m")
    text = (
        '[[model]]\nname = "odd"\nrepo = "a/b"\nquant = "Q4_K_M"\n'  # lines 1-4
        f"{key} = {value}\n"  # 5
        '[[model]]\nname = "agentworld-35b-q4_k_m"\n'  # 6-7
        f"{key} = {value}\n"  # 8
    )
    merge_catalog_text(catalog, text, "user.toml", origin="user.toml")
    assert catalog.get("odd") is None
    assert catalog.get("agentworld-35b-q4_k_m") == shipped
    assert len(catalog.problems) == 2
    assert catalog.problems[0].startswith(f"user.toml:5: model 'odd': {key} ")
    assert catalog.problems[1].startswith(f"user.toml:8: model 'agentworld-35b-q4_k_m': {key} ")
    assert all("entry ignored" in p for p in catalog.problems)


def test_entries_built_by_code_with_absurd_numbers_do_not_crash_the_fit() -> None:
    """Entries made outside the loader (a spec, code) go through the same arithmetic."""
    from agentworld_tui.models.fit import estimate_entry_fit, recommend
    from agentworld_tui.models.hardware import GIB, MachineMemory

    machine = MachineMemory(ram_total=64 * GIB, ram_available=60 * GIB)
    odd = [
        CatalogEntry("inf", "a/b", "Q4_K_M", size_gb=float("inf")),
        CatalogEntry("nan", "a/b", "Q4_K_M", size_gb=float("nan")),
        CatalogEntry("huge", "a/b", "Q4_K_M", size_gb=1e308),
        CatalogEntry("negative", "a/b", "Q4_K_M", size_gb=-5.0, kv_bytes_per_token=-1),
        CatalogEntry("wide", "a/b", "Q4_K_M", size_gb=1.0, kv_bytes_per_token=10**300),
        CatalogEntry("deep", "a/b", "Q4_K_M", size_gb=1.0, n_layers=10**300),
    ]
    catalog = Catalog(entries=odd)
    for entry in odd:
        verdict = estimate_entry_fit(entry, machine=machine, gpu_offload=False, catalog=catalog)
        assert verdict.summary()
        assert entry.size_bytes >= 0
    recommend(catalog, machine, gpu_offload=False)


def test_control_characters_in_names_and_descriptions() -> None:
    """A shared models.toml cannot smuggle terminal controls into any display."""
    catalog = Catalog()
    text = (
        '[[model]]\nname = "evil\\u001b]52;c;eA==\\u0007"\nrepo = "a/b"\nquant = "Q4_0"\n'
        '[[model]]\nname = "bidi\\u202e"\nrepo = "a/b"\nquant = "Q4_0"\n'
        '[[model]]\nname = "fine"\nrepo = "a/b"\nquant = "Q4_0"\n'
        'description = "clear\\u001b[2J screen\\u009b31m\\nsecond line"\n'
    )
    merge_catalog_text(catalog, text, "user.toml", origin="user.toml")
    assert [e.name for e in catalog.entries] == ["fine"]
    assert catalog.entries[0].description == "clear screen second line"
    assert len(catalog.problems) == 2
    assert (
        "user.toml:2: model 'evil\\x1b]52;c;eA==\\x07': the name has control"
        in (catalog.problems[0])
    )
    for problem in catalog.problems:
        assert not set(problem) & set("\x1b\x07\u202e\x9b")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[[model]]\nname = 'x'\nn_layers = " + "9" * 5000 + "\n", "a number with too many digits"),
        ("a = " + "[" * 50_000 + "]" * 50_000 + "\n", "nested too deeply"),
    ],
    ids=["long-integer", "deep-nesting"],
)
def test_a_file_tomllib_chokes_on_is_a_catalog_problem(text: str, reason: str) -> None:
    catalog = load_catalog()
    before = list(catalog.entries)
    merge_catalog_text(catalog, text, "user.toml", origin="user.toml")
    assert catalog.entries == before
    assert catalog.problems == [f"user.toml: {reason}; file ignored"]

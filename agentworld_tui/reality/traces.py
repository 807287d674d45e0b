"""The trace store: real exchanges (a call and what reality answered), kept to ground the
world model in how real tools answer.

An exchange comes from a twin run, a call routed to reality, or an import: the project's
own session files (turns reality answered) and AgentWorldBench lines (every recorded turn
holds a real observation). The store is one SQLite file; its FTS5 index ranks the earlier
exchanges of the same tool by BM25 over the call's arguments, so the retrieval is SQLite's
own, not ours.

The file may be huge, damaged or made by someone else, so nothing in it is trusted: a
file this program did not make (other tables, triggers, views) is refused when opened;
values are bounded in size when read; a row that is not what it should be is skipped and
counted, never raised; texts are returned raw and sanitized where they are shown.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal, NamedTuple
from urllib.request import pathname2url

from agentworld_tui.domains.tool_call import call_from_data
from agentworld_tui.world.action import ActionError
from agentworld_tui.world.json_input import JsonInputError, parse_json
from agentworld_tui.world.sanitize import sanitize
from agentworld_tui.world.splitter import OBSERVATION_MARKER
from agentworld_tui.world.trajectories import (
    TrajectoryError,
    benchmark_files,
    parse_sample,
    recorded_action,
)

APPLICATION_ID = 0x41575472
"""SQLite's application id for a trace store ("AWTr")."""
FORMAT_VERSION = 1
MAX_TOOL_CHARS = 200
MAX_ARGUMENTS_CHARS = 20_000
"""An exchange whose arguments (as JSON) are longer is not kept."""
MAX_OBSERVATION_CHARS = 100_000
"""Characters of an observation kept; the rest is cut with a note."""
MAX_SOURCE_CHARS = 300
INDEXED_TERMS = 256
"""Words of a call's arguments that the index holds."""
MAX_TERM_CHARS = 64
QUERY_TERMS = 8
"""The rarest words of a call that a query looks for."""
POSTINGS_BUDGET = 3_000
"""Index entries a query ranks by, at most (see ``TraceStore._ranked``), so that a call
made of common words costs no more than one made of rare words."""
MAX_VALUE_BYTES = 4_000_000
"""No value longer than this is read from the file (SQLite's own length limit)."""
MAX_SESSION_FILE_BYTES = 256 * 2**20
MAX_BENCH_LINE_BYTES = 64 * 2**20
MAX_PROBLEMS = 20
_BATCH = 2000
CUT_NOTE = "\n[… {n:,} more characters not kept]"

_SCHEMA = (
    """CREATE TABLE exchanges (
  id INTEGER PRIMARY KEY,
  domain TEXT NOT NULL,
  tool TEXT NOT NULL,
  arguments TEXT NOT NULL,
  observation TEXT NOT NULL,
  source TEXT NOT NULL,
  at REAL NOT NULL,
  digest TEXT NOT NULL UNIQUE
)""",
    "CREATE INDEX exchanges_by_tool ON exchanges (domain, tool, id)",
    "CREATE VIRTUAL TABLE exchange_terms USING fts5(terms, content='', tokenize='unicode61')",
    """CREATE TABLE term_counts (
  term TEXT PRIMARY KEY,
  docs INTEGER NOT NULL
) WITHOUT ROWID""",
)
_WORDS = re.compile(r"[^\W_]+")


class TraceStoreError(Exception):
    """A store that cannot be opened or written; the message is one line for the user."""


@dataclass(frozen=True)
class Exchange:
    """One real exchange: a call and reality's answer. Texts are raw: sanitize where shown."""

    tool: str
    arguments: Any
    """The call's arguments (JSON-able: an object for a tool call; a terminal's keystrokes,
    an OS action's code for domains without tools)."""
    observation: str
    source: str = ""
    """Where it came from: ``twin``, ``routed``, ``session:FILE#tab/turn``, ``bench:FILE:LINE``."""
    at: float = field(default_factory=time.time)
    """When it happened (or was imported), in seconds since the epoch."""
    domain: str = "mcp"
    id: int = 0
    """Its row in the store (0 before it is added)."""

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False, sort_keys=True)

    def label(self, width: int = 80) -> str:
        """One sanitized line for a list: ``#12 read_file {"path": "a"} · twin``."""
        args = " ".join(self.arguments_json().split())
        line = sanitize(f"#{self.id} {self.tool} {args} · {self.source}").replace("\n", " ")
        return line if len(line) <= width else line[: width - 1] + "…"


How = Literal["bm25", "word", "recent"]
"""How an example was found: ranked by BM25 over the call's rarer words; the most recent
holding the call's rarest word (every word of the call was too common to rank by); the
tool's most recent (too few shared a word with the call)."""


@dataclass(frozen=True)
class Match:
    """An exchange found for a call, and how (``How``)."""

    exchange: Exchange
    how: How
    score: float = 0.0
    """BM25 (higher is more similar); 0 when not ranked (``word``, ``recent``)."""


@dataclass(frozen=True)
class Retrieval:
    """What a query found. It never raises: a damaged index gives ``problem`` and what
    could be read."""

    matches: tuple[Match, ...] = ()
    skipped: int = 0
    """Rows found but not usable (damaged, of the wrong type, too large)."""
    problem: str = ""


@dataclass
class ImportReport:
    """What an import or a bulk add did."""

    read: int = 0
    """Exchanges found in the input."""
    added: int = 0
    duplicates: int = 0
    """Already in the store (same domain, tool, arguments and observation)."""
    simulated: int = 0
    """Turns the world model answered: not reality, so not imported."""
    skipped: int = 0
    """Records that could not be used."""
    problems: list[str] = field(default_factory=list)
    """Why records were skipped, the first ``MAX_PROBLEMS`` of them."""

    def skip(self, why: str) -> None:
        self.skipped += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(sanitize(why).replace("\n", " "))

    def merge(self, other: ImportReport) -> None:
        self.read += other.read
        self.added += other.added
        self.duplicates += other.duplicates
        self.simulated += other.simulated
        self.skipped += other.skipped
        room = MAX_PROBLEMS - len(self.problems)
        self.problems.extend(other.problems[: max(room, 0)])

    def summary(self) -> str:
        parts = [f"{self.added:,} added"]
        if self.duplicates:
            parts.append(f"{self.duplicates:,} already there")
        if self.simulated:
            parts.append(f"{self.simulated:,} simulated turns left out")
        if self.skipped:
            parts.append(f"{self.skipped:,} skipped")
        return f"{self.read:,} real exchanges read: " + ", ".join(parts)


# -- what a call is -------------------------------------------------------------------------
def call_of(domain: str, payload: Any) -> tuple[str, Any]:
    """The tool and arguments of an action's payload. A domain whose actions are not tool
    calls (terminal keystrokes, OS code) is its own one tool, with the payload as arguments."""
    if isinstance(payload, dict):
        name, arguments = payload.get("name"), payload.get("arguments", {})
        if isinstance(name, str) and name.strip() and isinstance(arguments, dict):
            return name.strip(), arguments
        with contextlib.suppress(ActionError, RecursionError):
            call = call_from_data(payload)
            return str(call["name"]), call["arguments"]
    return domain, payload


@functools.lru_cache(maxsize=4096)
def tool_prefix(domain: str, tool: str) -> str:
    """What every indexed word of a tool's calls starts with: each tool has words of its
    own in the index, so a query reads only its own tool's entries."""
    return hashlib.sha256(f"{domain}\0{tool}".encode("utf-8", "surrogatepass")).hexdigest()[:10]


def argument_words(arguments: Any) -> list[str]:
    """The words of the arguments' values (keys are the same in every call of a tool, so
    they say nothing about which calls are alike), lower-cased, in order, bounded."""
    words: list[str] = []
    stack: list[Any] = [arguments]
    while stack and len(words) < INDEXED_TERMS:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))
        elif value is not None:
            text = value if isinstance(value, str) else json.dumps(value)
            words.extend(
                w
                for w in _WORDS.findall(text[: INDEXED_TERMS * 16].lower())
                if len(w) <= MAX_TERM_CHARS
            )
    return words[:INDEXED_TERMS]


def indexed_terms(domain: str, tool: str, arguments: Any) -> list[str]:
    """The index's words for a call: its argument words, each with its tool's prefix."""
    prefix = tool_prefix(domain, tool)
    return [prefix + w for w in argument_words(arguments)]


def observation_text(text: str) -> str:
    """A recorded observation without the benchmark's leading marker."""
    stripped = text.strip()
    if stripped.startswith(OBSERVATION_MARKER):
        stripped = stripped[len(OBSERVATION_MARKER) :].strip()
    return stripped


def _digest(domain: str, tool: str, arguments: str, observation: str) -> str:
    parts = (domain, tool, arguments, observation)
    text = "".join(f"{len(p)}:{p}" for p in parts)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# -- the store ------------------------------------------------------------------------------
class TraceStore:
    """One SQLite trace store, safe to share between threads."""

    def __init__(self, path: Path, *, create: bool = False, writable: bool = True) -> None:
        """Open the store at ``path``; ``create`` makes a new one when there is none.
        A read-only store (``writable=False``) is opened so that nothing can write it."""
        self.path = path
        self.writable = writable or create
        self._lock = threading.Lock()
        where = str(path)
        if not path.exists():
            if not create:
                raise TraceStoreError(f"{where}: no such trace store")
            if not path.parent.is_dir():
                raise TraceStoreError(f"{where}: the folder does not exist")
        elif not path.is_file():
            raise TraceStoreError(f"{where}: not a file")
        mode = "rwc" if create else ("rw" if self.writable else "ro")
        try:
            self._db = sqlite3.connect(
                f"file:{pathname2url(str(path))}?mode={mode}",
                uri=True,
                timeout=10.0,
                check_same_thread=False,
                isolation_level=None,
            )
        except sqlite3.Error as exc:
            raise TraceStoreError(f"{where}: cannot open ({exc})") from None
        try:
            self._prepare(where)
        except BaseException:
            self._db.close()
            raise

    def _prepare(self, where: str) -> None:
        db = self._db
        db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        try:
            db.execute("PRAGMA trusted_schema = OFF")
            db.execute("PRAGMA cell_size_check = ON")
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            objects = db.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
        except sqlite3.DatabaseError as exc:
            raise TraceStoreError(f"{where}: not a trace store ({exc})") from None
        if not objects and app_id == 0:
            if not self.writable:
                raise TraceStoreError(f"{where}: an empty file, not a trace store")
            self._make(where)
            return
        if app_id != APPLICATION_ID:
            raise TraceStoreError(f"{where}: not a trace store (another program's SQLite file)")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > FORMAT_VERSION:
            raise TraceStoreError(
                f"{where}: a trace store of format {version}; this version reads format "
                f"{FORMAT_VERSION}: upgrade agentworld to use it"
            )
        problem = _schema_problem(objects)
        if problem:
            raise TraceStoreError(
                f"{where}: not a trace store as this program makes them ({problem})"
            )

    def _make(self, where: str) -> None:
        try:
            with self._transaction():
                for statement in _SCHEMA:
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self._db.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        except sqlite3.OperationalError as exc:
            if "fts5" in str(exc):
                raise TraceStoreError(
                    f"{where}: this Python's SQLite has no FTS5, which the trace store needs"
                ) from None
            raise TraceStoreError(f"{where}: cannot create ({exc})") from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> TraceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------------
    def add(self, exchange: Exchange) -> int | None:
        """Keep one exchange; returns its id, or None when it was there already or could
        not be kept (too large). Raises TraceStoreError when the file cannot be written."""
        report = ImportReport()
        ids = self._add(iter([exchange]), report)
        return ids[0] if ids else None

    def add_many(self, exchanges: Iterable[Exchange]) -> ImportReport:
        """Keep many exchanges in one transaction (a bulk import). An exchange that has an
        id keeps it where it is above every id in the store (a repaired store keeps the
        ids that sessions recorded); others get the next one."""
        report = ImportReport()
        self._add(iter(exchanges), report)
        return report

    def _add(self, exchanges: Iterator[Exchange], report: ImportReport) -> list[int]:
        if not self.writable:
            raise TraceStoreError(f"{self.path}: opened read-only")
        ids: list[int] = []
        added = report.added
        try:
            with self._lock, self._transaction():
                top = self._db.execute("SELECT max(id) FROM exchanges").fetchone()[0]
                next_id = (top if isinstance(top, int) else 0) + 1
                batch: list[_Row] = []
                for exchange in exchanges:
                    report.read += 1
                    row = _row(exchange, report)
                    if row is not None:
                        batch.append(row)
                    if len(batch) >= _BATCH:
                        next_id = self._insert(batch, next_id, ids, report)
                        batch = []
                self._insert(batch, next_id, ids, report)
        except sqlite3.Error as exc:
            report.added = added
            raise TraceStoreError(f"{self.path}: cannot write ({exc})") from None
        return ids

    def _insert(self, batch: list[_Row], next_id: int, ids: list[int], report: ImportReport) -> int:
        """Add a batch (within the caller's transaction); returns the next free id."""
        if not batch:
            return next_id
        marks = ",".join("?" * len(batch))
        there = {
            d
            for (d,) in self._db.execute(
                f"SELECT digest FROM exchanges WHERE digest IN ({marks})", [r.digest for r in batch]
            )
        }
        rows: list[tuple[Any, ...]] = []
        index: list[tuple[int, str]] = []
        counts: Counter[str] = Counter()
        for r in batch:
            if r.digest in there:
                report.duplicates += 1
                continue
            there.add(r.digest)
            row_id = r.id if r.id >= next_id else next_id
            rows.append(
                (row_id, r.domain, r.tool, r.arguments, r.observation, r.source, r.at, r.digest)
            )
            index.append((row_id, " ".join(r.terms)))
            counts.update(set(r.terms))
            ids.append(row_id)
            next_id = row_id + 1
        self._db.executemany("INSERT INTO exchanges VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        self._db.executemany("INSERT INTO exchange_terms (rowid, terms) VALUES (?, ?)", index)
        self._db.executemany(
            "INSERT INTO term_counts (term, docs) VALUES (?, ?) "
            "ON CONFLICT (term) DO UPDATE SET docs = docs + excluded.docs",
            counts.items(),
        )
        report.added += len(rows)
        return next_id

    # -- reading ------------------------------------------------------------------------
    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM exchanges").fetchone()[0])

    def tools(self) -> list[tuple[str, str, int]]:
        """(domain, tool, exchanges) for every tool in the store (names raw)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT domain, tool, count(*) FROM exchanges GROUP BY domain, tool "
                "ORDER BY domain, tool"
            ).fetchall()
        return [(str(d), str(t), int(n)) for d, t, n in rows]

    def get(self, ids: Collection[int]) -> tuple[list[Exchange], int]:
        """The exchanges with these ids that can be read, in the order given, and how
        many could not (each row is read on its own: one too large or damaged to read
        costs only itself)."""
        found: list[Exchange] = []
        wanted = [i for i in ids if isinstance(i, int)]
        with self._lock:
            for row_id in wanted:
                exchange = _read_exchange(self._db, row_id)
                if exchange is not None:
                    found.append(exchange)
        return found, len(wanted) - len(found)

    def similar(
        self,
        domain: str,
        tool: str,
        arguments: Any,
        *,
        limit: int = 3,
        exclude: Collection[int] = (),
    ) -> Retrieval:
        """The earlier real exchanges of the same tool most like this call: BM25 over the
        arguments' words first, then, if fewer than ``limit`` share a word with it, the
        tool's most recent ones. Never raises."""
        if limit <= 0:
            return Retrieval()
        words = list(dict.fromkeys(indexed_terms(domain, tool, arguments)))
        over = limit + len(exclude)
        ranked: list[tuple[int, float, How]] = []
        problem = ""
        try:
            with self._lock:
                if words:
                    ranked = self._ranked(words, over)
                if len(ranked) < over:
                    rows = self._db.execute(
                        "SELECT id FROM exchanges WHERE domain = ? AND tool = ? "
                        "ORDER BY id DESC LIMIT ?",
                        (domain, tool, over + len(ranked)),
                    ).fetchall()
                    have = {r for r, _, _ in ranked}
                    ranked += [(int(r), 0.0, "recent") for (r,) in rows if int(r) not in have]
        except (sqlite3.Error, ValueError, TypeError) as exc:
            problem = f"the trace store could not be searched ({exc})"
        chosen = [item for item in ranked if item[0] not in exclude][:limit]
        exchanges, skipped = self.get([r for r, _, _ in chosen])
        by_id = {e.id: e for e in exchanges}
        matches = tuple(
            Match(by_id[r], how, score)
            for r, score, how in chosen
            if r in by_id and by_id[r].tool == tool and by_id[r].domain == domain
        )
        return Retrieval(matches, skipped + len(exchanges) - len(matches), problem)

    def _ranked(self, words: list[str], limit: int) -> list[tuple[int, float, How]]:
        """BM25's best ``limit`` among the exchanges holding the call's rarest words.

        FTS5 reads every index entry of a word it ranks by (to weigh the word), so only
        words with at most POSTINGS_BUDGET entries between them are ranked by: words that
        most calls hold say little about which calls are alike. When every word is that
        common, the most recent exchanges holding the rarest one stand in (``word``).
        """
        marks = ",".join("?" * len(words))
        found = self._db.execute(
            f"SELECT term, docs FROM term_counts WHERE term IN ({marks})", words
        ).fetchall()
        known = sorted((d, t) for t, d in found if isinstance(d, int) and d > 0)
        if not known:
            return []
        chosen: list[str] = []
        postings = 0
        for docs, term in known[:QUERY_TERMS]:
            if postings + docs > POSTINGS_BUDGET:
                break
            chosen.append(term)
            postings += docs
        if not chosen:
            rows = self._db.execute(
                "SELECT rowid FROM exchange_terms WHERE exchange_terms MATCH ? "
                "ORDER BY rowid DESC LIMIT ?",
                (f'"{known[0][1]}"', limit),
            ).fetchall()
            return [(int(r), 0.0, "word") for (r,) in rows]
        rows = self._db.execute(
            "SELECT rowid, rank FROM exchange_terms WHERE exchange_terms MATCH ? "
            "ORDER BY rank LIMIT ?",
            (" OR ".join(f'"{t}"' for t in chosen), limit),
        ).fetchall()
        return [(int(r), -float(score), "bm25") for r, score in rows]

    # -- imports ------------------------------------------------------------------------
    def import_session_file(self, path: Path) -> ImportReport:
        """The real exchanges of a session file (see ``session_exchanges``)."""
        report = ImportReport()
        self._add(session_exchanges(path, report), report)
        return report

    def import_bench(self, path: Path) -> ImportReport:
        """The real exchanges of AgentWorldBench lines (a ``*_test.jsonl`` file or a
        folder of them; see ``bench_exchanges``)."""
        report = ImportReport()
        self._add(bench_exchanges(path, report), report)
        return report


class _Row(NamedTuple):
    domain: str
    tool: str
    arguments: str
    observation: str
    source: str
    at: float
    digest: str
    terms: list[str]
    id: int


def _row(exchange: Exchange, report: ImportReport) -> _Row | None:
    """The row for an exchange, bounded; None (counted) for one that cannot be kept."""
    tool, domain = exchange.tool, exchange.domain
    if not isinstance(tool, str) or not tool.strip() or len(tool) > MAX_TOOL_CHARS:
        report.skip(f"{exchange.source}: the tool name is empty or too long")
        return None
    if not isinstance(domain, str) or not domain or len(domain) > MAX_TOOL_CHARS:
        report.skip(f"{exchange.source}: no domain")
        return None
    try:
        arguments = exchange.arguments_json()
    except (TypeError, ValueError, RecursionError):
        report.skip(f"{exchange.source}: arguments that are not JSON")
        return None
    if len(arguments) > MAX_ARGUMENTS_CHARS:
        report.skip(f"{exchange.source}: arguments of {len(arguments):,} characters")
        return None
    observation = exchange.observation
    if not isinstance(observation, str):
        report.skip(f"{exchange.source}: an observation that is not text")
        return None
    if len(observation) > MAX_OBSERVATION_CHARS:
        cut = len(observation) - MAX_OBSERVATION_CHARS
        observation = observation[:MAX_OBSERVATION_CHARS] + CUT_NOTE.format(n=cut)
    try:
        observation.encode("utf-8")
        arguments.encode("utf-8")
    except UnicodeEncodeError:
        report.skip(f"{exchange.source}: text that is not valid Unicode")
        return None
    source = str(exchange.source)[:MAX_SOURCE_CHARS]
    at = float(exchange.at) if isinstance(exchange.at, int | float) else time.time()
    digest = _digest(domain, tool, arguments, observation)
    terms = indexed_terms(domain, tool, exchange.arguments)
    row_id = exchange.id if isinstance(exchange.id, int) and exchange.id > 0 else 0
    return _Row(domain, tool, arguments, observation, source, at, digest, terms, row_id)


def _exchange(row: tuple[Any, ...]) -> Exchange | None:
    """An exchange from a row as read, or None when the row is not what it should be."""
    id_, domain, tool, arguments, observation, source, at = row
    if not (
        isinstance(id_, int)
        and isinstance(domain, str)
        and isinstance(tool, str)
        and isinstance(arguments, str)
        and isinstance(observation, str)
        and isinstance(source, str)
        and isinstance(at, int | float)
    ):
        return None
    if len(arguments) > MAX_ARGUMENTS_CHARS:
        return None
    try:
        value = parse_json(arguments)
    except JsonInputError:
        return None
    return Exchange(tool, value, observation, source, float(at), domain, id_)


_EXPECTED: dict[tuple[str, str], str] | None = None


def _schema_problem(objects: list[tuple[Any, ...]]) -> str:
    """Why the file's objects are not exactly the store's (tables, index, and FTS5's own
    tables), or ""."""
    global _EXPECTED
    if _EXPECTED is None:
        scratch = sqlite3.connect(":memory:")
        try:
            for statement in _SCHEMA:
                scratch.execute(statement)
            _EXPECTED = {
                (str(t), str(n)): str(s)
                for t, n, s in scratch.execute("SELECT type, name, sql FROM sqlite_master")
            }
        finally:
            scratch.close()
    found = {(str(t), str(n)): str(s) for t, n, s in objects}
    for key, sql in found.items():
        if key not in _EXPECTED:
            return f"it holds a {key[0]} {sanitize(key[1])[:60]!r} of its own"
        if _EXPECTED[key] != sql:
            return f"its {key[0]} {key[1]!r} is not the one this program makes"
    missing = sorted(set(_EXPECTED) - set(found))
    if missing:
        return f"the {missing[0][0]} {missing[0][1]!r} is missing"
    return ""


def open_store(path: Path) -> TraceStore:
    """The trace store at ``path`` as a front-end uses one: made when it does not exist,
    opened read-only where this user cannot write it (it then grounds, and keeps
    nothing). Raises TraceStoreError."""
    exists = path.exists()
    writable = os.access(path.parent, os.W_OK) and (not exists or os.access(path, os.W_OK))
    return TraceStore(path, create=not exists, writable=writable)


def repair_store(path: Path) -> ImportReport:
    """Make the store at ``path`` again from the exchanges it still holds, in its place,
    keeping their ids: for a store whose index is damaged (queries then give a problem,
    never an exception). Rows that cannot be read are skipped and counted; the damaged
    file is kept beside the new one as ``NAME.damaged``. Raises TraceStoreError for a file
    that is not a trace store or whose exchanges cannot be read at all."""
    where = str(path)
    try:
        db = sqlite3.connect(f"file:{pathname2url(str(path))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise TraceStoreError(f"{where}: cannot open ({exc})") from None
    report = ImportReport()
    fresh = path.with_name(path.name + ".repaired")
    fresh.unlink(missing_ok=True)
    try:
        db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        db.execute("PRAGMA trusted_schema = OFF")
        if db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            raise TraceStoreError(f"{where}: not a trace store")
        with TraceStore(fresh, create=True) as store:
            store._add(_readable(db, report), report)
    except sqlite3.Error as exc:
        fresh.unlink(missing_ok=True)
        raise TraceStoreError(f"{where}: its exchanges cannot be read ({exc})") from None
    except BaseException:
        fresh.unlink(missing_ok=True)
        raise
    finally:
        db.close()
    os.replace(path, path.with_name(path.name + ".damaged"))
    os.replace(fresh, path)
    return report


def _readable(db: sqlite3.Connection, report: ImportReport) -> Iterator[Exchange]:
    """The exchanges of a damaged store that can still be read, in id order; a row that
    cannot be read is skipped and counted, ids that cannot be listed end the reading."""
    last = 0
    while True:
        try:
            ids = [
                r
                for (r,) in db.execute(
                    "SELECT id FROM exchanges WHERE id > ? ORDER BY id LIMIT 1000", (last,)
                )
            ]
        except sqlite3.Error as exc:
            report.skip(f"the exchanges after id {last} could not be listed ({exc})")
            return
        if not ids:
            return
        for row_id in ids:
            last = row_id
            exchange = _read_exchange(db, row_id)
            if exchange is None:
                report.skip(f"exchange {row_id}: damaged")
                continue
            yield exchange


def _read_exchange(db: sqlite3.Connection, row_id: int) -> Exchange | None:
    """One row, its values bounded, or None when it cannot be read or is not an exchange."""
    try:
        row = db.execute(
            "SELECT id, domain, tool, substr(arguments, 1, ?), substr(observation, 1, ?), "
            "substr(source, 1, ?), at FROM exchanges WHERE id = ?",
            (MAX_ARGUMENTS_CHARS + 1, MAX_OBSERVATION_CHARS + 200, MAX_SOURCE_CHARS, row_id),
        ).fetchone()
    except sqlite3.Error:
        return None
    return None if row is None else _exchange(row)


# -- reading what to import -----------------------------------------------------------------
def session_exchanges(path: Path, report: ImportReport) -> Iterator[Exchange]:
    """The real exchanges of a session file of this project, every branch of every tab.

    A turn is real where it records reality's answer: a twinned turn's
    ``turn["reality"]["real"]`` (a twin's ``RealObservation`` as a dict, with ``status``
    "ok") gives its ``text``; a turn reality answered alone (``turn["route"]``, a routing
    ``Decision`` as a dict, ``answered`` "real", complete, not failed or edited before
    the agent got it) has it as its ``observation``. Other turns were answered by the
    world model (or reality failed them) and are counted in ``simulated``.
    """
    where = path.name
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SESSION_FILE_BYTES + 1)
    except OSError as exc:
        report.skip(f"{where}: cannot read ({exc.strerror or exc})")
        return
    if len(raw) > MAX_SESSION_FILE_BYTES:
        report.skip(f"{where}: larger than {MAX_SESSION_FILE_BYTES:,} bytes")
        return
    try:
        data = parse_json(raw)
    except JsonInputError as exc:
        report.skip(f"{where}: damaged ({exc})")
        return
    if not isinstance(data, dict) or data.get("format") != "agentworld-session":
        report.skip(f"{where}: not an agentworld session file")
        return
    tabs = data.get("tabs")
    if not isinstance(tabs, list):
        report.skip(f"{where}: no tabs")
        return
    at = _number(data.get("updated")) or time.time()
    for t, tab in enumerate(tabs, 1):
        if not isinstance(tab, dict) or not isinstance(tab.get("domain"), str):
            report.skip(f"{where}: tab {t} is damaged")
            continue
        domain = tab["domain"]
        lines: list[Any] = [tab.get("turns")]
        branches = tab.get("branches")
        if isinstance(branches, list):
            lines += [b.get("turns") for b in branches if isinstance(b, dict)]
        for turns in lines:
            if turns is None:
                continue
            if not isinstance(turns, list):
                report.skip(f"{where}: tab {t} has turns that are not a list")
                continue
            for turn in turns:
                exchange = _turn_exchange(turn, domain, f"session:{where}#{t}", at, report)
                if exchange is not None:
                    yield exchange


def _turn_exchange(
    turn: Any, domain: str, where: str, at: float, report: ImportReport
) -> Exchange | None:
    if not isinstance(turn, dict) or not isinstance(turn.get("action"), dict):
        report.skip(f"{where}: a damaged turn")
        return None
    number = turn.get("number")
    source = f"{where}/{number}" if isinstance(number, int) else where
    reality, route = turn.get("reality"), turn.get("route")
    real = reality.get("real") if isinstance(reality, dict) else None
    text: Any = None
    if isinstance(real, dict) and real.get("status", "ok") == "ok":
        text = real.get("text")
    elif (
        real is None
        and isinstance(route, dict)
        and route.get("answered") == "real"
        and turn.get("status", "complete") == "complete"
        and not route.get("failed")
        and not route.get("edited")
    ):
        text = turn.get("observation")
    else:
        report.simulated += 1
        return None
    if not isinstance(text, str):
        report.skip(f"{source}: reality's answer is not text")
        return None
    tool, arguments = call_of(domain, turn["action"].get("payload"))
    return Exchange(tool, arguments, text, source, at, domain)


def bench_exchanges(path: Path, report: ImportReport) -> Iterator[Exchange]:
    """The real exchanges of AgentWorldBench lines: every recorded turn of a line (its
    action from the turn's ``**Action:**`` block, its reference observation), the
    current turn's included. Lines of one trajectory repeat its history: repeats are
    yielded once. A damaged line is skipped and counted."""
    try:
        files = benchmark_files(path)
    except TrajectoryError as exc:
        report.skip(str(exc))
        return
    seen: set[str] = set()
    for file in files:
        fallback = file.name.removesuffix(".jsonl").removesuffix("_test")
        try:
            handle = file.open("rb")
        except OSError as exc:
            report.skip(f"{file.name}: cannot read ({exc.strerror or exc})")
            continue
        with handle:
            for number, line in _lines(handle, report, file.name):
                where = f"{file.name}:{number}"
                try:
                    sample = parse_sample(line, fallback, where)
                except TrajectoryError as exc:
                    report.skip(str(exc))
                    continue
                pairs = list(zip(sample.prompt, sample.response, strict=False))
                if sample.turn_idx > len(sample.prompt) and sample.reference:
                    pairs.append((sample.current, sample.reference))
                for index, (turn_text, observation) in enumerate(pairs, 1):
                    key = hashlib.sha256(
                        json.dumps([sample.domain, turn_text, observation]).encode(
                            "utf-8", "surrogatepass"
                        )
                    ).hexdigest()
                    if key in seen:
                        continue
                    seen.add(key)
                    action = recorded_action(sample.domain, turn_text)
                    if isinstance(action.payload, str) and action.payload == turn_text:
                        report.skip(f"{where}: turn {index} has no **Action:** block")
                        continue
                    tool, arguments = call_of(sample.domain, action.payload)
                    yield Exchange(
                        tool,
                        arguments,
                        observation_text(observation),
                        f"bench:{where}/{index}",
                        time.time(),
                        sample.domain,
                    )


def _lines(handle: BinaryIO, report: ImportReport, where: str) -> Iterator[tuple[int, str]]:
    """The file's non-blank lines as text; one too long or not UTF-8 is skipped, counted,
    and never held in memory whole."""
    number = 0
    while True:
        raw = handle.readline(MAX_BENCH_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_BENCH_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = handle.readline(MAX_BENCH_LINE_BYTES)
            report.skip(f"{where}:{number}: a line longer than {MAX_BENCH_LINE_BYTES:,} bytes")
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            report.skip(f"{where}:{number}: not UTF-8 text")
            continue
        if text.strip():
            yield number, text


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0

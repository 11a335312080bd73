"""Dataset cards: the ``README.md`` that Hugging Face reads in every folder expcli writes.

A card is the Hub's YAML block (``huggingface_hub.DatasetCardData``'s keys: ``license``,
``task_categories``, ``tags``, ``size_categories``, and ``configs`` as
``datasets.MetadataConfigs`` reads them) and a body: the env, its spaces, the episodes and
their returns, how the data was collected (from the metadata, where recorded) and the
files. LeRobot writes its card the same way (``create_lerobot_dataset_card``: tags, a
``default`` config whose ``data_files`` glob the data, the info below).

Every scalar of the YAML block is a JSON string, which YAML reads as a double-quoted
scalar: an env id such as ``ALE/Pong-v5`` or a metadata string holding ``"``, ``:`` or a
line break stays one value and never ends the block. The body shows metadata strings in
code spans whose fences outrun their backticks.

``configs`` lists data files only where ``datasets`` can read them (Parquet; Minari's
Arrow files); a Minari folder in HDF5 has none, and says so. The config's ``description``
carries a fingerprint of the files: ``datasets`` keys its cache by the config alone
(``create_builder_configs_from_metadata_configs`` keeps the patterns, not the files), so a
folder grown by ``--resume`` or replaced by ``--overwrite`` would otherwise load from the
stale cache.

A card is written atomically (``files.atomic``), only into folders expcli owns: a
``README.md`` without expcli's mark (``MARK``) is left alone.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from expcli._version import __version__
from expcli.errors import ConfigError
from expcli.files.atomic import atomic_write
from expcli.formats._episode_returns import EpisodeTally, tally_rows
from expcli.spec import CircularState

__all__ = [
    "CARD",
    "DEFAULT_LICENSE",
    "MARK",
    "CardFacts",
    "EpisodeTally",
    "FolderKind",
    "card_text",
    "checked_license",
    "data_fingerprint",
    "fingerprint",
    "recorded_license",
    "size_category",
    "tally_rows",
    "write_card",
    "write_layout_card",
]

CARD = "README.md"
"""A folder's dataset card."""
DEFAULT_LICENSE = "other"
"""The card's ``license`` where none is given (the Hub's word for "not one of ours")."""
MARK = "<!-- written by expcli: rewritten as the folder changes -->"
"""The line that tells expcli's cards from a README someone else wrote (left alone)."""

_LICENSE = re.compile(r"[a-z0-9][a-z0-9.+-]{0,63}")
_SIZES = ("n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "10M<n<100M")
_LARGER = ("100M<n<1B", "1B<n<10B", "10B<n<100B", "100B<n<1T", "n>1T")


def checked_license(text: str | None) -> str:
    """``--license`` as the Hub spells licenses (lower case: ``mit``, ``cc-by-4.0``).

    None gives ``DEFAULT_LICENSE``.

    Raises:
        ConfigError: Not a license identifier (letters, digits, ``.``, ``+``, ``-``).
    """
    if text is None:
        return DEFAULT_LICENSE
    given = text.strip().lower()
    if not _LICENSE.fullmatch(given):
        raise ConfigError(
            f"--license must be a license identifier as the Hub lists them (e.g. mit, "
            f"apache-2.0, cc-by-4.0, other), got {text!r}"
        )
    return given


def recorded_license(metadata: Mapping[str, Any]) -> str | None:
    """The license a collect run recorded (its settings' ``license``), if any."""
    collector = metadata.get("collector")
    settings = collector.get("collect_settings") if isinstance(collector, Mapping) else None
    found = settings.get("license") if isinstance(settings, Mapping) else None
    return found if isinstance(found, str) and _LICENSE.fullmatch(found) else None


def size_category(rows: int) -> str:
    """The Hub's ``size_categories`` bucket of ``rows`` examples (``n<1K``, ``1K<n<10K``...)."""
    buckets = (*_SIZES, *_LARGER)
    for power, name in enumerate(buckets[:-1], start=3):
        if rows < 10**power:
            return name
    return buckets[-1]


def fingerprint(parts: Iterable[str]) -> str:
    """A short digest of ``parts`` (the files' names and checksums or sizes)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class CardFacts:
    """What a card says, gathered by the writer of the folder.

    Attributes:
        metadata: The dataset's metadata (env id, spaces, seed, ``collector``...).
        transitions: Rows of the data (transitions written).
        num_envs: Env columns.
        tally: Its episodes and their returns.
        kind: What the folder is, for the title's line ("Parquet shards", "a LeRobot v3.0
            dataset").
        data_files: Globs of the files ``datasets`` reads (the ``default`` config's
            ``data_files``); none: no ``configs``, and ``no_configs`` says why.
        files: The body's lines about the files, in Markdown.
        files_fingerprint: A digest of the data files (``fingerprint``).
        license: The card's ``license``.
        tags: Tags beside ``expcli`` and the env id (the layout's library).
        no_configs: Why the card lists no data files (when ``data_files`` is empty).
    """

    metadata: Mapping[str, Any]
    transitions: int
    num_envs: int
    tally: EpisodeTally
    kind: str
    data_files: tuple[str, ...]
    files: str
    files_fingerprint: str
    license: str = DEFAULT_LICENSE
    tags: tuple[str, ...] = ()
    no_configs: str = ""


def _yaml(value: str) -> str:
    """A YAML double-quoted scalar (a JSON string: YAML reads JSON's escapes)."""
    return json.dumps(value, ensure_ascii=True)


def _code(text: str) -> str:
    """``text`` on one line in a Markdown code span that its own backticks cannot close."""
    flat = " ".join(str(text).split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _env_id(metadata: Mapping[str, Any]) -> str | None:
    """The env id without its module (``ale_py:ALE/Pong-v5`` -> ``ALE/Pong-v5``)."""
    env_id = metadata.get("env_id")
    if not isinstance(env_id, str) or not env_id:
        return None
    return env_id.split(":", 1)[-1] or env_id


def _front_matter(facts: CardFacts) -> list[str]:
    env_id = _env_id(facts.metadata)
    tags = ["expcli", *facts.tags, *([env_id] if env_id else [])]
    lines = [
        "---",
        f"license: {_yaml(facts.license)}",
        "task_categories:",
        f"- {_yaml('reinforcement-learning')}",
        "tags:",
        *(f"- {_yaml(tag)}" for tag in dict.fromkeys(tags)),
        "size_categories:",
        f"- {_yaml(size_category(facts.transitions))}",
    ]
    if facts.data_files:
        lines += [
            "configs:",
            f"- config_name: {_yaml('default')}",
            f"  description: {_yaml('expcli files ' + facts.files_fingerprint)}",
            "  data_files:",
            f"  - split: {_yaml('train')}",
            *(
                [f"    path: {_yaml(facts.data_files[0])}"]
                if len(facts.data_files) == 1
                else ["    path:", *(f"    - {_yaml(glob)}" for glob in facts.data_files)]
            ),
        ]
    return [*lines, "---"]


def _collection(metadata: Mapping[str, Any], num_envs: int) -> list[str]:
    """How the data was collected, from what the metadata records."""
    collector = metadata.get("collector")
    collector = collector if isinstance(collector, Mapping) else {}
    policy = collector.get("policy")
    if isinstance(policy, Mapping):
        policy = policy.get("spec") or policy.get("kind")
    said = [
        ("policy", policy),
        ("seed", metadata.get("seed")),
        ("mode", collector.get("mode")),
        ("envs", num_envs or None),
        ("steps", collector.get("steps")),
    ]
    lines = [f"- {name}: {_code(str(value))}" for name, value in said if value is not None]
    return lines or ["- not recorded (the data did not come from `expcli collect`)"]


def card_text(facts: CardFacts) -> str:
    """The card: the YAML block, then the body (Markdown)."""
    meta = facts.metadata
    env_id = meta.get("env_id")
    title = _env_id(meta) or "an unnamed env"
    spaces = [
        f"- {label}: {_code(json.dumps(meta[key], sort_keys=True))}"
        for key, label in (("observation_space", "observations"), ("action_space", "actions"))
        if key in meta
    ]
    body = [
        MARK,
        "",
        f"# {_code(title)}: an expcli dataset",
        "",
        f"{facts.transitions:,} transitions from {facts.num_envs:,} env"
        f"{'s' if facts.num_envs != 1 else ''}, as {facts.kind}. Written by expcli "
        f"{__version__}; `expcli inspect FOLDER` describes it.",
        "",
        "## Environment",
        "",
        f"- env id: {_code(str(env_id)) if env_id else 'not recorded'}",
        *(spaces or ["- spaces: not recorded"]),
        "",
        "## Episodes",
        "",
        f"{facts.tally.summary()} (an episode ends at a `terminated` or `truncated` step; "
        "one cut by the end of the data, or begun in rows since overwritten, is not "
        "complete).",
        "",
        "## How it was collected",
        "",
        *_collection(meta, facts.num_envs),
        "",
        "## Files",
        "",
        facts.files.strip(),
    ]
    if not facts.data_files and facts.no_configs:
        body += ["", facts.no_configs.strip()]
    return "\n".join([*_front_matter(facts), *body, ""])


def write_card(folder: Path, text: str) -> bool:
    """Write ``folder``'s card atomically; a README.md expcli did not write stays.

    Returns whether the card was written.

    Raises:
        OutputError: The folder cannot be written.
    """
    card = folder / CARD
    if card.exists():
        try:
            head = card.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        if MARK not in head:
            return False
    with atomic_write(card, "w") as f:
        f.write(text)
    return True


def data_fingerprint(folder: Path, names: Sequence[str]) -> str:
    """A digest of files of ``folder`` by name, size and modification time."""
    parts = []
    for name in sorted(names):
        stat = (folder / name).stat()
        parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
    return fingerprint(parts)


def folder_card(
    header: Mapping[str, Any],
    shards: Iterable[tuple[str, str]],
    tally: EpisodeTally,
    *,
    files: str,
    glob: str,
    kind: str,
    license: str | None = None,
) -> str:
    """The card of a sharded folder, from its manifest's ``header`` and its shards.

    ``shards``: each listed shard's file name and CRC-32; ``files``: what its files are
    (the shard format's ``shard_card``); ``glob``: the pattern of its shards; ``kind``:
    what they are ("Parquet shards"); ``license``:
    None takes the one a collect run recorded, else ``DEFAULT_LICENSE``.
    """
    num_envs = int(header.get("num_envs") or 0)
    try:
        state = CircularState.from_json(header)
    except (KeyError, TypeError):
        state = CircularState()
    rows = int(header.get("memory_size") or 0)
    facts = CardFacts(
        metadata=header,
        transitions=state.valid_length(rows, num_envs),
        num_envs=num_envs,
        tally=tally,
        kind=kind,
        data_files=(glob,),
        files=files,
        files_fingerprint=fingerprint(f"{name}:{crc}" for name, crc in shards),
        license=license or recorded_license(header) or DEFAULT_LICENSE,
    )
    return card_text(facts)


@dataclass(frozen=True)
class FolderKind:
    """What a layout's card says of its files.

    Attributes:
        kind: What the folder is ("a LeRobot v3.0 dataset").
        files: The body's lines about its files (Markdown).
        data_files: The globs ``datasets`` reads (none: the card has no ``configs``).
        tags: The layout's tags (its library).
        no_configs: Why there are no data files to list, when there are none.
    """

    kind: str
    files: str
    data_files: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    no_configs: str = ""


def write_layout_card(dataset: Any, folder: Path, what: FolderKind, license: str | None) -> None:
    """Write the card of a layout's folder that expcli just wrote from ``dataset``.

    ``license`` None: the one a collect run recorded, else ``DEFAULT_LICENSE``. Its episodes
    are counted in a pass over the rewards and done flags, oldest first.

    Raises:
        OutputError: The folder cannot be written.
    """
    meta = dataset.metadata
    tally = tally_rows(dataset.tensors, dataset.state, meta, dataset.memory_size, dataset.num_envs)
    names = sorted(
        {str(p.relative_to(folder)) for glob in what.data_files for p in folder.glob(glob)}
    )
    facts = CardFacts(
        metadata=meta,
        transitions=len(dataset),
        num_envs=dataset.num_envs,
        tally=tally,
        kind=what.kind,
        data_files=what.data_files,
        files=what.files,
        files_fingerprint=data_fingerprint(folder, names),
        license=license or recorded_license(meta) or DEFAULT_LICENSE,
        tags=what.tags,
        no_configs=what.no_configs,
    )
    write_card(folder, card_text(facts))

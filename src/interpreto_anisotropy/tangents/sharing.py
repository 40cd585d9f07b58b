# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Fitted tangents to keep and share: the folder `TangentExplainer.save_pretrained` writes, and the Hub.

The folder holds ``tangent.json`` (`SavedTangent`), ``subspace.safetensors`` (`Subspace.save`) and a ``README.md``
model card; docs/how-to/share-tangents.md describes them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import tempfile
import types
import typing
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi, ModelCard, ModelCardData, snapshot_download
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from ..commons.files import parse_json, write_atomically
from ..commons.options import check_folder
from ..errors import InvalidInputError, ResultsStoreError
from ..reading.split_point import splitter_model
from ..version import __version__
from .subspace import Subspace

__all__ = [
    "CARD_FILE",
    "SUBSPACE_FILE",
    "TANGENT_FILE",
    "FitRecord",
    "SavedTangent",
    "SharedTangent",
    "check_repo_id",
    "read_saved",
    "save_tangent",
    "tangent_folder",
    "texts_sha256",
]

TANGENT_FILE = "tangent.json"
SUBSPACE_FILE = "subspace.safetensors"
CARD_FILE = "README.md"
#: The format of ``tangent.json``; a folder of a later format is refused (upgrade the package to read it).
FORMAT = 1

_SAVE_AGAIN = "save the tangent again with TangentExplainer.save_pretrained"
_NO_TEXT = "0" * 64


def _chained(digest: str, texts: str | Iterable[str]) -> tuple[str, int]:
    """The hash chain `digest` extended by each text, sha256(digest + sha256(text)), and the texts' count."""
    texts = [texts] if isinstance(texts, str) else list(texts)
    for text in texts:
        digest = hashlib.sha256((digest + hashlib.sha256(text.encode()).hexdigest()).encode("ascii")).hexdigest()
    return digest, len(texts)


def texts_sha256(texts: str | Iterable[str]) -> str:
    """The hash a saved tangent records of its fit texts: from 64 zeros, h -> sha256(h + sha256(text)) per text.

    Texts given over several `partial_fit` calls hash as their concatenation; returns 64 hexadecimal digits.

    Examples:
        >>> texts_sha256(["a cat", "a dog"]) == texts_sha256(["a cat"] + ["a dog"])
        True
        >>> texts_sha256(["a cat", "a dog"]) == texts_sha256(["a cat a dog"])
        False
    """
    return _chained(_NO_TEXT, texts)[0]


@dataclass
class FitRecord:
    """What a tangent was fitted on, as `fit` and `partial_fit` saw it (`tangent.fit_record`).

    Attributes:
        n_texts: How many texts it was fitted on.
        texts_sha256: Their `texts_sha256`, None when no text was given.
        token_policies: The distinct reading options of those texts (`include_special`, `max_tokens`, ...).
        activations: Whether rows were also (or only) given as activations.
    """

    n_texts: int = 0
    texts_sha256: str | None = None
    token_policies: list[dict[str, Any]] = field(default_factory=list)
    activations: bool = False

    def add(self, texts: str | list[str] | None, reader: dict[str, Any]) -> FitRecord:
        """Record one call's texts and its reading options, or (`texts=None`) rows given as activations."""
        if texts is None:
            self.activations = True
            return self
        self.texts_sha256, count = _chained(self.texts_sha256 or _NO_TEXT, texts)
        self.n_texts += count
        policy = {key: reader.get(key) for key in ("max_tokens", "max_length", "call")}
        policy |= {"include_special": bool(reader.get("include_special", False))}
        if policy not in self.token_policies:
            self.token_policies.append(policy)
        return self

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: Path) -> FitRecord:
        """The record `to_dict` wrote in the file `path` (a `ResultsStoreError` when fields are missing)."""
        try:
            return cls(**{name: data[name] for name in cls().to_dict()})
        except KeyError as missing:
            raise ResultsStoreError(f"{path} has a 'fit' record without {missing}: {_SAVE_AGAIN}.") from None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready record."""
        return asdict(self)


@dataclass(frozen=True)
class SavedTangent:
    """The content of ``tangent.json``: one saved tangent, and where it comes from.

    Attributes:
        method: The method name ("pca", "ica", ...; an Interpreto class's name for `from_interpreto` tangents).
        concept_class: ``module:qualname`` of the Interpreto class fitted (None for the streamed PCA).
        nb_concepts: The requested rank.
        rank: The fitted rank k (at most `nb_concepts`: dead or dependent atoms are dropped).
        dim: The width d of the split point.
        center: Whether the tangent is centred (its subspace keeps a mean).
        rtol: The orthonormalisation's relative threshold.
        seed: The seed of the iterative methods.
        method_kwargs: The keywords passed to the Interpreto method.
        split_point: The split point it was fitted at (the module path).
        model_id: The model's id or folder (`config.name_or_path`), None when unknown.
        model_revision: The model's commit on the Hub (`config._commit_hash`) or the revision given, None when unknown.
        fit: The `FitRecord` as a dict, None for a tangent fitted elsewhere (`from_interpreto`).
        package_version: The interpreto-anisotropy version that saved it.
        format: The format of this file.
        call: The call of the split-point module its texts were read at; None when unknown (or not recorded).
    """

    method: str
    concept_class: str | None
    nb_concepts: int
    rank: int
    dim: int
    center: bool
    rtol: float
    seed: int
    method_kwargs: dict[str, Any]
    split_point: str
    model_id: str | None
    model_revision: str | None
    fit: dict[str, Any] | None
    package_version: str
    format: int = FORMAT
    call: str | int | None = None

    @classmethod
    def read(cls, folder: Path) -> SavedTangent:
        """The record in `folder`'s ``tangent.json``, checked (else a `ResultsStoreError` naming the file)."""
        path = folder / TANGENT_FILE
        if not path.is_file():
            raise ResultsStoreError(f"{folder} holds no {TANGENT_FILE}: it is not a folder written by save_pretrained")
        data = parse_json(path.read_bytes(), path, error=ResultsStoreError, advice=f"Damaged: {_SAVE_AGAIN}.")
        data = data if isinstance(data, dict) else {}
        if isinstance(data.get("format"), int) and data["format"] > FORMAT:
            raise ResultsStoreError(f"{path} has format {data['format']}: upgrade interpreto-anisotropy to read it.")
        hints = typing.get_type_hints(cls)
        missing = [name for name in hints if name not in data and name != "call"]  # call: None in older files
        wrong = [name for name in hints if name in data and not isinstance(data[name], _kinds(hints[name]))]
        if missing or wrong:
            problems = f"missing {', '.join(missing) or 'none'}; of a wrong type: {', '.join(wrong) or 'none'}"
            raise ResultsStoreError(f"{path} has fields {problems}: the folder is damaged; {_SAVE_AGAIN}.")
        return cls(**{name: data[name] for name in hints if name in data})


def _kinds(hint: Any) -> tuple[type, ...]:
    """The classes a field's type hint admits (`str | None` -> (str, NoneType))."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(kind for argument in typing.get_args(hint) for kind in _kinds(argument))
    if hint is float:
        return (int, float)
    return (typing.get_origin(hint) or hint,)


def save_tangent(
    tangent: Any,
    directory: str | Path,
    *,
    model_id: str | None = None,
    model_revision: str | None = None,
    repo_id: str | None = None,
) -> Path:
    """`TangentExplainer.save_pretrained` (its Args); `repo_id` is for the model card's loading line."""
    _check_optional_str(model_id=model_id, model_revision=model_revision)
    subspace = tangent.subspace
    config = getattr(splitter_model(tangent.splitter), "config", None)
    concept, fit_record = tangent.concept_class, getattr(tangent, "fit_record", None)
    record = SavedTangent(
        method=tangent.method_name,
        concept_class=None if concept is None else f"{concept.__module__}:{concept.__qualname__}",
        nb_concepts=int(tangent.nb_concepts),
        rank=subspace.rank,
        dim=subspace.dim,
        center=bool(tangent.center),
        rtol=float(tangent.rtol),
        seed=int(tangent.seed),
        method_kwargs=dict(tangent.method_kwargs),
        split_point=str(tangent.splitter.split_point),
        model_id=model_id or getattr(config, "name_or_path", None) or None,
        model_revision=model_revision or getattr(config, "_commit_hash", None) or None,
        fit=None if fit_record is None else fit_record.to_dict(),
        package_version=__version__,
        call=subspace.call,
    )
    try:  # before anything is written
        text = json.dumps(asdict(record), indent=2, sort_keys=True) + "\n"
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"The tangent's method_kwargs are no JSON values ({error}).") from None
    folder = Path(directory)
    subspace.save(folder / SUBSPACE_FILE)
    write_atomically(folder / TANGENT_FILE, text)
    write_atomically(folder / CARD_FILE, str(_model_card(record, repo_id)))
    return folder


_CARD = Path(__file__).with_name("model_card.md.j2")  # the README.md card, a Jinja template


def _model_card(record: SavedTangent, repo_id: str | None) -> ModelCard:
    data = ModelCardData(library_name="interpreto-anisotropy", tags=["interpreto-anisotropy", "tangent-subspace"])
    if record.model_id and not Path(record.model_id).exists():
        with contextlib.suppress(HFValidationError):
            validate_repo_id(record.model_id)
            data.base_model = record.model_id
    return ModelCard.from_template(data, template_path=_CARD, r=record, repo_id=repo_id)


def check_repo_id(repo_id: Any, name: str = "repo_id") -> str:
    """A Hub repository id ("user/name"), checked with huggingface_hub's `validate_repo_id`, else our error."""
    try:
        if not isinstance(repo_id, str):
            raise HFValidationError(f"not a str: {type(repo_id).__name__}")
        validate_repo_id(repo_id)
    except HFValidationError as error:
        reason = (str(error).strip().splitlines() or ["no message"])[0][:200]
        raise InvalidInputError(f"{name} must be a Hub repo id 'user/name', got {repo_id!r} ({reason}).") from None
    return repo_id


def tangent_folder(source: str | Path, *, hub_timeout: float | None = None, **download: Any) -> Path:
    """The folder `source`, or the Hub repository `source` downloaded by `snapshot_download` through `hub.hub_call`."""
    from ..commons import hub

    path = check_folder("source", source)
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except OSError:  # a name the file system refuses (too long): no folder
        is_dir = exists = False
    if is_dir:
        return path
    if exists:
        raise ResultsStoreError(f"{path} is a file: give the folder save_pretrained wrote (it holds {TANGENT_FILE}).")
    try:
        validate_repo_id(str(source))
    except HFValidationError:
        raise ResultsStoreError(f"No folder at {str(path)[:200]!r}, and it is no Hub repository id.") from None
    files = [TANGENT_FILE, SUBSPACE_FILE, CARD_FILE]
    fetch = functools.partial(snapshot_download, str(source), allow_patterns=files, **download)
    bounded = {"timeout": hub_timeout, "error": ResultsStoreError, "verb": "download the tangent"}
    return Path(
        hub.hub_call(fetch, str(source), download.get("revision"), cache_dir=download.get("cache_dir"), **bounded)
    )


def read_saved(
    source: str | Path, *, device: Any = "cpu", hub_timeout: float | None = None, **download: Any
) -> tuple[Path, SavedTangent, Subspace]:
    """The folder of a saved tangent (see `tangent_folder`), its `SavedTangent` and its `Subspace`, checked."""
    record = SavedTangent.read(folder := tangent_folder(source, hub_timeout=hub_timeout, **download))
    try:
        subspace = Subspace.load(path := folder / SUBSPACE_FILE, device=device)
    except ResultsStoreError as error:
        raise ResultsStoreError(f"{error} The folder {folder} is damaged: {_SAVE_AGAIN}.") from error
    if (subspace.dim, subspace.rank) != (record.dim, record.rank):
        raise ResultsStoreError(f"{path} and {TANGENT_FILE} disagree on d or k: they come from different tangents.")
    return folder, record, subspace


class SharedTangent:
    """`save_pretrained` and `push_to_hub` of `TangentExplainer` (its `from_pretrained` reads what they write)."""

    def save_pretrained(
        self, save_directory: str | Path, *, model_id: str | None = None, model_revision: str | None = None
    ) -> Path:
        """Write the fitted tangent to a folder: ``tangent.json``, ``subspace.safetensors`` and a ``README.md`` card.

        Args:
            save_directory: The folder (created if needed; other files in it are left alone).
            model_id: The model's id, when its config does not say it (a model built from a config).
            model_revision: The model's revision (e.g. "step8"), instead of the commit its config records.

        Returns:
            The folder.

        Raises:
            OutOfOrderError: Before `fit`.
            InvalidInputError: A bad `save_directory`, `model_id` or `model_revision`, or method keywords not JSON.

        Examples:
            >>> tangent.save_pretrained("tangents/pythia-70m-layer3")  # doctest: +SKIP
            >>> ia.TangentExplainer.from_pretrained("tangents/pythia-70m-layer3", mwsp)  # doctest: +SKIP
            PCATangent(split_point='gpt_neox.layers.3', nb_concepts=16, method='pca', rank=16)
        """
        folder = check_folder("save_directory", save_directory)
        return save_tangent(self, folder, model_id=model_id, model_revision=model_revision)

    def push_to_hub(
        self,
        repo_id: str,
        *,
        token: str | None = None,
        private: bool | None = None,
        branch: str | None = None,
        commit_message: str | None = None,
        create_pr: bool = False,
        model_id: str | None = None,
        model_revision: str | None = None,
        hub_timeout: float | None = None,
    ) -> Any:
        """Upload the tangent's `save_pretrained` folder to a Hub repository, created if needed.

        Args:
            repo_id: The repository ("user/name").
            token: Hub token with write access (default: the one `hf auth login` stored).
            private: Make a new repository private.
            branch: The branch to commit to (default: main).
            commit_message: The commit's message.
            create_pr: Open a pull request instead of committing.
            model_id: See `save_pretrained`.
            model_revision: See `save_pretrained`.
            hub_timeout: Seconds each Hub request may wait (None: the sweep's default, 10 s); failures are retried.

        Returns:
            The commit (`huggingface_hub.CommitInfo`).

        Raises:
            InvalidInputError: An option of a wrong type or value (checked before anything is written or sent).
            ResultsStoreError: The Hub refused the repository or the commit, failed, or did not answer in time.
        """
        from ..commons import hub

        check_repo_id(repo_id)
        hub_timeout = hub.check_hub_timeout(hub_timeout)
        for name, value in (("private", private), ("create_pr", create_pr), ("token", token)):
            if value is not None and not isinstance(value, (str, bool) if name == "token" else bool):
                raise InvalidInputError(f"push_to_hub got {name}={value!r}: give a bool (token: or a str) or None.")
        _check_optional_str(branch=branch, commit_message=commit_message)
        with tempfile.TemporaryDirectory() as folder:
            save_tangent(self, folder, repo_id=repo_id, model_id=model_id, model_revision=model_revision)
            api = HfApi(token=token)
            message = commit_message or f"Tangent at {self.splitter.split_point} ({self.method_name})"

            def push() -> Any:
                api.create_repo(repo_id, private=private, exist_ok=True)
                return api.upload_folder(
                    repo_id=repo_id, folder_path=folder, revision=branch, commit_message=message, create_pr=create_pr
                )

            return hub.hub_call(
                push, repo_id, branch, timeout=hub_timeout, error=ResultsStoreError, verb="push the tangent to"
            )


def _check_optional_str(**values: Any) -> None:
    """Each named value is None or a non-empty str without NUL bytes, else our error naming it."""
    for name, value in values.items():
        if value is not None and (not isinstance(value, str) or not value or "\x00" in value):
            raise InvalidInputError(f"{name} must be a non-empty str (or None), got {value!r}.")

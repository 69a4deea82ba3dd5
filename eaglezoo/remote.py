"""Remote lint: read `config.json`, the safetensors headers (HTTP range requests) and the few small
tensors the value checks need, without downloading the weights. Every byte received is counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from .config_schema import validate_config
from .convert import read_json, target_config
from .errors import BadInput, EaglezooError, HubError, HubSilent
from .formats.base import ReadOptions
from .hub import hub_call
from .st_header import TensorRef, read_safetensors_header
from .tensors import tensor_from_bytes

if TYPE_CHECKING:
    import torch

SMALL = 4 * 1024 * 1024  # value checks fetch tensors up to this size


class RemoteCheckpoint:
    """The Checkpoint interface (refs, metadata, files, load) over HTTP range requests."""

    def __init__(self, repo: str, revision: str | None, need_weights: bool = True):
        from huggingface_hub import HfApi

        self.repo, self.revision = repo, revision
        self.bytes_read = 0
        what = f"{repo}@{revision or 'main'}"
        names = hub_call(lambda: HfApi().list_repo_files(repo, revision=revision), what)
        if "config.json" not in names:
            raise HubError(f"{what}: no config.json")
        self.config = self._json("config.json")
        weights = [n for n in names if n.endswith(".safetensors")]
        if not weights and need_weights:
            raise HubError(f"{what}: remote lint reads safetensors only (found {', '.join(names) or 'no files'})")
        self.refs: dict[str, TensorRef] = {}
        self.metadata: dict[str, str] = {}
        self.files = []
        self.weights_bytes = 0
        for name in sorted(weights):
            size = self._size(name)
            header = read_safetensors_header(lambda start, end, name=name: self._get(name, start, end - 1), size,
                                             Path(name))
            self.metadata.update(header.metadata)
            self.files.append(Path(name))
            self.weights_bytes += size
            self.refs.update(header.refs)

    def _json(self, name: str) -> dict:
        try:
            value = json.loads(self._get(name))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            raise BadInput(f"{self.repo}/{name}: not valid JSON") from None
        if not isinstance(value, dict):
            raise BadInput(f"{self.repo}/{name}: not a JSON object")
        return value

    def _url(self, name: str) -> str:
        from huggingface_hub import hf_hub_url
        return hf_hub_url(self.repo, name, revision=self.revision)

    def _request(self, name: str, method: str, headers: dict):
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        def call():
            r = get_session().request(method, self._url(name), headers={**build_hf_headers(), **headers},
                                      follow_redirects=True)
            hf_raise_for_status(r)
            return r
        return hub_call(call, f"{self.repo}/{name}")

    def _size(self, name: str) -> int:
        from huggingface_hub import get_hf_file_metadata
        meta = hub_call(lambda: get_hf_file_metadata(self._url(name)), f"{self.repo}/{name}")
        return int(meta.size)

    def _get(self, name: str, start: int | None = None, end: int | None = None) -> bytes:
        headers = {} if start is None else {"Range": f"bytes={start}-{end}"}
        data = self._request(name, "GET", headers).content
        self.bytes_read += len(data)
        return data

    def load(self, name: str) -> "torch.Tensor":
        ref = self.refs[name]
        data = bytearray(self._get(ref.file.name, ref.start, ref.end - 1)) if ref.nbytes else bytearray()
        if len(data) != ref.nbytes:
            raise BadInput(f"{ref.file.name}: tensor {name!r} is truncated on the Hub")
        return tensor_from_bytes(ref, data)

    def check_index(self) -> None:
        pass


def remote_lint(repo: str, target: str | None, revision: str | None = None, dialect: str | None = None,
                opts: ReadOptions | None = None):
    from . import formats
    from .lint import LintReport, engine_schema, lint_reading, read_tolerating_missing_aux
    from .engines import engine_support

    ckpt = RemoteCheckpoint(repo, revision)
    validate_config(ckpt.config, f"{repo}/config.json", "drafter")
    tcfg = _remote_target_config(target, ckpt) if target else None
    name = dialect or formats.detect(ckpt.config, set(ckpt.refs), ckpt.metadata)
    reading, findings = read_tolerating_missing_aux(lambda o: formats.get(name).read(ckpt.config, ckpt, o),
                                                    opts or ReadOptions())
    spec = reading.spec if reading else None
    if reading is not None:
        findings += lint_reading(reading, ckpt, tcfg, None, ckpt.config, max_value_bytes=SMALL)
    return LintReport(drafter=repo, target=target, dialect=reading.dialect if reading else name,
                      eagle_version=spec.eagle_version if spec else None, spec=spec, findings=findings,
                      engines=engine_support(spec, engine_schema(reading)) if spec else [],
                      bytes_read=ckpt.bytes_read, weights_bytes=ckpt.weights_bytes)


def _remote_target_config(target: str, ckpt: RemoteCheckpoint) -> dict:
    path = Path(target)
    if path.is_dir():
        return target_config(path)
    from huggingface_hub import hf_hub_download
    local = hub_call(lambda: hf_hub_download(target, "config.json"), f"{target}/config.json")
    ckpt.bytes_read += Path(local).stat().st_size
    cfg = validate_config(read_json(Path(local), f"target config of {target}"), f"{target}/config.json", "target")
    return cfg.get("text_config") or cfg


def check_online(entry) -> dict:
    """Remote lint of a registry entry, plus the registry's facts against the published config."""
    problems: list[str] = []
    if not entry.drafter.repo:
        return {"problems": [], "skipped": "not published on the Hub"}
    try:
        report = remote_lint(entry.drafter.repo, entry.target.repo, entry.drafter.revision, entry.dialect)
    except HubSilent:  # the next entry would wait as long: the command stops
        raise
    except EaglezooError as exc:
        return {"problems": [f"online: {exc.message}"]}
    problems += [f"lint {f.code}: {f.message}" for f in report.errors]
    spec = report.spec
    if spec is not None:
        facts = {"draft_vocab_size": spec.draft_vocab_size, "target_vocab_size": spec.vocab_size,
                 "hidden_size": spec.hidden_size, "eagle_version": spec.eagle_version}
        for key, actual in facts.items():
            stated = getattr(entry, key)
            if stated is not None and stated != actual:
                problems.append(f"registry says {key}={stated}, the published config says {actual}")
        if entry.aux_layers.ids and spec.aux and entry.aux_layers.convention:
            from .spec import AuxLayers
            stated = AuxLayers(ids=tuple(entry.aux_layers.ids), convention=entry.aux_layers.convention).boundary()
            if stated != spec.aux.boundary():
                problems.append(f"registry aux ids select boundary {stated}, the published config {spec.aux.boundary()}")
    return {"problems": problems, "bytes_read": report.bytes_read, "weights_bytes": report.weights_bytes,
            "findings": [f.model_dump() for f in report.findings]}

"""Remote lint: read `config.json`, the safetensors headers (HTTP range requests) and the few small
tensors the value checks need, without downloading the weights. Every byte received is counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..checkpoint.config import target_config, validate_config
from ..checkpoint.st_header import TensorRef, read_safetensors_header
from ..checkpoint.tensors import tensor_from_bytes
from ..errors import BadInput, HubError
from ..fsutil import read_json
from .client import hub_call

if TYPE_CHECKING:
    import torch


class RemoteCheckpoint:
    """The Checkpoint interface (refs, metadata, files, load) over HTTP range requests."""

    def __init__(self, repo: str, revision: str | None, need_weights: bool = True):
        from huggingface_hub import HfApi

        self.repo, self.revision = repo, revision
        self.bytes_read = 0
        what = f"{repo}@{revision or 'main'}"
        names = hub_call(lambda: HfApi().list_repo_files(repo, revision=revision), what)
        if "config.json" not in names:
            raise HubError(
                f"{what}: no config.json", hint="give the drafter's repo (with its config.json), or check --revision"
            )
        self.config = self._json("config.json")
        weights = [n for n in names if n.endswith(".safetensors")]
        if not weights and need_weights:
            raise HubError(
                f"{what}: remote lint reads safetensors only (found {', '.join(names) or 'no files'})",
                hint="pull it and lint the folder: eaglezoo pull REPO --local-dir DIR; eaglezoo lint DIR",
            )
        self.refs: dict[str, TensorRef] = {}
        self.metadata: dict[str, str] = {}
        self.files = []
        self.weights_bytes = 0
        for name in sorted(weights):
            size = self._size(name)
            header = read_safetensors_header(
                lambda start, end, name=name: self._get(name, start, end - 1), size, Path(name)
            )
            self.metadata.update(header.metadata)
            self.files.append(Path(name))
            self.weights_bytes += size
            self.refs.update(header.refs)

    def _json(self, name: str) -> dict:
        try:
            value = json.loads(self._get(name))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            raise BadInput(
                f"{self.repo}/{name}: not valid JSON", hint="the repo's file is broken: tell its publisher"
            ) from None
        if not isinstance(value, dict):
            raise BadInput(
                f"{self.repo}/{name}: not a JSON object", hint="the repo's file is broken: tell its publisher"
            )
        return value

    def _url(self, name: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo, name, revision=self.revision)

    def _request(self, name: str, method: str, headers: dict):
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        def call():
            r = get_session().request(
                method, self._url(name), headers={**build_hf_headers(), **headers}, follow_redirects=True
            )
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
            raise BadInput(
                f"{ref.file.name}: tensor {name!r} is truncated on the Hub",
                hint="the repo's file is broken: tell its publisher",
            )
        return tensor_from_bytes(ref, data)

    def check_index(self) -> None:
        pass


def remote_target_config(target: str, ckpt: RemoteCheckpoint) -> dict:
    path = Path(target)
    if path.is_dir():
        return target_config(path)
    from huggingface_hub import hf_hub_download

    local = hub_call(lambda: hf_hub_download(target, "config.json"), f"{target}/config.json")
    ckpt.bytes_read += Path(local).stat().st_size
    cfg = validate_config(read_json(Path(local), f"target config of {target}"), f"{target}/config.json", "target")
    return cfg.get("text_config") or cfg

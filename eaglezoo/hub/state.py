"""What the Hub holds for one repo at one commit: the commit sha, each file's sha256 and size, the
card's licence. LFS files carry their sha256 (the LFS oid) in the listing; the few small regular
files (config.json, tokenizer files) are downloaded and hashed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..fsutil import sha256_file
from .client import hub_call

UNHASHED = ("README.md", ".gitattributes")  # the card and git plumbing change without the drafter changing


@dataclass
class HubFile:
    size: int | None
    lfs_sha256: str | None


@dataclass
class Snapshot:
    repo: str
    sha: str
    files: dict[str, HubFile]
    licence: str | None

    @property
    def at(self) -> str:
        return f"{self.repo}@{self.sha}"

    def sha256(self, name: str) -> str:
        """The file's sha256: from the listing for LFS files, else by downloading it (small files)."""
        f = self.files[name]
        if f.lfs_sha256:
            return f.lfs_sha256
        from huggingface_hub import hf_hub_download

        local = hub_call(lambda: hf_hub_download(self.repo, name, revision=self.sha), f"{self.at}/{name}")
        return sha256_file(Path(local))

    def hashes(self) -> dict[str, str]:
        return {name: self.sha256(name) for name in sorted(self.files) if name not in UNHASHED}


def snapshot(repo: str, revision: str | None) -> Snapshot:
    from huggingface_hub import HfApi

    info = hub_call(
        lambda: HfApi().model_info(repo, revision=revision, files_metadata=True), f"{repo}@{revision or 'main'}"
    )
    files = {s.rfilename: HubFile(s.size, s.lfs.sha256 if s.lfs else None) for s in info.siblings or []}
    card = info.card_data.to_dict() if info.card_data else {}
    licence = card.get("license")
    return Snapshot(repo, info.sha, files, str(licence) if licence else None)

"""`eaglezoo pull` and `eaglezoo push`. Parses and renders, nothing more."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import UsageError
from .common import JsonOpt, RegistryOpt, RevisionOpt, app, emit, human_bytes, out

if TYPE_CHECKING:
    from ..hub.pull import Pulled


@app.command()
def pull(
    source: Annotated[
        str, typer.Argument(metavar="DRAFTER", help="Registry id (pinned revision and hashes) or Hub repo id.")
    ],
    revision: RevisionOpt = None,
    local_dir: Annotated[
        Optional[Path],
        typer.Option(metavar="DIR", help="Download here instead of the cache (only verified files land here)."),
    ] = None,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """Download a drafter, its files checked against their sha256.

    Example: eaglezoo pull nvidia-gpt-oss-120b-eagle3-v3 --local-dir gpt-oss-drafter

    The hashes come from the registry entry, else from the drafter's conversion.json."""

    result = pull_source(source, revision=revision, local_dir=local_dir, registry_dir=registry_dir)
    data = {
        "repo": result.repo,
        "revision": result.revision,
        "commit": result.commit,
        "path": str(result.path),
        "registry_id": result.registry_id,
        "sha256_verified": result.verified,
    }

    def render():
        out.print(
            f"{result.repo}@{result.revision or 'main'}" + (f" ({result.commit})" if result.commit else ""),
            markup=False,
        )
        out.print(str(result.path), markup=False)
        if result.verified:
            out.print(f"[green]sha256 verified[/green]: {', '.join(result.verified)}")
        else:
            out.print("[yellow]no sha256 to verify against[/yellow] (no registry hashes, no conversion.json)")

    emit(data, as_json, render)


@app.command()
def push(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A converted drafter folder.")],
    repo: Annotated[str, typer.Argument(metavar="REPO", help="Hub repo id (owner/name).")],
    revision: Annotated[str, typer.Option(metavar="BRANCH", help="Branch to push to (created when missing).")] = "main",
    private: Annotated[bool, typer.Option(help="Create the repo private.")] = False,
    create_pr: Annotated[bool, typer.Option("--create-pr", help="Open a pull request instead of committing.")] = False,
    report: Annotated[
        Optional[Path], typer.Option(metavar="FILE", help="A verify JSON report for the card's acceptance table.")
    ] = None,
    target: Annotated[
        Optional[str], typer.Option(metavar="REPO", help="Target repo id for the card (base_model).")
    ] = None,
    tag: Annotated[
        Optional[str], typer.Option(metavar="TAG", help="Tag the pushed commit (refused before pushing if it exists).")
    ] = None,
    include: Annotated[
        Optional[list[str]],
        typer.Option(
            metavar="PATTERN", help="Upload only files matching (repeatable; a pattern naming a hidden path admits it)."
        ),
    ] = None,
    exclude: Annotated[
        Optional[list[str]], typer.Option(metavar="PATTERN", help="Do not upload files matching (repeatable).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be uploaded and its size; contact nothing.")
    ] = False,
    as_json: JsonOpt = False,
):
    """Upload a converted drafter with a generated model card.

    Example: eaglezoo push tiny-eagle31 me/tiny-eagle31 --dry-run

    Exactly the drafter: regular files inside DIR, no hidden files, no symlinks leaving it.
    Unchanged content makes no new commit.
    --dry-run lists the files and prints the card, contacting nothing."""
    from ..hub.push import PushRequest, check_names
    from ..hub.push import push as hub_push

    check_names(repo, revision, tag)  # before the report is read: the cheapest refusal first
    loaded = None
    if report:  # the card's figures: pages load matplotlib, the registry its entries, only for a report
        from ..pages import card_acceptance
        from ..registry import load as registry
        from ..registry.ci import beside_registry
        from ..verify.saved import read_report

        verified = read_report(report, "--report", needs="the model card")
        beside = beside_registry(verified, registry.layered().entries)  # the published figures it stands beside
        loaded = dataclasses.replace(card_acceptance(verified), comparison=beside)
    request = PushRequest(
        folder,
        repo,
        revision=revision,
        private=private,
        create_pr=create_pr,
        report=loaded,
        target=target,
        tag=tag,
        include=include,
        exclude=exclude,
        dry_run=dry_run,
    )
    result = hub_push(request)
    files = [{"path": f.path_in_repo, "size": f.size} for f in result.files]
    data = {
        "repo": result.repo,
        "revision": result.revision,
        "commit": result.commit,
        "dry_run": result.dry_run,
        "created_commit": result.created_commit,
        "pull_request": result.pull_request,
        "files": files,
        "bytes": sum(f.size for f in result.files),
        "tag": tag,
        **({"card": result.card} if dry_run else {}),
    }
    emit(data, as_json, lambda: render_push(result, tag))


def render_push(result, tag) -> None:
    total = human_bytes(sum(f.size for f in result.files))
    if result.dry_run:
        for f in result.files:
            out.print(f"{human_bytes(f.size):>10}  {f.path_in_repo}", markup=False)
        out.print(
            f"dry run: {len(result.files)} files, {total} would be uploaded to {result.repo}@{result.revision}",
            markup=False,
        )
        out.print("\nthe model card it would publish (README.md):\n", markup=False)
        out.print(result.card, markup=False)
        return
    if result.created_commit:
        out.print(
            f"[green]pushed[/green] {len(result.files)} files ({total}) to {result.repo}@{result.revision} "
            f"({result.commit})"
        )
    else:
        out.print(f"{result.repo}@{result.revision} already holds this content: no new commit")
    if result.pull_request:
        out.print(f"pull request: {result.pull_request}")
    if tag:
        out.print(f"tagged {tag}")


def pull_source(
    arg: str, revision: str | None = None, local_dir: Path | None = None, registry_dir: Path | None = None
) -> Pulled:
    """`eaglezoo pull ID|REPO`: a registry id pulls the entry's pinned revision and checks its hashes."""
    from ..hub.pull import pull
    from .sources import classify

    if classify(arg) != "registry":
        return pull(arg, revision, local_dir)
    from ..registry.load import lookup

    entry, _ = lookup(arg, registry_dir)
    if not entry.drafter.repo:
        raise UsageError(
            f"registry entry {entry.id} is not published on the Hub (it lives in {entry.drafter.path})",
            hint="lint or verify it where it lives, or push it first (eaglezoo push)",
        )
    pulled = pull(entry.drafter.repo, revision or entry.drafter.revision, local_dir, dict(entry.files))
    pulled.registry_id = entry.id
    return pulled

"""Publishing to the local Hub server (support/fakehub.py) with the real client, outside eaglezoo."""

from __future__ import annotations


def publish_folder(hub, repo: str, folder) -> str:
    import os
    import subprocess
    import sys

    code = (
        "import sys; from huggingface_hub import HfApi; api = HfApi(); api.create_repo(sys.argv[1], exist_ok=True); "
        "print(api.upload_folder(folder_path=sys.argv[2], repo_id=sys.argv[1]).oid)"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, repo, str(folder)],
        env={**os.environ, **hub[1]},
        capture_output=True,
        text=True,
        check=True,
    )
    return p.stdout.strip().splitlines()[-1]

"""The one build step pyproject.toml cannot state: the repository's registry/ (entries and their saved
reports) is copied into the package as eaglezoo/zoo/registry, so a wheel carries the registry it was built
with, and the embedded example its entries name (examples/tiny, 6 MB) as eaglezoo/zoo/examples/tiny, so the
README's Quick start runs from the wheel. registry/ stays at the repository's root, where maintainers edit it and
CI checks it; an editable install reads it there (eaglezoo/registry/shipped.py)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SHIPPED = ("*.yaml", "reports/*.json")  # the entries and the reports they name (status.report, measured)
EXAMPLE = Path("examples") / "tiny"  # the registry's tiny-example-* entries name it, relative to the copy's root


class BuildWithRegistry(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return  # an editable install reads the checkout's registry/ itself
        zoo = Path(self.build_lib) / "eaglezoo" / "zoo"
        shutil.rmtree(zoo, ignore_errors=True)
        files = [p for pattern in SHIPPED for p in sorted((HERE / "registry").glob(pattern))]
        if not any(p.suffix == ".yaml" for p in files):
            raise SystemExit("setup.py: registry/*.yaml not found: build from the repository or its sdist")
        example = [p for p in sorted((HERE / EXAMPLE).rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
        if not example:
            raise SystemExit(f"setup.py: {EXAMPLE} not found: build from the repository or its sdist")
        for path in [*files, *example]:
            target = zoo / path.relative_to(HERE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


setup(cmdclass={"build_py": BuildWithRegistry})

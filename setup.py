"""The one build step pyproject.toml cannot state: the repository's registry/ (entries and their saved
reports) is copied into the package as eaglezoo/zoo/registry, so a wheel carries the registry it was built
with. registry/ stays at the repository's root, where maintainers edit it and CI checks it; an editable
install reads it there (eaglezoo/registry/shipped.py)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SHIPPED = ("*.yaml", "reports/*.json")  # the entries and the reports they name (status.report, measured)


class BuildWithRegistry(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return  # an editable install reads the checkout's registry/ itself
        dest = Path(self.build_lib) / "eaglezoo" / "zoo" / "registry"
        shutil.rmtree(dest, ignore_errors=True)
        files = [p for pattern in SHIPPED for p in sorted((HERE / "registry").glob(pattern))]
        if not any(p.suffix == ".yaml" for p in files):
            raise SystemExit("setup.py: registry/*.yaml not found: build from the repository or its sdist")
        for path in files:
            target = dest / path.relative_to(HERE / "registry")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


setup(cmdclass={"build_py": BuildWithRegistry})

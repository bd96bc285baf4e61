"""How a built capsviz finds its packages: every folder under capsviz/ with an `__init__.py` (a new
model family's folder among them), beside the app's top level that pyproject.toml maps in as
`capsviz._app`. setuptools reads either a list of packages or a search, never both, and a search
cannot name the mapped ones, so pyproject.toml lists those and this adds the rest."""

from setuptools import find_packages
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    """setuptools' build_py, with every package under capsviz/ added to the ones pyproject.toml lists."""

    def finalize_options(self):
        super().finalize_options()
        found = [f"capsviz.{name}" for name in find_packages("capsviz", exclude=["_app", "_app.*"])]
        self.packages = list(dict.fromkeys([*(self.packages or []), *found]))

"""The type checker over the whole product, as it imports: the repository's folders are mapped into `modelship.*`
(pyproject.toml's package-dir), which mypy cannot follow, so a folder of symbolic links lays them out as the
installed package, mypy checks that, and every path it reports is mapped back to the repository's own.

    python .ci/typecheck.py          (make test runs it; the settings are pyproject.toml's [tool.mypy])
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    with tempfile.TemporaryDirectory(prefix="modelship-typecheck-") as temp:
        farm = Path(temp) / "modelship"
        farm.mkdir()
        for child in (ROOT / mapping["modelship"]).iterdir():
            if child.name != "__pycache__":
                (farm / child.name).symlink_to(child)
        links = {f"modelship/{package.split('.', 1)[1]}/": f"{folder}/" for package, folder in mapping.items()
                 if "." in package}  # fmt: skip
        for package, folder in mapping.items():
            if "." in package:
                (farm / package.split(".", 1)[1]).symlink_to(ROOT / folder)
        config = ["--config-file", str(ROOT / "pyproject.toml")]
        done = subprocess.run([sys.executable, "-m", "mypy", *config, "-p", "modelship"], cwd=temp,
                              capture_output=True, text=True)  # fmt: skip
    for line in (done.stdout + done.stderr).splitlines():
        for prefix, folder in sorted(links.items(), key=lambda item: -len(item[0])):
            if line.startswith(prefix):
                line = folder + line[len(prefix) :]
                break
        print(line)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())

"""The `tritonserver` of the nvidia-pytriton wheel (Triton 2.51) and a backend directory that serves standard
repositories with it.

`nvidia-pytriton` ships the `tritonserver` binary, its libraries and the Python backend, but no native ONNX Runtime
or LibTorch backend. `backend_directory()` assembles one that serves standard repositories anyway: Triton maps
`platform: "onnxruntime_onnx"` to a backend named `onnxruntime` and `pytorch_libtorch` to `pytorch`, and a folder
`<backend-directory>/<name>/model.py` is a Python-based backend of that name. So the directory holds

    python/       libtriton_python.so, triton_python_backend_utils.py, triton_python_backend_stub  (real copies)
    onnxruntime/  model.py (+ modelship_backend.py)   runs model.onnx with onnxruntime
    pytorch/      model.py (+ modelship_backend.py)   runs model.pt with torch.jit.load
    stub-python/  bin/python3, pyvenv.cfg, a .pth   the stubs' interpreter: these packages, no bytecode written
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from modelship.contract.errors import ServeError
from modelship.serve.vendoring import local_modules

BACKENDS_SOURCE = Path(__file__).parent / "backends"
PYTHON_BACKEND_NAMES = ("onnxruntime", "pytorch")
# The stubs' Python: an isolated interpreter (PYTHON* variables ignored) that finds its prefix through PATH. A
# virtual environment of its own in the backend directory, on this interpreter with this environment's packages,
# starts it with bytecode writing off, so the stubs import model.py from the repository (the publisher's) without
# writing __pycache__ into it.
STUB_ENV = "stub-python"
STUB_SITE = "import sys; sys.dont_write_bytecode = True\nimport site; site.addsitedir({site_packages!r})\n"


@dataclass(frozen=True)
class TritonInstall:
    """Where nvidia-pytriton put the server binary, its shared libraries and the Python backend."""

    binary: Path
    libs: Path
    python_backend: Path
    stub: Path
    version: str

    @classmethod
    def find(cls) -> TritonInstall:
        try:
            import pytriton
        except ImportError:
            raise ServeError(
                "nvidia-pytriton is not installed: no tritonserver binary",
                hint="pip install nvidia-pytriton==0.7.0, or run a stock tritonserver container",
            ) from None
        root = Path(pytriton.__file__).parent / "tritonserver"
        py = f"{sys.version_info.major}.{sys.version_info.minor}"
        install = cls(
            binary=root / "bin" / "tritonserver",
            libs=Path(pytriton.__file__).parent.parent / "nvidia_pytriton.libs",
            python_backend=root / "backends" / "python",
            stub=root / "python_backend_stubs" / py / "triton_python_backend_stub",
            version=metadata.version("nvidia-pytriton"),
        )
        missing = [p for p in (install.binary, install.python_backend, install.stub) if not p.exists()]
        if missing:
            raise ServeError(f"nvidia-pytriton install is incomplete, missing {missing[0]}", hint=f"Python {py}?")
        return install


def backend_directory(cache: Path | None = None) -> Path:
    """The assembled backend directory, built once per (pytriton, Python, backend sources) and reused.

    Built in a temporary folder and renamed into place, so concurrent servers never see a half-built one.
    """
    install = TritonInstall.find()
    sources = sorted(p for p in BACKENDS_SOURCE.rglob("*.py") if "__pycache__" not in p.parts)
    key = hashlib.sha256(f"{install.version}|{sys.version}|{sys.executable}|{STUB_SITE}".encode())
    for path in sources:
        key.update(path.read_bytes())
    cache = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "modelship" / "backends"
    target = cache / key.hexdigest()[:16]
    if target.is_dir():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=cache))
    python_dir = staging / "python"
    python_dir.mkdir()
    shutil.copy2(install.python_backend / "libtriton_python.so", python_dir)  # a copy: symlinks "escape" the dir
    shutil.copy2(install.python_backend / "triton_python_backend_utils.py", python_dir)
    shutil.copy2(install.stub, python_dir / "triton_python_backend_stub")
    _stub_interpreter(staging / STUB_ENV)
    for backend in PYTHON_BACKEND_NAMES:
        (staging / backend).mkdir()
        model = BACKENDS_SOURCE / backend / "model.py"
        for source in (model, *local_modules(model, (model.parent, BACKENDS_SOURCE))):
            shutil.copy2(source, staging / backend / source.name)
    try:
        staging.rename(target)
    except OSError:  # another process won the race; its copy is identical
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _stub_interpreter(folder: Path) -> None:
    """A virtual environment for the stubs (STUB_ENV): bin/python3 is this interpreter, and a .pth file turns
    bytecode writing off and adds this environment's site-packages (with their own .pth files)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    base = Path(getattr(sys, "_base_executable", sys.executable))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for name in ("python", "python3", version):
        (bin_dir / name).symlink_to(base)
    (folder / "pyvenv.cfg").write_text(
        f"home = {base.parent}\ninclude-system-site-packages = false\nversion = {platform.python_version()}\n"
    )
    site_dir = folder / "lib" / version / "site-packages"
    site_dir.mkdir(parents=True)
    (site_dir / "modelship_stub.pth").write_text(STUB_SITE.format(site_packages=sysconfig.get_paths()["purelib"]))


def interpreter_library_path(*extra: str) -> str:
    """LD_LIBRARY_PATH with this interpreter's libpython folder first, then `extra` and the inherited value: a
    Python-backend stub links libpython3.X and must load this interpreter's, not the system's (another patch
    release under this interpreter's standard library)."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    return os.pathsep.join(p for p in (libdir, *extra, os.environ.get("LD_LIBRARY_PATH")) if p)


def server_environment(install: TritonInstall, backends: Path) -> dict[str, str]:
    """PATH and LD_LIBRARY_PATH so the Python stub runs this interpreter and its packages, through the backend
    directory's stub environment (see the module doc)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(backends / STUB_ENV / "bin"), env.get("PATH", "")])
    env["LD_LIBRARY_PATH"] = interpreter_library_path(str(install.libs))
    return env

"""The C++ driver under test, built once per session into build/cpp (or $GATES_CPP_BUILD_DIR), incrementally;
$GATES_CPP_DRIVER names a driver built elsewhere instead. Without cmake, a C++ compiler or the nlohmann-json headers
the tests are skipped with the reason; CI installs them."""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from _vllm_gates.wire.channel import PROTOCOL_VERSION
from tests.drivers.wire_v2 import Worker

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "drivers" / "cpp"


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


@pytest.fixture(scope="session")
def driver() -> Path:
    """The built driver; the build runs once per session (cmake's own incremental build)."""
    if os.environ.get("GATES_CPP_DRIVER"):  # a driver built elsewhere (a sanitizer build, say): used as it is
        return Path(os.environ["GATES_CPP_DRIVER"])
    return build_driver(Path(os.environ.get("GATES_CPP_BUILD_DIR", ROOT / "build" / "cpp")))


def build_driver(build: Path, cxxflags: str | None = None) -> Path:
    """The driver built incrementally into ``build`` (with GATES_CPP_CXXFLAGS=``cxxflags`` when given: a planted
    defect's folder of its own), under the folder's lock; a skip or a failure naming what went wrong."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed (needed to build drivers/cpp)")
    if _compiler() is None:
        pytest.skip("no C++ compiler found (c++, g++, clang++ or $CXX)")
    build.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ) if cxxflags is None else {**os.environ, "GATES_CPP_CXXFLAGS": cxxflags}
    # xdist workers share the build folder: one at a time, or one relinks the driver while another runs it
    with open(build.parent / f"{build.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _configure_and_build(build, env)


def _configure_and_build(build: Path, env: dict[str, str]) -> Path:
    """cmake configure and an incremental build into ``build``; a skip or a failure naming what went wrong."""
    configure = subprocess.run(["cmake", "-S", str(SOURCE), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"],
                               capture_output=True, text=True, env=env)
    if configure.returncode != 0:
        if "nlohmann_json" in configure.stdout + configure.stderr:
            pytest.skip("the nlohmann-json headers are not installed (Debian: nlohmann-json3-dev)")
        pytest.fail(f"cmake configure failed:\n{configure.stdout[-3000:]}\n{configure.stderr[-3000:]}")
    built = subprocess.run(["cmake", "--build", str(build), "-j2"], capture_output=True, text=True, env=env)
    if built.returncode != 0:
        pytest.fail(f"the C++ driver does not build:\n{built.stdout[-4000:]}\n{built.stderr[-3000:]}")
    return build / "vllm-gates-cpp"


@pytest.fixture
def v2_worker(driver: Path, tmp_path: Path) -> Iterator[Worker]:
    """The driver spoken to in hand-made version 2 frames (wire_v2.py), before its hello."""
    started = Worker(driver, tmp_path / "worker.log", ROOT)
    yield started
    started.close()


@pytest.fixture
def v2_ready(v2_worker: Worker) -> Worker:
    """The same after a hello it accepted (the version the judge speaks: the driver's must be the same)."""
    reply = v2_worker.hello(PROTOCOL_VERSION)
    assert reply["op"] == "ready", reply
    return v2_worker

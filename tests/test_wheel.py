"""A plain install works: the wheel built from this repository, installed into a fresh
virtual environment outside it, runs the oracle and carries its golden vectors.

Built from a copy of the tracked files (so the build leaves nothing in the checkout),
installed with no extras: the proofs' solvers (the ``proofs`` extra) are not there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _copy_tracked(dest: Path) -> None:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout.decode()
        names = [n for n in listed.split("\0") if n]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: the tree as is
        skip = {".venv", ".git", "build", "dist", "site", ".hypothesis", ".mypy_cache"}
        names = [
            str(p.relative_to(ROOT))
            for p in ROOT.rglob("*")
            if not (set(p.relative_to(ROOT).parts) & skip) and (p.is_file() or p.is_symlink())
        ]
    for name in names:
        src, dst = ROOT / name, dest / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        elif src.is_file():
            shutil.copy2(src, dst)


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_wheel_installs_and_runs_outside_the_repository(tmp_path: Path) -> None:
    src, dist, venv, work = (tmp_path / d for d in ("src", "dist", "venv", "work"))
    work.mkdir()
    _copy_tracked(src)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", str(src), "-w", str(dist)],
                 tmp_path, env)  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("kvpool-*.whl")

    # A fresh environment; this interpreter's pip installs into it (no ensurepip run).
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    installed = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", str(wheel)],
        tmp_path,
        env,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

    kvpool = str(venv / "bin" / "kvpool")
    where = _run([str(python), "-c", "import kvpool; print(kvpool.__file__)"], work, env)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr
    no_z3 = _run([str(python), "-c", "import z3"], work, env)
    assert no_z3.returncode != 0, "z3 belongs to the proofs extra, not a plain install"

    for args, needle in (
        (["--help"], "conform"),
        (["--version"], "0."),
        (["conform", "--target", "reference", "--examples", "5", "--steps", "5"], "conforms"),
        (["vectors", "check"], "all vectors match"),
        (["vectors", "run", "--target", "reference"], "vectors run pass on reference"),
    ):
        done = _run([kvpool, *args], work, env)
        assert done.returncode == 0, f"kvpool {' '.join(args)}:\n{done.stdout}{done.stderr}"
        assert needle in done.stdout, done.stdout

    # Ready to publish: the metadata a registry shows, with the one version and the licence.
    meta = _run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, kvpool; d = m.distribution('kvpool');"
            "print(d.version == kvpool.__version__, d.metadata['License-Expression'],"
            " [f.name for f in d.files if f.name == 'LICENSE'], d.metadata['Summary'] != '')",
        ],
        work,
        env,
    )
    assert meta.stdout.split() == ["True", "Apache-2.0", "['LICENSE']", "True"], (
        meta.stdout + meta.stderr
    )

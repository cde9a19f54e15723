"""Every runtime dependency's wheel for one Python and platform, for a node without a package
index (``make wheelhouse``; docs/install.md, "Offline install").

pip resolves setup.cfg's install_requires, and pytest (gpu-check runs the CUDA tests), for the
target (``pip install --dry-run --report``: metadata only), then downloads the closure, pinned
as resolved, with ``--no-deps``. torch is resolved (lhotse needs one) but left out with what
only it needs, unless ``--torch REQ`` names the build to ship (a CUDA image brings its own
torch; PyPI's Linux torch is the CUDA build, GBs of nvidia-* wheels). ``--no-mpich`` leaves out
the MPICH wheel for an image with its own MPI (mpi4py's wheel loads either). Our own wheel is
``pip wheel --no-deps .`` (the Makefile), built for this machine's CPython; pyproject.toml's
build requirements (setuptools, pybind11) are carried too, so that a node of another CPython can
build asrdist from its source (its compiled lattice determinizer) without an index.
"""

from __future__ import annotations

import argparse
import configparser
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # CPython 3.10: pip's own copy of tomli
    from pip._vendor import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def requirements() -> list[Requirement]:
    """setup.cfg's runtime requirements, and its test extra's but the linter (gpu-check runs
    ``pytest -m cuda``)."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    lines = [*cfg["options"]["install_requires"].splitlines(),
             *cfg["options.extras_require"]["test"].splitlines()]
    found = [Requirement(text) for text in (line.split("#")[0].strip() for line in lines) if text]
    return [r for r in found if canonicalize_name(r.name) != "ruff"]


def build_requirements() -> list[str]:
    """pyproject.toml's build-system requires (pip builds asrdist from source with them)."""
    with open(REPO / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["build-system"]["requires"])


MACHINES = ("x86_64", "aarch64", "ppc64le", "s390x", "i686")
LEGACY = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}  # glibc 2.N


def platforms(tag: str) -> list[str]:
    """The tags a node of platform ``tag`` installs: pip's --platform takes only the tags it is
    given, so manylinux_2_28_x86_64 becomes every manylinux tag of glibc 2.28 and older."""
    match = re.fullmatch(r"manylinux_2_(\d+)_(\w+)|(manylinux\d+)_(\w+)", tag)
    if match is None:
        return [tag]
    glibc = int(match[1]) if match[1] else LEGACY[match[3]]
    machine = match[2] or match[4]
    return [*(f"manylinux_2_{n}_{machine}" for n in range(glibc, 4, -1)),
            *(f"{name}_{machine}" for name, n in LEGACY.items() if n <= glibc)]


def marker_env(python: str, platform: str) -> dict[str, str]:
    """The environment markers of CPython ``python`` (e.g. 312) on a Linux ``platform`` tag."""
    machine = next((m for m in MACHINES if platform.endswith(m)), None)
    if machine is None:
        raise SystemExit(f"wheelhouse: --platform {platform}: not a Linux tag ending in one of "
                         f"{', '.join(MACHINES)}")
    version = f"{python[0]}.{python[1:]}"
    return {"python_version": version, "python_full_version": f"{version}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
            "platform_machine": machine, "extra": ""}


def resolve(requirements: list[str], pip_target: list[str]) -> dict[str, dict]:
    """pip's resolution of ``requirements`` for the target: name -> its report item."""
    with tempfile.TemporaryDirectory(prefix="asrdist-wheelhouse-") as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
                        "--ignore-installed", "--target", str(Path(tmp) / "t"), "--report",
                        str(report), *pip_target, *requirements], check=True)
        items = json.loads(report.read_text())["install"]
    return {canonicalize_name(i["metadata"]["name"]): i for i in items}


def closure(roots: list[Requirement], resolved: dict[str, dict], env: dict[str, str],
            leave_out: set[str]) -> list[str]:
    """``name==version`` of the roots and everything they need (extras included) for ``env``,
    walking the resolved metadata, never through ``leave_out``."""
    extras: dict[str, set[str]] = {}
    todo = [r for r in roots if r.marker is None or r.marker.evaluate(env)]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in leave_out or name in extras and req.extras <= extras[name]:
            continue
        extras[name] = extras.get(name, set()) | req.extras
        for text in resolved[name]["metadata"].get("requires_dist", []):
            dep = Requirement(text)
            if dep.marker is None or any(dep.marker.evaluate(env | {"extra": e})
                                         for e in ("", *extras[name])):
                todo.append(dep)
    return sorted(f"{resolved[n]['metadata']['name']}=={resolved[n]['metadata']['version']}"
                  for n in extras)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, required=True, help="the wheelhouse directory")
    ap.add_argument("--python-version", required=True, help="e.g. 312 for CPython 3.12")
    ap.add_argument("--platform", action="append", required=True,
                    help="the node's wheel platform tag, e.g. manylinux_2_28_x86_64 (its glibc "
                    "2.28; older manylinux tags are added; repeatable)")
    ap.add_argument("--torch", default="", help="the torch to ship, e.g. torch==2.13.0+cpu "
                    "(default: none, the node's own)")
    ap.add_argument("--no-mpich", action="store_true", help="leave out the MPICH wheel")
    args = ap.parse_args()
    if not args.python_version.isdigit() or len(args.python_version) < 2:
        ap.error(f"--python-version {args.python_version}: give digits such as 312")
    tags = dict.fromkeys(t for p in args.platform for t in platforms(p))
    pip_target = ["--only-binary=:all:", "--python-version", args.python_version,
                  *[f"--platform={t}" for t in tags]]
    roots = [r for r in requirements()
             if canonicalize_name(r.name) not in ({"torch", "mpich"} if args.no_mpich
                                                  else {"torch"})]
    torch = [args.torch] if args.torch else [
        str(r) for r in requirements() if canonicalize_name(r.name) == "torch"]
    resolved = resolve([*map(str, roots), *torch], pip_target)
    if args.torch:
        roots.append(Requirement(args.torch))
    wanted = closure(roots, resolved, marker_env(args.python_version, args.platform[0]),
                     set() if args.torch else {"torch"})
    args.dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--dest", str(args.dest), *pip_target, *wanted, *build_requirements()],
                   check=True)
    print(f"{args.dest}: {len(wanted)} wheels for CPython {args.python_version} "
          f"({', '.join(args.platform)}): {' '.join(wanted)}")


if __name__ == "__main__":
    main()

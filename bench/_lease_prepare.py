"""`bench/gpu_rehearsal.py --prepare DIR`: on the CPU machine, the wheels a bare GPU lease needs.

The lent GPU machines start bare from an image that holds Python 3.12, a CUDA build of torch,
triton and many common packages (GPU_IMAGE below, as the workplace's device notes list them,
read 2026-11-17) and reach no registry: whatever else the rehearsal imports travels with the
working tree as wheels (64 MiB for the tree and the wheels together). This downloads, for
CPython 3.12 on manylinux x86-64, the project's requirements (its dependencies and the
`fused`, `bench`, `deepspeed` and `qlora` extras) that the image lacks or holds at a version
the project does not accept, then what those wheels require in turn, never the image's GPU
stack (NEVER: torch, triton, the NVIDIA and CUDA libraries, which would also be gigabytes).
A package without a binary wheel is built here when it is pure Python (`pip wheel`), else
listed as missing. OPTIONAL packages are dropped, and said so, when they would take the
wheels past --max-mib. It writes DIR/prepare.json (what was fetched, sizes, what was not and
why) and DIR/lease.sh, the lease's one command: install the wheels into /tmp/site, run
`gpu_rehearsal.py --lease` into /tmp/lease, and copy its records into $OUT (at most 8 files).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("fused", "bench", "deepspeed", "qlora")
# The GPU image's packages (device notes, read 2026-11-17; versions where a session's pip list gave one).
# A name without a version counts as present at any version: the lease's summary lists what is still unmet.
GPU_IMAGE = {
    "accelerate": "1.15.0", "huggingface-hub": "1.33.0", "numpy": "2.5.2", "safetensors": "0.8.0",
    "tokenizers": "0.23.2", "transformers": "5.17.0", "triton": "3.6.0", "torch": "2.11.0",
    **dict.fromkeys((
        "aiohttp", "anyio", "attrs", "certifi", "charset-normalizer", "click", "filelock", "fsspec", "h11",
        "hf-xet", "httpcore", "httpx", "hypothesis", "idna", "iniconfig", "jinja2", "markdown", "markdown-it-py",
        "markupsafe", "matplotlib", "mdurl", "msgpack", "multidict", "networkx", "ninja", "packaging", "pandas",
        "peft", "pillow", "pip", "pluggy", "protobuf", "psutil", "pyarrow", "pygments", "pytest", "pytest-timeout",
        "pytest-xdist", "python-dateutil", "pyyaml", "regex", "requests", "rich", "scipy", "sentencepiece",
        "setuptools", "shellingham", "six", "sympy", "tensorboard", "tqdm", "typer", "typing-extensions",
        "urllib3", "werkzeug", "wheel", "xxhash", "yarl", "zipp", "frozenlist", "aiosignal", "propcache",
        "aiohappyeyeballs", "py-cpuinfo", "einops", "mpmath", "execnet", "tabulate", "pydantic-core"), None),
}
NEVER = re.compile(r"^(torch|triton|torchvision|torchaudio|nvidia-.*|cuda-.*|jax.*|cupy.*)$")
OPTIONAL = {"bitsandbytes", "deepspeed"}   # the QLoRA and ZeRO-3 stages: skipped with the reason when absent
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "manylinux_2_31_x86_64", "manylinux_2_34_x86_64", "manylinux_2_35_x86_64")
# the GPU machine's interpreter, for evaluating requirement markers
GPU_MARKERS = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.3",
               "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
               "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def project_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in EXTRAS:
        specs += project.get("optional-dependencies", {}).get(extra, [])
    return [Requirement(s) for s in dict.fromkeys(specs)]


def on_image(req: Requirement) -> bool:
    """The image holds `req` at an accepted version (or one this table does not know)."""
    name = canonicalize_name(req.name)
    if name not in GPU_IMAGE:
        return False
    have = GPU_IMAGE[name]
    return have is None or req.specifier.contains(have, prereleases=True)


def wheel_requirements(wheel: Path) -> list[Requirement]:
    """A wheel's own requirements that apply on the GPU machine (no extras)."""
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode("utf-8", "replace").splitlines()
    reqs = []
    for line in lines:
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate(GPU_MARKERS):
                reqs.append(req)
    return reqs


def pip_download(req: Requirement, into: Path) -> tuple[Path | None, str]:
    """(the wheel, how it came) or (None, why not): a binary wheel for the GPU machine, else a pure-Python
    wheel built here from the source distribution."""
    before = set(into.glob("*.whl"))
    spec = f"{req.name}{req.specifier}"
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
            "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3", "--abi", "none", "-d", str(into)]
    for plat in PLATFORMS:
        argv += ["--platform", plat]
    proc = subprocess.run([*argv, spec], capture_output=True, text=True)
    new = sorted(set(into.glob("*.whl")) - before)
    if proc.returncode == 0 and new:
        return new[0], "binary wheel"
    with tempfile.TemporaryDirectory() as tmp:
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-binary", req.name,
                                "-w", tmp, spec], capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*-none-any.whl"))
        if built.returncode == 0 and wheels:
            return Path(shutil.copy(wheels[0], into)), "built here (pure Python)"
    lines = [ln for ln in (proc.stderr + "\n" + built.stderr).splitlines() if ln.strip() and "is ignored" not in ln]
    return None, (lines[-1][:300] if lines else "no wheel for CPython 3.12 manylinux x86-64")


def prepare(out: Path, max_mib: float = 30.0) -> int:
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    queue = [(r, "pyproject.toml") for r in project_requirements()]
    fetched: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    while queue:
        req, wanted_by = queue.pop(0)
        name = canonicalize_name(req.name)
        if name in fetched or name in skipped:
            continue
        if NEVER.match(name):
            skipped[name] = "the image's own GPU stack: never carried"
            continue
        if on_image(req):
            continue
        wheel, how = pip_download(req, out)
        if wheel is None:
            skipped[name] = f"wanted by {wanted_by}: {how}"
            continue
        fetched[name] = {"wheel": wheel.name, "how": how, "mib": round(wheel.stat().st_size / 2**20, 2),
                         "wanted_by": wanted_by}
        queue += [(r, name) for r in wheel_requirements(wheel)]
    total = sum(f["mib"] for f in fetched.values())
    for name in sorted(OPTIONAL & set(fetched), key=lambda n: -fetched[n]["mib"]):
        if total <= max_mib:
            break
        info = fetched.pop(name)
        (out / info["wheel"]).unlink(missing_ok=True)
        total -= info["mib"]
        skipped[name] = f"optional, {info['mib']} MiB: over --max-mib {max_mib:g} with the rest"
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    report = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
              "image_as_listed": "2026-11-17", "total_mib": round(total, 2), "fetched": fetched, "not_fetched": skipped}
    (out / "prepare.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "lease.sh").write_text(lease_script(out.relative_to(ROOT) if out.is_relative_to(ROOT) else out, commit))
    print(f"{len(fetched)} wheel(s), {total:.1f} MiB in {out}; not fetched: "
          + (", ".join(f"{k} ({v})" for k, v in skipped.items()) or "none"))
    print(f"lease command: sh {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}/lease.sh "
          "(carry that folder; it must be ignored by git: echo /.whl/ >> .git/info/exclude)")
    return 0


def lease_script(wheels: Path, commit: str) -> str:
    """The one command of a lease: wheels in, the rehearsal in lease order, at most 8 files out."""
    return f"""#!/bin/sh
# One GPU lease (bench/gpu_rehearsal.py --prepare, commit {commit}): `sh {wheels}/lease.sh`
set -u
OUT=${{OUT:-/tmp/lease-out}}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site {wheels}/*.whl \\
  || {{ echo "installing the carried wheels failed"; exit 3; }}
export PYTHONPATH=/tmp/site:$PWD CUSET_CACHE=/tmp/cuset-cache CUSET_COMMIT={commit} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 bench/gpu_rehearsal.py --lease --out /tmp/lease "$@"; status=$?
for f in summary.json summary.md gpu-tests.xml train-step/results.json; do
  [ -f "/tmp/lease/$f" ] && cp "/tmp/lease/$f" "$OUT/$(echo "$f" | tr / -)"
done
[ -f bench/results/kernel_perf.json ] && cp bench/results/kernel_perf.json "$OUT/"
tar czf "$OUT/logs.tgz" -C /tmp/lease logs 2>/dev/null
exit $status
"""

"""Tests import our own modules directly: a broken import of cuset must fail the suite,
never turn tests into skips (importorskip of cuset, or an `except ImportError` around a
cuset import that skips or reports "not available"). The same holds for what the project
requires (its dependencies and the `test` extra that `make test` installs): importorskip
of torch would turn a broken torch into skips. Optional extras (vllm) may be skipped."""

import ast
import re
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

TESTS = Path(__file__).resolve().parent
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def required_modules() -> set[str]:
    """Top-level import names of cuset, its dependencies and the `test` extra (Pillow: PIL)."""
    project = tomllib.loads((TESTS.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    required = {_normal(re.match(r"[A-Za-z0-9._-]+", r).group()) for r in requirements}
    modules = {"cuset"} | {name.replace("-", "_") for name in required}
    return modules | {module for module, dists in packages_distributions().items()
                      if any(_normal(d) in required for d in dists)}


def _imports_cuset(nodes) -> bool:
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom) and (sub.module or "").split(".")[0] == "cuset":
                return True
            if isinstance(sub, ast.Import) and any(a.name.split(".")[0] == "cuset" for a in sub.names):
                return True
    return False


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in IMPORT_ERRORS for n in names)


def self_skips(source: str, required: frozenset[str] | set[str] = frozenset({"cuset"})) -> list[int]:
    """Line numbers where a test guards an import of cuset (or importorskips a `required`
    module) instead of failing on it."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "importorskip" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and str(arg.value).split(".")[0] in required:
                lines.append(node.lineno)
        if isinstance(node, ast.Try) and _imports_cuset(node.body) and any(map(_catches_import_error, node.handlers)):
            lines.append(node.lineno)
    return lines


def test_the_detector_finds_both_patterns():
    guarded = ("import pytest\n"
               "cpu = pytest.importorskip('cuset.execute.cpu')\n"
               "def available():\n"
               "    try:\n"
               "        from cuset.data.synth import synthesize\n"
               "    except ImportError:\n"
               "        return False\n"
               "    return True\n"
               "try:\n"
               "    import vllm\n"
               "except ImportError:\n"
               "    vllm = None\n")
    assert self_skips(guarded) == [2, 4]
    deps = "import pytest\ntorch = pytest.importorskip('torch')\nvllm = pytest.importorskip('vllm')\n"
    assert self_skips(deps, required_modules()) == [2]


def test_required_modules_are_named_by_import_name():
    required = required_modules()
    assert {"cuset", "torch", "transformers", "numpy", "ray", "yaml", "PIL", "tree_sitter"} <= required
    assert "vllm" not in required and "openai" not in required  # optional extras


def test_no_test_skips_when_our_own_modules_or_dependencies_fail_to_import():
    required = required_modules()
    found = {f"{p.relative_to(TESTS)}:{line}" for p in sorted(TESTS.rglob("*.py"))
             for line in self_skips(p.read_text(encoding="utf-8"), required)}
    assert found == set(), ("import cuset modules and required dependencies directly; "
                            "a broken import must fail the suite")


def test_the_library_never_imports_the_cli():
    """The CLI is a thin layer on top: no module outside cuset/cli imports it (the eval and
    generate stages once took the CLI's console for their progress bars)."""
    package = TESTS.parent / "cuset"
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if (package / "cli") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            offenders += [f"{path.relative_to(package.parent)}:{node.lineno}" for n in names
                          if n == "cuset.cli" or n.startswith("cuset.cli.")]
    assert offenders == []

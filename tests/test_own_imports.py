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
               "        from cuset.curation.synth import synthesize\n"
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


# ---- layers: who may import whom ---------------------------------------------------------

# The packages (and top-level modules) of cuset, bottom to top. A module may import its own
# package and those of lower layers; the packages of one layer are peers that never import
# each other (analysis and curation only read what the layers below produced; the experiment
# layer runs things). docs/architecture.md shows this table (checked below).
LAYERS = (
    ("errors",),
    ("config", "io", "localpath", "cachedir", "progress", "provenance"),
    ("tasks",),
    ("spans",),
    ("losses",),
    ("train",),
    ("generate",),
    ("execute",),
    ("evaluate",),
    ("analysis", "curation"),
    ("experiment",),
    ("demo",),
    ("cli",),
)
# No module circle; none may appear.
KNOWN_CIRCLES: set[tuple[str, str]] = set()
PACKAGE = TESTS.parent / "cuset"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(source: str, modules: set[str]) -> list[tuple[str, int]]:
    """(cuset module imported, line) for every import in `source`, lazy ones included;
    `from package import submodule` counts as importing the submodule."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "cuset":
            subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules]
            names = subs if len(subs) == len(node.names) else [node.module, *subs]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split(".")[0] == "cuset"]
        else:
            continue
        found += [(name, node.lineno) for name in names]
    return found


def import_graph(root: Path = PACKAGE) -> tuple[dict[str, set[str]], dict[str, list[tuple[str, int]]]]:
    """(module -> modules it imports, module -> its imports with lines) over the tree at `root`."""
    paths = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    lines = {m: module_imports(p.read_text(encoding="utf-8"), set(paths)) for m, p in paths.items()}
    return {m: {n for n, _ in found if n in paths and n != m} for m, found in lines.items()}, lines


def package_of(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def layer_offenders(lines: dict[str, list[tuple[str, int]]], layers=LAYERS) -> list[str]:
    """`module:line imports target` for each import of a package above or beside the module's own."""
    rank = {package: i for i, layer in enumerate(layers) for package in layer}
    offenders = []
    for module, found in lines.items():
        own = package_of(module)
        for target, line in found:
            other = package_of(target)
            if own and other and other != own and rank[other] >= rank[own]:
                offenders.append(f"{module}:{line} imports {target} ({other} is not below {own})")
    return offenders


def circles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The import circles (strongly connected groups of two or more modules), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[tuple[str, ...]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.add(tuple(sorted(group)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_layer_and_circle_checks_find_what_they_must(tmp_path):
    root = tmp_path / "cuset"
    files = {
        "__init__.py": "",
        "tasks/__init__.py": "from cuset.tasks import schema\n",
        "tasks/schema.py": "from cuset.errors import CusetError\n",
        "tasks/prompts.py": "from cuset.tasks.kernel import render\n",
        "tasks/kernel.py": "def render():\n    from cuset.tasks.prompts import X\n",
        "analysis/__init__.py": "",
        "analysis/sweep.py": "def run():\n    from cuset.experiment import run_cell\n",
        "curation/__init__.py": "",
        "curation/stats.py": "from cuset.analysis import sweep\nfrom cuset.tasks import schema\n",
        "experiment.py": "import cuset.analysis.sweep\n",
        "errors.py": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    graph, lines = import_graph(root)
    assert circles(graph) == {("cuset.tasks.kernel", "cuset.tasks.prompts"), ("cuset.analysis.sweep", "cuset.experiment")}
    layers = (("errors",), ("tasks",), ("analysis", "curation"), ("experiment",))
    assert sorted(layer_offenders(lines, layers)) == [
        "cuset.analysis.sweep:2 imports cuset.experiment (experiment is not below analysis)",
        "cuset.curation.stats:1 imports cuset.analysis.sweep (analysis is not below curation)",
    ]


def test_every_package_has_a_layer():
    packages = {package_of(module_name(p)) for p in PACKAGE.rglob("*.py")} - {""}
    assert packages == {package for layer in LAYERS for package in layer}


def test_no_module_imports_a_package_above_or_beside_its_own():
    assert layer_offenders(import_graph()[1]) == []


def test_no_import_circle_but_the_known_ones():
    assert circles(import_graph()[0]) - KNOWN_CIRCLES == set()


def test_the_architecture_page_shows_the_layers():
    table = "\n".join(", ".join(layer) for layer in reversed(LAYERS))
    page = (TESTS.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert f"```\n{table}\n```" in page, f"docs/architecture.md: show the layers, top first:\n{table}"

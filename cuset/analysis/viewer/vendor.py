"""The front-end library the viewer's sample table is built on, taken from an installed
package at build time and copied into the site, so the site stays offline and
self-contained (its Content-Security-Policy allows only its own files).

The table is Tabulator (MIT, no dependencies: no jQuery), shipped on PyPI as the files of
the `django-js-lib-tabulator` wheel, a dependency of cuset. The wheel is a Django app, but
its files are all we read: nothing of it is imported, so Django is not needed. What was
copied, from which package and version, under which licence, is written to
`assets/THIRD-PARTY.txt` of the site.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath

from cuset.errors import CusetError
from cuset.io import atomic_write_text

THIRD_PARTY_FILE = "THIRD-PARTY.txt"


@dataclass(frozen=True)
class VendoredLibrary:
    """A front-end library taken from an installed distribution."""
    name: str                          # the library, as its authors name it
    distribution: str                  # the PyPI package that ships its files
    licence: str
    homepage: str
    files: tuple[tuple[str, str], ...]  # (path inside the distribution, file name under the site's assets/)
    licence_file: str                  # path inside the distribution


TABLE_LIBRARY = VendoredLibrary(
    name="Tabulator", distribution="django-js-lib-tabulator", licence="MIT", homepage="https://tabulator.info/",
    files=(("js_lib_tabulator/static/tabulator/js/tabulator.min.js", "tabulator.min.js"),
           ("js_lib_tabulator/static/tabulator/css/tabulator_simple.min.css", "tabulator.min.css")),
    licence_file="LICENSE.txt")


class VendorMissing(CusetError, RuntimeError):
    pass


def _install_hint(lib: VendoredLibrary) -> str:
    return f"pip install {lib.distribution} (a dependency of cuset: pip install -e . installs it)"


def _dist_file(dist: metadata.Distribution, suffix: str) -> Path | None:
    """The installed file of `dist` whose recorded path is `suffix` or ends with it."""
    for f in dist.files or ():
        posix = PurePosixPath(str(f)).as_posix()
        if posix == suffix or posix.endswith("/" + suffix):
            path = Path(str(dist.locate_file(f)))
            return path if path.is_file() else None
    return None


def vendor(lib: VendoredLibrary, assets: Path) -> list[str]:
    """Copy `lib`'s files into `assets`; return the lines that describe it for THIRD-PARTY.txt."""
    try:
        dist = metadata.distribution(lib.distribution)
    except metadata.PackageNotFoundError:
        raise VendorMissing(f"the viewer's table library {lib.name} is not installed (package "
                            f"{lib.distribution}): {_install_hint(lib)}") from None
    for inside, name in lib.files:
        source = _dist_file(dist, inside)
        if source is None:
            raise VendorMissing(f"{lib.distribution} {dist.version} is installed but has no {inside}: reinstall it "
                                f"(pip install --force-reinstall {lib.distribution})")
        (assets / name).write_bytes(source.read_bytes())
    banner = re.search(r"v(\d+(?:\.\d+)+)", (assets / lib.files[0][1]).read_text(encoding="utf-8")[:200])
    licence_path = _dist_file(dist, lib.licence_file)
    licence_text = licence_path.read_text(encoding="utf-8").strip() if licence_path else \
        f"(the package ships no {lib.licence_file}; the library's licence is {lib.licence})"
    # the library's own version is in its file's banner; the package's version says which build of it
    version = banner.group(1) if banner else f"(no version in its banner; package {dist.version})"
    return [f"{lib.name} {version} ({lib.homepage}), licence {lib.licence}",
            f"  from the PyPI package {lib.distribution} {dist.version}",
            "  files: " + ", ".join(f"assets/{name}" for _, name in lib.files),
            "", *("  " + line if line else "" for line in licence_text.splitlines()), ""]


def vendor_assets(assets: Path, libraries: tuple[VendoredLibrary, ...] = (TABLE_LIBRARY,)) -> None:
    """Copy every library into `assets` and write `assets/THIRD-PARTY.txt` naming them."""
    lines = ["Third-party files in this site, copied from installed packages when it was built.", ""]
    for lib in libraries:
        lines += vendor(lib, assets)
    atomic_write_text(assets / THIRD_PARTY_FILE, "\n".join(lines) + "\n")

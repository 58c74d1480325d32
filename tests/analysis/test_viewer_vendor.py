"""`cuset view`'s table library: copied from its installed package into the site, named with
its version and licence in assets/THIRD-PARTY.txt, and a clear error when it is missing.
And the code view's runs: one element per run of a class, the program's text unchanged."""

from __future__ import annotations

import html
import re
from importlib import metadata
from pathlib import Path

import pytest

from cuset.analysis.viewer.highlight import _runs, highlight
from cuset.analysis.viewer.site import build_site
from cuset.analysis.viewer.vendor import TABLE_LIBRARY, VendoredLibrary, VendorMissing, vendor_assets
from cuset.errors import CusetError
from cuset.spans import detect
from viewer_runs import eval_run


def _installed(inside: str) -> Path:
    dist = metadata.distribution(TABLE_LIBRARY.distribution)
    return Path(str(dist.locate_file(next(f for f in dist.files if str(f).replace("\\", "/") == inside))))


def test_the_site_carries_the_table_library_its_version_and_licence(tmp_path):
    build_site([eval_run(tmp_path)], tmp_path / "site")
    assets = tmp_path / "site" / "assets"
    for inside, name in TABLE_LIBRARY.files:            # byte for byte the installed package's files
        assert (assets / name).read_bytes() == _installed(inside).read_bytes()
    assert (assets / "tabulator.min.js").read_text()[:60].startswith("/* Tabulator v6.")
    notice = (assets / "THIRD-PARTY.txt").read_text()
    banner = re.search(r"Tabulator v([\d.]+)", (assets / "tabulator.min.js").read_text()[:100]).group(1)
    assert f"Tabulator {banner} (https://tabulator.info/), licence MIT" in notice
    assert f"django-js-lib-tabulator {metadata.version('django-js-lib-tabulator')}" in notice
    assert "The MIT License" in notice and "Oli Folkerd" in notice
    index = (tmp_path / "site" / "index.html").read_text()
    # the page loads the library from the site itself, under a policy that allows nothing else
    assert '<script src="assets/tabulator.min.js"></script>' in index
    assert '<link rel="stylesheet" href="assets/tabulator.min.css">' in index
    assert "default-src 'none'; script-src 'self'" in index and "://" not in index.split("<body>")[0]


def test_a_missing_library_names_the_package_and_how_to_install_it(tmp_path):
    absent = VendoredLibrary(name="Tabulator", distribution="cuset-no-such-js-package", licence="MIT",
                             homepage="https://tabulator.info/", files=(("x.js", "x.js"),), licence_file="LICENSE")
    with pytest.raises(VendorMissing) as e:
        vendor_assets(tmp_path, (absent,))
    assert isinstance(e.value, CusetError)
    assert "table library Tabulator is not installed (package cuset-no-such-js-package)" in str(e.value)
    assert "pip install cuset-no-such-js-package" in str(e.value)
    wrong_file = VendoredLibrary(name="Tabulator", distribution=TABLE_LIBRARY.distribution, licence="MIT",
                                 homepage="https://tabulator.info/", files=(("no/such/file.js", "t.js"),),
                                 licence_file="LICENSE.txt")
    with pytest.raises(VendorMissing, match=r"is installed but has no no/such/file\.js: reinstall it"):
        vendor_assets(tmp_path, (wrong_file,))
    assert not (tmp_path / "THIRD-PARTY.txt").exists()


def test_code_runs_merge_tokens_of_one_class_and_split_at_span_edges():
    code = "__global__ void k(float *x) {\n  x[threadIdx.x] = 1;\n}\n"
    spans = detect(code)
    runs = _runs(code, spans)
    # the runs tile the program, and no two neighbours share both class and kind
    assert runs[0][0] == 0 and runs[-1][1] == len(code)
    assert all(a[1] == b[0] for a, b in zip(runs, runs[1:]))
    assert all(a[2:] != b[2:] for a, b in zip(runs, runs[1:]))
    # the name, punctuation and whitespace tokens from "x)" to "x[" (no class of their own) are one run
    assert (25, 34, "", "kernel_body") in runs and code[25:34] == "x) {\n  x["
    assert (34, 43, "nb", "thread_index") in runs and code[34:43] == "threadIdx"
    page = highlight(code, spans=spans, marks={2: 'error: "x" <here>'})
    text = html.unescape(re.sub(r"<[^>]+>", "", str(page)))
    assert text == code                                  # every character, once, in order
    assert page.count('class="ln') == 3
    assert ('<span id="L2" class="ln mark" title="error: &quot;x&quot; &lt;here&gt;"><span class="sp sp-kernel_body">'
            '  x[</span><span class="sp sp-thread_index"><span class="nb">threadIdx</span>.x</span>'
            '<span class="sp sp-kernel_body">] <span class="o">=</span> <span class="mi">1</span>;</span>\n</span>') in page


def test_a_repeated_program_is_analysed_once_and_keeps_its_own_marks():
    from cuset.analysis.viewer.highlight import _analysed, program_view

    code = "__global__ void twice(float *y) {\n  y[threadIdx.x] = 2;\n}\n"
    _analysed.cache_clear()
    first, spans = program_view(code, {1: "warning: first"})
    second, spans_again = program_view(code, {3: "error: second"})
    assert _analysed.cache_info().hits == 1 and _analysed.cache_info().misses == 1
    assert spans == spans_again == tuple(detect(code))
    assert first == highlight(code, spans=detect(code), marks={1: "warning: first"})
    assert second == highlight(code, spans=detect(code), marks={3: "error: second"})
    assert 'title="warning: first"' in first and "second" not in first
    assert 'title="error: second"' in second and "first" not in second

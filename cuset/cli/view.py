"""`cuset view`: a static, offline viewer of evaluation runs (every sample, its failure, program and logs)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from cuset.cli.common import console, fail, out

VIEW_HELP = (
    "Build a self-contained HTML viewer of evaluation runs: headline numbers, pass rates by family and level, a "
    "filterable table of every sample, one page per sample (status, where it failed, the program highlighted with "
    "its CUDA-sensitive spans, prompt, response, logs) and, for several runs, a per-task comparison.\n\n"
    "RUN_DIR is an eval output dir (results.jsonl + summary.json), a demo/study dir (cells/<model>/eval/) or a "
    "results JSONL. No network is used, at build or view time.")


def register(root: typer.Typer) -> None:
    root.command("view", help=VIEW_HELP, no_args_is_help=True)(view)


def view(
    run_dirs: List[Path] = typer.Argument(..., metavar="RUN_DIR...", help="Eval output dirs, demo/study dirs or results JSONL files."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Where to write the site (default: RUN_DIR/view of the first RUN_DIR)."),
    serve: bool = typer.Option(False, "--serve", help="Serve the site on 127.0.0.1 after building it (Ctrl-C stops)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="Port for --serve (0: any free port)."),
    jobs: int = typer.Option(0, "--jobs", min=0, help="Processes writing the sample pages (0: one per CPU, at most 8)."),
):
    """Build (and optionally serve on 127.0.0.1) a static viewer of evaluation runs."""
    from cuset.analysis.viewer.site import build_site

    import os

    jobs = jobs or min(8, os.cpu_count() or 1)
    summary = build_site(run_dirs, out_dir, jobs=jobs)   # ViewSourceError (a CusetError): one line
    out.print(f"{summary.n_samples} samples of {len(summary.runs)} run(s) ({', '.join(summary.runs)}): "
              f"{summary.n_pages} sample pages, index.html {summary.index_bytes / 1e6:.2f} MB, "
              f"{summary.total_bytes / 1e6:.1f} MB in all, built in {summary.seconds:.1f} s", highlight=False)
    if summary.n_skipped_lines:
        console.print(f"[yellow]{summary.n_skipped_lines} results line(s) skipped; index.html lists them[/]")
    console.print(f"wrote {summary.out / 'index.html'}")
    if serve:
        from cuset.analysis.viewer.serve import make_server

        try:
            server = make_server(summary.out, port)
        except OSError as e:
            fail(f"--port {port}: cannot listen on 127.0.0.1 ({e}); pick another port or 0")
        host, bound = server.server_address[:2]
        console.print(f"serving http://{host}:{bound}/index.html (Ctrl-C stops)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()

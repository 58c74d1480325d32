"""Write docs/competence.md: every committed base's competence before fine-tuning, with its size
and training, from the committed report.json files (cuset.demo.competence).

    .venv/bin/python docs/tools/competence_table.py [--check]

--check writes nothing and fails when the committed page is not what the files give.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "competence.md"


def page_text() -> str:
    from cuset.demo.competence import committed_rows, competence_markdown
    from cuset.demo.config import DemoConfig

    gate = DemoConfig.__dataclass_fields__
    return competence_markdown(committed_rows(ROOT / "docs"), min_compile=gate["gate_compile"].default,
                               min_function=gate["gate_function"].default)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed page, write nothing")
    args = parser.parse_args(argv)
    text = page_text()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is not what the committed reports give: run "
                  "python docs/tools/competence_table.py", file=sys.stderr)
            return 1
        print(f"{PAGE.relative_to(ROOT)} agrees with the committed reports")
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())

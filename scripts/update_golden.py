"""Regenerate tests/golden/<source>.json from the demo corpus (run after an intended ingest change; review the diff)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("CURATION_SECRET", "test-secret-not-for-production")  # the secret the tests use

from curation.demo.corpus import write_demo_corpus  # noqa: E402
from curation.ingest import run  # noqa: E402
from curation.jsonio import read_jsonl  # noqa: E402
from curation.params import IngestParams  # noqa: E402
from curation.schema import Case  # noqa: E402
from tests.test_ingest import golden_summary  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw"
        write_demo_corpus(raw)
        for source in ("adni", "oasis1", "oasis3", "radiopaedia", "case-reports", "medpix"):
            run(IngestParams(max_failure_rate=0.5), source, raw / source, Path(tmp) / source)
            cases = list(read_jsonl(Path(tmp) / source / "cases.jsonl", Case))
            out = ROOT / "tests" / "golden" / f"{source}.json"
            out.write_text(json.dumps(json.loads(json.dumps(golden_summary(cases), default=str)), indent=1,
                                      sort_keys=True) + "\n")
            print(f"{out.relative_to(ROOT)}: {len(cases)} cases")


if __name__ == "__main__":
    main()

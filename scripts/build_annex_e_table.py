"""Regenerate curation/deid/annex_e.tsv from a machine-readable PS3.15 Annex E table.

Usage: python scripts/build_annex_e_table.py PATH/TO/confidentiality_profile_attributes.json EDITION
(the JSON ships in the `dicom-standard` PyPI package under `standard/`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = [
    "basicProfile", "rtnSafePrivOpt", "rtnUIDsOpt", "rtnDevIdOpt", "rtnInstIdOpt", "rtnPatCharsOpt",
    "rtnLongFullDatesOpt", "rtnLongModifDatesOpt", "cleanDescOpt", "cleanStructContOpt", "cleanGraphOpt",
]


def main(src: str, edition: str) -> None:
    rows = json.loads(Path(src).read_text())
    out = [f"# DICOM PS3.15 Annex E Table E.1-1 (Application Level Confidentiality Profile Attributes), "
           f"edition {edition}",
           "# one attribute a line; actions: D Z X K C U and combinations (X/Z, X/D, X/Z/D, Z/D, X/Z/U*)",
           "tag\tname\t" + "\t".join(COLUMNS)]
    for r in sorted(rows, key=lambda r: r["id"]):
        tag = r["tag"].split(" ")[0] if "GGGG" not in r["tag"] else "(GGGG,EEEE)"
        out.append("\t".join([tag, " ".join(r["name"].split())] + [r.get(c, "") for c in COLUMNS]))
    Path("curation/deid/annex_e.tsv").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""ADNI ingest at scale: a synthetic IDA tree of 10,000 series (one small DICOM each) against 1,000 series.
Streaming means peak memory stays flat as the tree grows; time per series is reported too."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.common import PEAK_RSS_MB, Figure, run_py

MAKE_TREE = """
import sys, copy
from pathlib import Path
import numpy as np
import pydicom
from pydicom.uid import generate_uid
src, root, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
template = pydicom.dcmread(next(src.rglob("*.dcm")))
template.Rows = template.Columns = 32
template.PixelData = np.zeros((32, 32), dtype=np.uint16).tobytes()
rows = ["PTID,RID,VISCODE,VISCODE2,EXAMDATE,DX_bl,DX,AGE,PTGENDER,PTEDUCAT,PTETHCAT,PTRACCAT,APOE4,MMSE,CDRSB,"
        "ADAS11,ADAS13,MOCA,FAQ,Hippocampus,WholeBrain,Ventricles,ICV,Month"]
for s in range(n):
    p, k = divmod(s, 4)
    ptid = f"{100 + p // 9000:03d}_S_{p % 9000 + 1000:04d}"
    if k == 0:
        rows.append(f"{p + 1},{ptid},bl,bl,2010-01-01,CN,CN,70,Male,16,Not Hisp/Latino,White,0,29,0,5,8,27,0,"
                    "7400,1050000,22000,1550000,0")
    sequence = "MPRAGE" if k % 2 == 0 else "Axial_T2-FLAIR"
    folder = root / "ADNI" / ptid / sequence / f"2010-01-0{1 + k // 2}_10_00_00.0" / f"I{1000000 + s}"
    folder.mkdir(parents=True, exist_ok=True)
    ds = copy.deepcopy(template)
    ds.PatientID = ptid
    ds.SeriesInstanceUID = generate_uid(entropy_srcs=[str(s), "series"])
    ds.SOPInstanceUID = generate_uid(entropy_srcs=[str(s), "sop"])
    ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
    ds.save_as(folder / "1.dcm", enforce_file_format=True)
(root / "ADNIMERGE.csv").write_text("\\n".join(rows) + "\\n")
"""

INGEST = """
import json, os, sys, time
from pathlib import Path
os.environ.setdefault("CURATION_SECRET", "benchmark-secret")
from curation.ingest import run
from curation.params import IngestParams
t = time.perf_counter()
r = run(IngestParams(max_failure_rate=1.0), "adni", Path(sys.argv[1]), Path(sys.argv[2]))
print(json.dumps({"seconds": time.perf_counter() - t, "cases": r.outputs, "series": r.counts["series"],
                  "max_rss_mb": PEAK_RSS_MB}))
""".replace("PEAK_RSS_MB", PEAK_RSS_MB)


def run(work: Path, root: Path) -> list[Figure]:
    from curation.demo.corpus import write_demo_corpus

    demo = work / "demo"
    write_demo_corpus(demo)
    stats = {}
    for n in (1000, 10000):
        tree = work / f"adni-{n}"
        run_py(MAKE_TREE, str(demo / "adni"), str(tree), str(n))
        stats[n] = json.loads(run_py(INGEST, str(tree), str(work / f"out-{n}"), cwd=root))
    big, small = stats[10000], stats[1000]
    return [
        Figure("ingest", f"ADNI ingest peak RSS, {big['series']} series / {big['cases']} participants",
               big["max_rss_mb"], "MB", f"same at {small['series']} series", small["max_rss_mb"],
               big["max_rss_mb"] / small["max_rss_mb"],
               "< 1.5 (streaming)", big["max_rss_mb"] / small["max_rss_mb"] < 1.5,
               {"seconds": round(big["seconds"], 1), "ms_per_series": round(1000 * big["seconds"] / big["series"], 2)}),
        Figure("ingest", "ADNI ingest time per series at 10,000 series", big["seconds"] / big["series"], "s",
               "time per series at 1,000", small["seconds"] / small["series"],
               (big["seconds"] / big["series"]) / (small["seconds"] / small["series"]), "~1 (linear)", None),
    ]

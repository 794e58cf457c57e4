"""Template generation at Med-CMR scale: 5,000 cases, streamed, against a one-minute anchor; memory flat in n."""

from __future__ import annotations

import json
import random
from pathlib import Path

from benchmarks.common import PEAK_RSS_MB, Figure, demo_extract, run_py

GEN = """
import json, sys, time
from pathlib import Path
from curation.generate.stage import run
from curation.params import load_params
root, src, dst = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
p = load_params(root / "params.yaml").generate
p.templates_dir, p.knowledge = str(root / p.templates_dir), str(root / p.knowledge)
p.diagnoses = str(root / p.diagnoses)
t = time.perf_counter()
r = run(p, src, dst)
print(json.dumps({"seconds": time.perf_counter() - t, "items": r.outputs, "cases": r.inputs,
                  "max_rss_mb": PEAK_RSS_MB}))
""".replace("PEAK_RSS_MB", PEAK_RSS_MB)


def scaled_cases(extract: Path, dst: Path, n: int, seed: int = 7) -> Path:
    """``n`` cases cloned from the demo cases with fresh ids and jittered scores (same layouts, same templates)."""
    base = [json.loads(line) for line in (extract / "cases.jsonl").read_text().splitlines()]
    rng = random.Random(seed)
    dst.mkdir(parents=True, exist_ok=True)
    with (dst / "cases.jsonl").open("w") as fh:
        for i in range(n):
            c = json.loads(json.dumps(base[i % len(base)]))
            c["case_id"] = f"{c['case_id']}-{i:05d}"
            for k, v in list(c.get("ehr", {}).items()):
                if isinstance(v, int | float) and k in ("MMSE", "MOCA"):
                    c["ehr"][k] = max(0, min(30, v + rng.randint(-3, 3)))
            fh.write(json.dumps(c) + "\n")
    return dst


def run(work: Path, root: Path) -> list[Figure]:
    extract = demo_extract(work / "demo")
    out = []
    stats = {}
    for n in (1000, 5000):
        src = scaled_cases(extract, work / f"cases-{n}", n)
        stats[n] = json.loads(run_py(GEN, str(root), str(src), str(work / f"items-{n}"), cwd=work / "demo"))
    big = stats[5000]
    per_20k = big["seconds"] * 20000 / big["items"]
    out.append(Figure("generate", f"templates only, {big['cases']} cases -> {big['items']} items", big["seconds"], "s",
                      "Med-CMR scale anchor: 1 minute", 60.0, big["seconds"] / 60.0, "< 1.0", big["seconds"] < 60,
                      {"seconds_per_20000_items": round(per_20k, 2),
                       "items_per_s": round(big["items"] / big["seconds"])}))
    out.append(Figure("generate", "peak RSS at 5,000 cases", big["max_rss_mb"], "MB", "peak RSS at 1,000 cases",
                      stats[1000]["max_rss_mb"], big["max_rss_mb"] / stats[1000]["max_rss_mb"],
                      "< 1.2 (streams: memory flat in n)", big["max_rss_mb"] / stats[1000]["max_rss_mb"] < 1.2))
    return out

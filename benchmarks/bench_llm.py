"""LLM client throughput against a local endpoint with a fixed 200 ms latency, at concurrency 1, 8 and 32."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.common import Figure, run_py

CLIENT = """
import json, sys, tempfile, time
from curation.llm import LLMClient, Request
from curation.params import LlmParams
url, n, conc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = LLMClient(LlmParams(base_url=url, model="bench", concurrency=conc), cache_dir=tempfile.mkdtemp())
reqs = [Request(messages=[{"role": "user", "content": f"q{i}-{conc}"}], schema={"type": "object"}) for i in range(n)]
t = time.perf_counter()
res = c.run(reqs)
wall = time.perf_counter() - t
t = time.perf_counter()
again = c.run(reqs)
print(json.dumps({"seconds": wall, "ok": sum(r.ok for r in res), "cached_seconds": time.perf_counter() - t,
                  "cache_hits": c.usage.cache_hits}))
"""

LATENCY = 0.2
TARGET = 1.1  # issue 33: within 10% of n x latency / concurrency at concurrency 32


def run(work: Path, root: Path) -> list[Figure]:
    server = subprocess.Popen([sys.executable, "-m", "curation.testing.openai_server", "--delay", str(LATENCY),
                               "--content", '{"ok": true}'], stdout=subprocess.PIPE, text=True, cwd=root)
    try:
        url = (server.stdout.readline() if server.stdout else "").strip()
        out = []
        for conc, n in ((1, 40), (8, 200), (32, 1000)):
            r = json.loads(run_py(CLIENT, url, str(n), str(conc)))
            ideal = n * LATENCY / conc
            target = f"<= {TARGET}" if conc == 32 else ""
            out.append(Figure("llm", f"{n} calls at concurrency {conc} ({r['ok']} ok)", r["seconds"], "s",
                              f"ideal n x {LATENCY} s / concurrency", ideal, r["seconds"] / ideal, target,
                              (r["seconds"] / ideal <= TARGET) if conc == 32 else None,
                              {"rerun_from_cache_s": round(r["cached_seconds"], 3), "cache_hits": r["cache_hits"]}))
        return out
    finally:
        server.terminate()
        server.wait(timeout=10)

"""The demo PMC Open Access download: a JATS case report with its figure, and a research article that ingest
skips by design."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from curation.demo.phantom import SHAPE, Lesion, axial_png_array, head
from curation.records import write_bytes, write_text

JATS = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Archiving and Interchange DTD v1.2 20190208//EN" "JATS-archivearticle1.dtd">
<article xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:mml="http://www.w3.org/1998/Math/MathML" article-type="{article_type}" dtd-version="1.2">
<front>
<journal-meta><journal-id journal-id-type="nlm-ta">Demo Neurol Case Rep</journal-id><journal-title-group><journal-title>Demo Neurology Case Reports</journal-title></journal-title-group><issn pub-type="epub">0000-0000</issn></journal-meta>
<article-meta>
<article-id pub-id-type="pmcid">{pmcid}</article-id><article-id pub-id-type="doi">10.0000/dncr.{doi}</article-id>
<title-group><article-title>{title}</article-title></title-group>
<contrib-group><contrib contrib-type="author"><name><surname>Okafor</surname><given-names>Adaeze</given-names></name></contrib><contrib contrib-type="author"><name><surname>Lindqvist</surname><given-names>Maja</given-names></name></contrib></contrib-group>
<pub-date pub-type="epub"><year>2021</year></pub-date>
<permissions><license license-type="open-access" xlink:href="https://creativecommons.org/licenses/by/4.0/"><license-p>This is an open-access article distributed under the terms of the Creative Commons Attribution 4.0 License.</license-p></license></permissions>
</article-meta>
</front>
<body>
<sec><title>Introduction</title><p>{intro}</p></sec>
<sec><title>{case_title}</title>
<p>{case_text}</p>
<fig id="F1" position="float"><label>Figure 1.</label><caption><p>{caption}</p></caption><graphic xlink:href="{graphic}"/></fig>
</sec>
<sec><title>Discussion</title><p>{discussion}</p></sec>
</body>
</article>
"""


def write_case_reports(root: Path) -> None:
    operculum = Lesion.at_mm(-50, 14, 12, 8.0)  # the left frontal operculum (pars opercularis), the report says
    vol = head("DWI", atrophy=0.2, lesion=operculum, seed=6001)
    z = int(round(operculum.center[2] * (SHAPE[2] - 1)))
    buf = io.BytesIO()
    Image.fromarray(axial_png_array(vol, z)).convert("RGB").save(buf, format="JPEG", quality=92)
    write_bytes(root / "dncr-8-e1-g001.jpg", buf.getvalue())
    write_text(root / "PMC9000001.nxml", JATS.format(
        article_type="case-report", pmcid="PMC9000001", doi="2021.0001",
        title="Acute left middle cerebral artery infarct presenting as isolated aphasia",
        intro="Isolated aphasia is an uncommon presentation of acute ischaemic stroke.",
        case_title="Case Report",
        case_text=("A 71-year-old right-handed man, Mr. Walter Bishop of 17 Harvard Lane, Boston (MRN 22-781-443), "
                   "was seen on January 5, 2021 with sudden word-finding difficulty that began 3 hours before arrival. "
                   "Examination showed expressive aphasia without limb weakness. "
                   "MRI showed restricted diffusion on DWI in the left frontal operculum in the left middle cerebral artery territory, "
                   "with no haemorrhage on SWI. He was treated with thrombectomy and his speech improved at 3-month follow-up. "
                   "Final diagnosis: acute ischaemic stroke due to cardioembolism."),
        caption="Axial diffusion-weighted MRI showing restricted diffusion in the left middle cerebral artery territory (arrow).",
        graphic="dncr-8-e1-g001",
        discussion=("Cardioembolic stroke after anticoagulation is stopped is a recognised cause of cortical infarcts. "
                    "The differential diagnosis includes focal seizure with postictal aphasia and migraine with aura."),
    ))
    # a research article in the same download: skipped by design, counted
    write_text(root / "PMC9000002.nxml", JATS.format(
        article_type="research-article", pmcid="PMC9000002", doi="2021.0002",
        title="Outcomes of thrombectomy in a regional stroke network", intro="We studied outcomes.",
        case_title="Methods", case_text="Retrospective cohort of 412 patients.",
        caption="Flow chart of included patients.", graphic="dncr-8-e2-g001",
        discussion="Thrombectomy outcomes were comparable to trial data.",
    ))

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from curation.cli import app
from curation.schema import (
    EXPORTED_MODELS,
    Case,
    Figure,
    Finding,
    Generator,
    Item,
    ItemFormat,
    Patient,
    Render,
    Series,
    SourceName,
    TaskType,
    Visit,
)


def _case() -> Case:
    series = Series(series_id="I1", format="dicom", sequence="T1w", files=["a.dcm"],
                    renders=[Render(plane="axial", slice_index=3, window=(0.0, 1.0), path="r.png")])
    return Case(case_id="adni-0123456789ab", source=SourceName.adni, license="DUA",
                patient=Patient.with_age(93, sex="F"), visits=[Visit(visit_id="bl", days_from_baseline=0,
                                                                      scores={"MMSE": 28.0}, series=[series])],
                figures=[Figure(figure_id="F1", caption="c")],
                findings=[Finding(text="FLAIR lesion", label="white matter hyperintensity", category="finding")])


def test_round_trips() -> None:
    case = _case()
    assert Case.model_validate_json(case.model_dump_json()) == case
    assert case.patient.age == 90 and case.patient.age_90_plus
    item = Item(item_id="itm-1", case_id=case.case_id, source=case.source, task_type=TaskType.direct_diagnosis,
                format=ItemFormat.mcq, question="q", options=["a", "b"], answer="a",
                generator=Generator(kind="template", template_id="t"))
    assert Item.model_validate(json.loads(item.model_dump_json())) == item


def test_unknown_fields_are_rejected() -> None:
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Case.model_validate({**_case().model_dump(), "patient_name": "x"})


def test_schema_export(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["schema", "export", str(tmp_path)])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(f"{n}.schema.json" for n in EXPORTED_MODELS)
    schema = json.loads((tmp_path / "Case.schema.json").read_text())
    assert "case_id" in schema["properties"]

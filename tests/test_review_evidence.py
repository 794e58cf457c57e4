"""Evidence marking without a server: stack layout, page -> voxel/mm geometry, parsing regions, agreement, release."""

from __future__ import annotations

import json

import numpy as np
import pytest

from curation.params import StackParams
from curation.review.evidence import release_evidence
from curation.review.merge import box_iou, evidence_agreement, parse_annotation
from curation.review.stack import SeriesRef, StackBuilder, stack_indices, to_volume
from curation.schema import Evidence, Generator, Item, MarkedEvidence, Review, ReviewDecision, Series

SHAPE = (20, 30, 10)
AFFINE = [[2.0, 0, 0, -20.0], [0, 1.0, 0, -15.0], [0, 0, 3.0, 0.0], [0, 0, 0, 1]]
STACK = {"series_id": "s1", "visit_id": "v0", "sequence": "FLAIR", "plane": "axial", "shape": list(SHAPE),
         "affine": AFFINE, "evidence_slice": 4, "target": "lesion", "png_size": [256, 192]}
TASK = {"stack_series": [STACK], "stack_pages": [[0, 4, 12.0], [0, 0, 0.0], [0, 2, 6.0]]}


def rect(page: int, x: float, y: float, w: float, h: float, label: str = "Lesion", rotation: float = 0) -> dict:
    return {"from_name": "evidence_box", "to_name": "stack", "type": "rectanglelabels", "item_index": page,
            "original_width": 256, "original_height": 192,
            "value": {"x": x, "y": y, "width": w, "height": h, "rotation": rotation, "rectanglelabels": [label]}}


def ann(who: int, *regions: dict, verdict: str | None = "Accept", visible: str = "Yes") -> dict:
    result = [{"from_name": "evidence_visible", "type": "choices", "value": {"choices": [visible]}}, *regions]
    if verdict:
        result.append({"from_name": "verdict", "type": "choices", "value": {"choices": [verdict]}})
    return {"completed_by": who, "result": result}


def test_stack_layout_evidence_first_then_every_second_slice_and_the_target_neighbourhood():
    p = StackParams(stride=2, target_margin=2, max_slices=64)
    assert stack_indices((10, 30), 50, 21, p) == [21, 10, 12, 14, 16, 18, 19, 20, 22, 23, 24, 26, 28, 30]
    capped = stack_indices((0, 199), 200, 100, StackParams(stride=2, target_margin=2, max_slices=20))
    assert capped[0] == 100 and len(capped) <= 20 and {98, 99, 101, 102} <= set(capped)


def test_page_point_to_voxel_and_mm_inverts_the_render():
    # axial pages show x right-to-left and y anterior at the top: the top-left corner is the voxel edge (X-0.5, Y-0.5)
    vox, mm = to_volume(STACK, 4, 0.0, 0.0)
    assert vox == [19.5, 29.5, 4.0] and mm == [19.0, 14.5, 12.0]
    vox, mm = to_volume(STACK, 4, 1.0, 1.0)
    assert vox == [-0.5, -0.5, 4.0] and mm == [-21.0, -15.5, 12.0]
    coronal = {**STACK, "plane": "coronal"}
    vox, _ = to_volume(coronal, 7, 0.5, 0.5)  # the centre of a coronal page: x and z at the centre, y = slice
    assert vox == [9.5, 7.0, 4.5]


def test_stack_pages_are_cut_with_one_window_and_map_back_exactly(tmp_path):
    import nibabel as nib
    from PIL import Image

    data = np.zeros(SHAPE, dtype=np.float32)
    data[2:18, 3:27, :] = 0.4
    data[4:7, 8:13, 4] = 1.0  # a 'lesion' on slice 4: x 4-6, y 8-12 (clear of the corner label)
    nib.save(nib.Nifti1Image(data, np.array(AFFINE)), tmp_path / "v.nii.gz")
    series = Series(series_id="s1", format="nifti", nifti=str(tmp_path / "v.nii.gz"))
    stack = StackBuilder(StackParams(size=120), {}, tmp_path / "stacks").build(SeriesRef(series, "v0"), "axial", 4,
                                                                             "lesion")
    assert stack.slices[0] == 4 and stack.paths[0].endswith("axial_004_evidence.png")
    px = np.asarray(Image.open(stack.paths[0]).convert("L"), dtype=float)
    px[:20] = 0  # the corner label
    px[:, :4], px[:, -4:], px[-4:] = 0, 0, 0  # the frame of the evidence page
    ys, xs = np.nonzero(px > 150)
    h, w = px.shape
    box = {"x": 100 * xs.min() / w, "y": 100 * ys.min() / h, "width": 100 * (xs.max() + 1 - xs.min()) / w,
           "height": 100 * (ys.max() + 1 - ys.min()) / h}
    task = {"stack_series": [stack.describe()], "stack_pages": [[0, s, m] for s, m in
                                                                zip(stack.slices, stack.positions_mm, strict=True)]}
    d = parse_annotation(ann(1, rect(0, box["x"], box["y"], box["width"], box["height"])), task)
    m = d.evidence[0]
    assert m.voxel_min == pytest.approx((3.5, 7.5, 4), abs=0.3) and m.voxel_max == pytest.approx((6.5, 12.5, 4),
                                                                                                  abs=0.3)
    assert m.mm_min == pytest.approx((-13.0, -7.5, 12.0), abs=0.6) and m.mm_max == pytest.approx((-7.0, -2.5, 12.0),
                                                                                                  abs=0.6)
    assert m.position_mm == 12.0 and m.series_id == "s1" and m.visit_id == "v0"


def test_regions_parse_to_marks_and_not_visible_rejects():
    d = parse_annotation(ann(1, rect(2, 25, 50, 50, 25, "Ventricle")), TASK)
    m = d.evidence[0]
    assert (m.label, m.shape, m.slice_index, m.position_mm, m.plane) == ("ventricle", "rectangle", 2, 6.0, "axial")
    assert m.image_box == (0.25, 0.5, 0.75, 0.75)
    assert m.voxel_min == (4.5, 7.0, 2.0) and m.voxel_max == (14.5, 14.5, 2.0)  # x = 19.5 - 20 fx, y = 29.5 - 30 fy
    assert m.mm_min == (-11.0, -8.0, 6.0) and m.mm_max == (9.0, -0.5, 6.0)
    # a rectangle rotated by 90 degrees about its top-left corner covers the box to its left
    r = parse_annotation(ann(1, rect(0, 50, 50, 10, 10, rotation=90)), TASK).evidence[0]
    assert r.image_box == pytest.approx((0.5 - 0.1 * 192 / 256, 0.5, 0.5, 0.5 + 0.1 * 256 / 192), abs=1e-4)
    # a keypoint is a box of no size
    k = parse_annotation(ann(1, {"from_name": "evidence_point", "type": "keypointlabels", "item_index": 1,
                                 "value": {"x": 50, "y": 50, "width": 1, "keypointlabels": ["Hippocampus"]}}), TASK)
    assert k.evidence[0].voxel_min == k.evidence[0].voxel_max and k.evidence[0].slice_index == 0
    # evidence not visible rejects the item with that reason, even with no verdict or an accept
    for verdict in (None, "Accept", "Accept with edits"):
        d = parse_annotation(ann(1, verdict=verdict, visible="No"), TASK)
        assert (d.verdict, d.reject_reason, d.evidence_visible) == ("reject", "evidence_not_visible", "no")
    d = parse_annotation(ann(1, verdict="Reject", visible="No") | {"result": [
        *ann(1, verdict="Reject", visible="No")["result"],
        {"from_name": "reject_reason", "type": "choices", "value": {"choices": ["PHI visible"]}}]}, TASK)
    assert d.reject_reason == "phi_visible"  # a reviewer's own reason stands
    assert parse_annotation(ann(1, visible="Wrong slice"), TASK).evidence_visible == "wrong_slice"


@pytest.mark.parametrize(("region", "message"), [
    (rect(0, 10, 10, 5, 5, "Tumour"), "evidence label"),
    (rect(7, 10, 10, 5, 5), "page 7"),
    (rect(0, "x", 10, 5, 5), "region x is not a number"),
])
def test_malformed_regions_are_named(region, message):
    with pytest.raises(ValueError, match=message):
        parse_annotation(ann(1, region), TASK)


def test_figure_pages_keep_only_where_on_the_image():
    task = {"stack_series": [], "stack_pages": [[-1, 0, None]]}
    m = parse_annotation(ann(1, rect(0, 10, 20, 30, 40)), task).evidence[0]
    assert m.plane == "figure" and m.slice_index == 0 and m.voxel_min is None and m.mm_min is None
    assert m.image_box == (0.1, 0.2, 0.4, 0.6)


def test_evidence_agreement_same_slice_rate_and_rectangle_iou():
    def mark(slice_index: int, box: tuple[float, float, float, float], series: str = "s1") -> MarkedEvidence:
        return MarkedEvidence(label="lesion", shape="rectangle", series_id=series, plane="axial",
                              slice_index=slice_index, image_box=box)

    def dec(*marks: MarkedEvidence) -> ReviewDecision:
        return ReviewDecision(reviewer="r", verdict="accept", evidence=list(marks))

    assert box_iou((0, 0, 0.2, 0.2), (0.1, 0, 0.3, 0.2)) == pytest.approx(1 / 3)
    ag = evidence_agreement({
        "a": [dec(mark(4, (0, 0, 0.2, 0.2))), dec(mark(4, (0.1, 0, 0.3, 0.2)))],  # same slice, IoU 1/3
        "b": [dec(mark(4, (0, 0, 0.2, 0.2))), dec(mark(5, (0, 0, 0.2, 0.2)))],  # other slice
        "c": [dec(mark(4, (0, 0, 0.2, 0.2)), mark(9, (0, 0, 1, 1), "s2")), dec(mark(4, (0, 0, 0.2, 0.2)))],  # 1
        "d": [dec(mark(1, (0, 0, 1, 1)))],  # one reviewer: no pair
    })
    assert ag == {"evidence_pairs": 3, "evidence_same_slice_rate": pytest.approx(2 / 3, abs=1e-4),
                  "evidence_rectangle_pairs": 2, "evidence_rectangle_iou": pytest.approx((1 / 3 + 1) / 2, abs=1e-4)}
    assert evidence_agreement({})["evidence_same_slice_rate"] is None


def test_release_evidence_is_coordinates_without_ids_or_paths():
    mark = MarkedEvidence(reviewer="rev-1", label="lesion", shape="rectangle", series_id="I102001", plane="axial",
                          slice_index=13, position_mm=-4.0, image_box=(0.1, 0.2, 0.3, 0.4), voxel_min=(1, 2, 13),
                          voxel_max=(3, 4, 13), mm_min=(-1, -2, -4), mm_max=(1, 2, -4), sequence="FLAIR")
    item = Item(item_id="i1", case_id="c1", source="adni", task_type="lesion_recognition", format="mcq", question="q",
                options=["a", "b"], answer="a", answer_index=0, images=["normalize/x/axial_012.png"],
                generator=Generator(kind="template"),
                evidence=[Evidence(image="normalize/x/axial_012.png", series_id="I102001", plane="axial",
                                   slice_index=12, target="lesion", sequence="FLAIR")],
                review=Review(final_verdict="accept", evidence=[mark]))
    ref = json.loads(release_evidence(item, "reference", []))
    assert [e["kind"] for e in ref] == ["claimed", "marked"] and {e["series"] for e in ref} == {0}
    text = json.dumps(ref)
    assert "I102001" not in text and "png" not in text and "image_file" not in text
    assert ref[1]["mm_min"] == [-1, -2, -4] and ref[1]["slice_index"] == 13
    pixels = json.loads(release_evidence(item, "pixels", ["i1_0.png"]))
    assert pixels[0]["image_file"] == "i1_0.png" and "image_file" not in pixels[1]
    assert json.loads(release_evidence(item.model_copy(update={"evidence": [], "review": None}), "pixels", [])) == []

"""The data model: every record a stage reads or writes is one of these."""

from __future__ import annotations

import json
from enum import StrEnum
from importlib import resources
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

SCHEMA_VERSION = "1.2.0"  # 1.2: a finding says whether it is hedged or historical


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


def source_names() -> list[str]:
    """Every source the project reads: one spec each, ``curation/ingest/specs/<source>.yaml``, beside its ingest module
    ``curation/ingest/<source, - as _>.py``. A new source is those two files; nothing lists it anywhere else."""
    specs = resources.files("curation").joinpath("ingest", "specs")
    return sorted(f.name.removesuffix(".yaml") for f in specs.iterdir() if f.name.endswith(".yaml"))


# members by the source's name with - as _ (case-reports: SourceName.case_reports), values the names themselves
SourceName = StrEnum("SourceName", [(n.replace("-", "_"), n) for n in source_names()])  # type: ignore[misc]


class TaskType(StrEnum):
    direct_diagnosis = "direct_diagnosis"
    differential_diagnosis = "differential_diagnosis"
    lesion_recognition = "lesion_recognition"
    localization = "localization"
    sequence_identification = "sequence_identification"
    temporal_progression = "temporal_progression"
    causal_reasoning = "causal_reasoning"
    multi_source_integration = "multi_source_integration"
    rationale_generation = "rationale_generation"
    next_step = "next_step"
    multi_turn_dialogue = "multi_turn_dialogue"


class ItemFormat(StrEnum):
    mcq = "mcq"
    open = "open"
    multi_turn = "multi_turn"


class VisualDim(StrEnum):
    small_object = "small_object"
    fine_detail = "fine_detail"
    spatial = "spatial"


class ReasoningDim(StrEnum):
    temporal = "temporal"
    causal = "causal"
    long_tail = "long_tail"
    multi_source = "multi_source"


class Patient(Model):
    age: int | None = Field(None, description="Years at baseline; ages of 90 and over are stored as 90.")
    age_90_plus: bool = False
    sex: Literal["F", "M", "O"] | None = None
    education_years: float | None = None
    handedness: Literal["R", "L", "A"] | None = None
    ethnicity: str | None = None

    @classmethod
    def with_age(cls, age: float | None, **kw: Any) -> Patient:
        if age is None or not 0 <= age <= 150:  # NaN, infinite or absurd ages are unknown, not an overflow
            return cls(**kw)
        years = int(age)
        return cls(age=min(years, 90), age_90_plus=years >= 90, **kw)


class Step(Model):
    """One processing step applied to a series, recorded for provenance (TorchIO-style history)."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    version: str = ""


Target = Literal["hippocampus", "lateral_ventricles", "lesion", "brain", "figure"]


# how a lesion was located where the source's own segmentation placed it (a BIDS derivative): the truth, not a finding
MASK_LOCATED = "lesion_mask"


class Render(Model):
    plane: Literal["axial", "coronal", "sagittal", "figure", "montage"]
    slice_index: int | None = None
    window: tuple[float, float] | None = None
    path: str
    # change, change_baseline: a follow-up FLAIR registered onto its baseline and the baseline, at the lesion change
    role: Literal["mid", "key", "paired", "montage", "figure", "target", "change", "change_baseline"] = "mid"
    target: Target | None = Field(None, description="The structure this render was placed to show")
    position_mm: float | None = Field(None, description="World (RAS, mm) coordinate of the slice along its axis "
                                      "where it passes through its target (a plain slice or montage: at its centre)")
    located_by: str | None = Field(None, description="How the target was found: atlas_registration, lesion_mask, ...")


class Evidence(Model):
    """Where an item's answer can be seen: one render of one series (or a figure), and what it shows."""

    image: str
    series_id: str | None = None
    visit_id: str | None = None
    sequence: str | None = None
    target: Target | None = None
    plane: str | None = None
    slice_index: int | None = None
    position_mm: float | None = None
    target_fraction: float | None = Field(None, description="Target area / brain area in the shown slice")


class Record(Model):
    """A record of what a stage measured or did, written as it was made: a key the code did not set is absent, not
    null (``model_fields_set``), so a series that never reached a step has no key of that step; a field whose JSON
    key is no Python name goes by its ``serialization_alias`` (``pass``)."""

    @model_serializer(mode="wrap")
    def _set_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped = handler(self)
        out = {}
        for name, f in type(self).model_fields.items():
            key = f.serialization_alias if f.serialization_alias in dumped else name
            if name in self.model_fields_set and key in dumped:
                out[f.serialization_alias or name] = dumped[key]
        return out


class PlaneFallback(Record):
    """The plane a target is shown in instead of its own, which the acquisition cannot show, and why."""

    plane: str
    reason: str


class Placement(Record):
    """Where the normalize stage placed a target in a series (``SeriesQC.targets``): a slice (the brain montage:
    ``slices``), how it was found and, for a lesion, its size, side and lobes."""

    target: Target
    plane: Literal["axial", "coronal", "sagittal", "montage"]
    slice_index: int | None = None
    position_mm: float | None = None
    located_by: str
    target_fraction: float | None = None  # target area / brain area in the shown slice
    centre_mm: list[float] | None = None
    instead_of: PlaneFallback | None = None
    slices: list[int] | None = None  # the montage's axial slices and their positions
    positions_mm: list[float] | None = None
    volume_mm3: float | None = None  # a lesion: the shown one's volume, the count of lesions and their sizes
    count: int | None = None
    largest_mm3: float | None = None
    smallest_mm3: float | None = None
    total_mm3: float | None = None
    largest_centre_mm: list[float] | None = None
    laterality: Literal["left", "right", "bilateral"] | None = None
    fov_mm: float | None = None  # the shown slice's field of view, left to right, and the lesion's diameter in it
    diameter_mm: float | None = None
    # lobe -> share of the lesion's voxels in the shown slice and in the whole mask, largest first: the lobes are
    # the atlas's (lobes.yaml), not a closed set here
    lobes_in_slice: dict[str, float] | None = None
    lobes: dict[str, float] | None = None
    lobe: str | None = None
    lobes_ruled_out: list[str] | None = None


class FitRecord(Record):
    """The anatomy fit as the series' provenance and QC record it (the linear part; the deformation is not
    written)."""

    library: str
    presets: str
    series_kind: Literal["head", "brain"]
    template_to_series_ras: list[list[float]]


class VentricleMeasures(Record):
    """The lateral ventricles' volume measured on the series, or why not (``not_measured``: structure -> why)."""

    lateral_ventricles_ml: float | None = None
    how: str | None = None
    not_measured: dict[str, str] = Field(default_factory=dict)


class Anatomy(Record):
    """What locating the targets found (``SeriesQC.anatomy``): the template and its fit, why each target that is
    not placed is not (``not_located``: target -> why), the measures, and the T1w the targets were carried from."""

    template: str | None = None
    registration: str | None = None
    version: str | None = None
    fit: Literal["ok", "refused", "failed"] | None = None
    fit_reason: str | None = None
    metric: float | None = None
    scale: list[float] | None = None
    library: str | None = None  # the fit as FitRecord records it
    presets: str | None = None
    series_kind: Literal["head", "brain"] | None = None
    template_to_series_ras: list[list[float]] | None = None
    not_located: dict[str, str] = Field(default_factory=dict)
    measures: VentricleMeasures | None = None
    targets_from: str | None = None


class Deface(Record):
    """What the deface step did: removed the face (``removed_voxels``), or found none to remove (``reason``)."""

    outcome: Literal["defaced", "face_free"]
    reason: str | None = None
    removed_voxels: int | None = None


class LesionChange(Record):
    """A follow-up FLAIR's lesion change against its baseline FLAIR (``reference`` of ``reference_visit``): the
    largest new or enlarging lesion (``found``: None where there is none) and the baseline's render at it."""

    found: Literal["new", "enlarging"] | None = None
    reference: str
    reference_visit: str | None = None
    baseline_render: str | None = None
    centre_mm: list[float] | None = None
    slice_index: int | None = None
    volume_mm3: float | None = None
    contrast: float | None = None
    count: int | None = None


class SeriesQC(Record):
    """The quality record of a series (normalize): the volume's metrics and flags, the planes its sampling cannot
    show, the targets placed and the anatomy fit, the deface outcome, and what registration and the longitudinal
    steps added."""

    foreground_fraction: float | None = None
    snr: float | None = None
    intensity_min: float | None = None
    intensity_max: float | None = None
    slice_gap_mm: float | None = None
    duplicate_slices: int | None = None
    irregular_gaps: int | None = None
    source_orientation: str | None = None
    flags: list[str] = Field(default_factory=list)
    passed: bool | None = Field(None, validation_alias=AliasChoices("pass", "passed"), serialization_alias="pass")
    source_sampling_mm: list[float] = Field(default_factory=list)
    planes_refused: list[str] = Field(default_factory=list)
    planes_refused_reason: dict[str, str] = Field(default_factory=dict)  # plane -> why the sampling cannot show it
    anatomy: Anatomy = Field(default_factory=Anatomy)
    targets: list[Placement] = Field(default_factory=list)
    deface: Deface | None = None
    registered_to: str | None = None  # the series id of the visit's T1w it was resampled onto
    paired_with: str | None = None  # the series id of the baseline T1w it was registered to
    change: LesionChange | None = None

    def flag(self, reason: str) -> None:
        """Add a flag (a later step that failed on the series)."""
        self.flags = [*self.flags, reason]


class MaskBox(Record):
    """A box de-identification masked on a figure: x0, y0, x1, y1 in its original pixels, and the tag of the text."""

    box: list[int]
    tag: str


class PixelText(Record):
    """What de-identification did to a figure's burned-in text (deid.pixels): the OCR that read it, the boxes
    masked (tags, never the text) and why a reviewer must look (``review``; empty when not)."""

    tool: str
    psm: int
    read_at: str
    size: list[int]
    words_read: int
    masked: list[MaskBox]
    masked_fraction: float
    review: list[str]


class PanelOf(Record):
    """The figure a panel was cut from (ingest): its id, the panel's letter and box (left, top, right, bottom)."""

    figure_id: str
    letter: str
    box: list[int]


class FigureQC(Record):
    """The quality record of a figure: its size, mean and flags as normalize rendered it, de-identification's
    masking of burned-in text and, for a panel, the figure it was cut from."""

    width: int | None = None
    height: int | None = None
    mean: float | None = None
    flags: list[str] = Field(default_factory=list)
    passed: bool | None = Field(None, validation_alias=AliasChoices("pass", "passed"), serialization_alias="pass")
    pixel_text: PixelText | None = None
    panel_of: PanelOf | None = None


class Series(Model):
    series_id: str
    modality: str = "MR"
    sequence: str | None = None
    description: str | None = None
    format: Literal["dicom", "analyze", "nifti", "png", "jpeg"]
    files: list[str] = Field(default_factory=list)
    nifti: str | None = None
    # a lesion segmentation the source ships for this volume (a BIDS derivative on its grid): where the lesion is,
    # as truth, instead of what the normalize stage's finder reads from the intensities
    lesion_mask: str | None = None
    sidecar: dict[str, Any] = Field(default_factory=dict)
    spacing: tuple[float, ...] | None = None
    shape: tuple[int, ...] | None = None
    orientation: str | None = None
    renders: list[Render] = Field(default_factory=list)
    qc: SeriesQC = Field(default_factory=SeriesQC)
    provenance: list[Step] = Field(default_factory=list)


class Visit(Model):
    visit_id: str
    days_from_baseline: int | None = None
    diagnosis: str | None = None
    scores: dict[str, float | str | None] = Field(default_factory=dict)
    series: list[Series] = Field(default_factory=list)


class Figure(Model):
    figure_id: str
    label: str | None = None
    caption: str = ""
    path: str | None = None
    missing: bool = False
    # what the image is, as its source states it (curation/figure_kinds.yaml); None where it does not say
    kind: str | None = None
    modality: str | None = None
    sequence: str | None = None
    contrast: bool = False
    plane: str | None = None
    renders: list[Render] = Field(default_factory=list)
    qc: FigureQC = Field(default_factory=FigureQC)

    @property
    def pixels_masked(self) -> bool:
        """Whether de-identification masked burned-in text on this figure (deid.pixels)."""
        return self.qc.pixel_text is not None and bool(self.qc.pixel_text.masked)


class Finding(Model):
    text: str
    label: str
    category: Literal["finding", "anatomy", "diagnosis", "sequence", "temporal"]
    section: str | None = None
    anatomy: str | None = None
    laterality: Literal["left", "right", "bilateral"] | None = None
    sequence: str | None = None
    negated: bool = False  # what the text asserts of it (curation.nlp.context): "no haemorrhage"
    hedged: bool = False  # "possible abscess", "metastasis cannot be excluded"
    historical: bool = False  # "history of stroke", "s/p resection"
    temporal: str | None = None
    source_field: str | None = None
    start: int | None = None
    end: int | None = None

    @property
    def affirmed(self) -> bool:
        """Said to be present now, without doubt."""
        return not (self.negated or self.hedged or self.historical)


class Diagnosis(Model):
    primary: str | None = None
    differential: list[str] = Field(default_factory=list)
    certainty: str | None = None


class Publication(Model):
    title: str | None = None
    journal: str | None = None
    doi: str | None = None
    pmcid: str | None = None
    authors: list[str] = Field(default_factory=list)
    url: str | None = None


def attribution_of(authors: list[str], journal: str, doi: str | None) -> str:
    """What the licence asks for: the authors, the journal and the DOI. Not the title, which names the patient in
    some case reports ("... in Mr. X of Boston, MRN ..."); the title is text and is de-identified as such."""
    who = ", ".join(authors) or "the authors"
    return f"{who}. {journal}. doi:{doi}" if doi else f"{who}. {journal}."


class Provenance(Model):
    source_paths: list[str] = Field(default_factory=list, description="SHA-256 of source-relative paths")
    stages: dict[str, str] = Field(default_factory=dict)


class SourceFlag(Model):
    """Something in a source field that no model or reader should take as it stands: instruction-like text aimed at a
    model (removed; ``rule`` names the pattern, ``sha256`` the removed sentence, never the text itself)."""

    kind: Literal["instruction_like"]
    field: str
    rule: str
    sha256: str


class Case(Model):
    schema_version: str = SCHEMA_VERSION
    case_id: str
    source: SourceName
    license: str
    attribution: str | None = None
    # the source's own identifier or address of the case (a MedPix case id and its page, a Radiopaedia case URL, an
    # article's DOI); None where the source's id names a participant (ADNI, OASIS): the case_id is its keyed hash
    origin: str | None = None
    publication: Publication | None = None
    title: str | None = None
    patient: Patient = Field(default_factory=Patient)
    history: str = ""
    presentation: str = ""
    notes: str = ""
    # a report's named parts where its source keeps them apart (findings, exam, treatment, discussion)
    sections: dict[str, str] = Field(default_factory=dict)
    ehr: dict[str, float | str | None] = Field(default_factory=dict)
    visits: list[Visit] = Field(default_factory=list)
    figures: list[Figure] = Field(default_factory=list)
    diagnosis: Diagnosis = Field(default_factory=Diagnosis)
    findings: list[Finding] = Field(default_factory=list)
    provenance: Provenance = Field(default_factory=Provenance)
    flags: list[SourceFlag] = Field(default_factory=list)

    @property
    def stable_id(self) -> str:
        """The case's name that no project secret changes: its source's own id, else its (keyed) case id."""
        return self.origin or self.case_id

    def flag_notes(self) -> list[str]:
        """The case's flags as the one-line notes its items and review tasks carry."""
        return [f"{f.field}: instruction-like text removed (rule {f.rule})" for f in self.flags]

    def all_series(self) -> list[Series]:
        return [s for v in self.visits for s in v.series]

    def text_fields(self) -> dict[str, str]:
        """The case's free text by the name its findings are extracted under (``Finding.source_field``)."""
        fields = {"history": self.history, "presentation": self.presentation, "notes": self.notes}
        fields.update({f"section:{k}": v for k, v in self.sections.items()})
        fields.update({f"figure:{f.figure_id}": f.caption for f in self.figures})
        return fields


class Generator(Model):
    kind: Literal["template", "llm"]
    template_id: str | None = None
    template_version: str | None = None
    model: str | None = None
    prompt_hash: str | None = None
    seed: int | None = None


class Augmentation(Model):
    """One change an LLM made to a template item; ``replaced`` holds what was there before."""

    step: str
    model: str
    prompt_id: str
    prompt_version: int
    cache_key: str
    replaced: dict[str, Any] = Field(default_factory=dict)


class MarkedEvidence(Model):
    """A region a reviewer marked on a slice of an item's stack: voxel indices (voxel centres at integers) and world
    RAS mm of its corners; a keypoint has equal corners. Figures (no volume) have only ``image_box``."""

    reviewer: str | None = None
    label: Literal["lesion", "hippocampus", "ventricle", "other"]
    shape: Literal["rectangle", "keypoint"]
    series_id: str | None = None
    visit_id: str | None = None
    sequence: str | None = None
    plane: str | None = None
    slice_index: int | None = None
    position_mm: float | None = None
    image_box: tuple[float, float, float, float] = Field(description="x0, y0, x1, y1 as fractions of the slice")
    voxel_min: tuple[float, float, float] | None = None
    voxel_max: tuple[float, float, float] | None = None
    mm_min: tuple[float, float, float] | None = None
    mm_max: tuple[float, float, float] | None = None


class ReviewDecision(Model):
    reviewer: str
    verdict: Literal["accept", "accept_with_edits", "reject"]
    reject_reason: str | None = None
    edits: dict[str, Any] = Field(default_factory=dict)
    difficulty: int | None = None
    comment: str | None = None
    evidence_visible: Literal["yes", "no", "wrong_slice"] | None = None
    evidence: list[MarkedEvidence] = Field(default_factory=list)


class Review(Model):
    decisions: list[ReviewDecision] = Field(default_factory=list)
    final_verdict: Literal["accept", "accept_with_edits", "reject"] | None = None
    adjudicated: bool = False
    agreement: float | None = None
    evidence: list[MarkedEvidence] = Field(default_factory=list, description="Marks of the deciding review(s)")


class Turn(Model):
    role: Literal["clinician", "model", "patient"]
    text: str


class Verdict(Model):
    """The LLM verifier's verdict on an item (filter's verifier gate)."""

    model: str | None = None
    passed: bool
    reason: str | None = None


class TemplateValidity(Model):
    """How the item's template fared against the blind baselines (filter's template-validity gate)."""

    template: str
    best_blind_baseline: str | None = None
    best_blind_lift: float | None = None
    above_threshold: bool = False
    blocked: bool = False
    reasons: list[str] = Field(default_factory=list)
    max_blind_lift: float


class Quality(Model):
    """What the quality gates recorded on an item. Only what a gate set is written: a check that did not run is
    absent, not null (the release's ``gates`` column and the card count the checks that ran)."""

    gates: Literal["passed"] | None = None
    checks: list[str] = Field(default_factory=list)
    template_validity: TemplateValidity | None = None
    verifier: Verdict | None = None
    text_only_correct_rate: float | None = None
    image_not_needed: bool | None = None
    answered_without_image: list[str] = Field(default_factory=list, description="models that answered it right "
                                              "without its image (ablation)")
    difficulty_pass_rates: dict[str, float] = Field(default_factory=dict)
    difficulty_by: Literal["rule"] | None = None

    @model_serializer(mode="wrap")
    def _set_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}

    def ran(self) -> list[str]:
        """The model-based checks that ran on the item."""
        return [k for k in ("verifier", "text_only_correct_rate", "difficulty_pass_rates", "image_not_needed")
                if k in self.model_fields_set]


class Item(Model):
    schema_version: str = SCHEMA_VERSION
    item_id: str
    case_id: str
    source: SourceName
    task_type: TaskType
    format: ItemFormat
    question: str
    options: list[str] = Field(default_factory=list)
    answer: str
    answer_index: int | None = None
    reference_answer: str | None = None
    rationale: str | None = None
    turns: list[Turn] = Field(default_factory=list)
    images: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    context: str = ""
    visual_dims: list[VisualDim] = Field(default_factory=list)
    reasoning_dims: list[ReasoningDim] = Field(default_factory=list)
    template_id: str | None = None
    facts: dict[str, Any] = Field(default_factory=dict)
    generator: Generator
    augmentations: list[Augmentation] = Field(default_factory=list)
    difficulty: str | None = None
    quality: Quality = Field(default_factory=Quality)
    review: Review | None = None
    split: str | None = None
    license: str = ""
    attribution: str | None = None
    origin: str | None = None  # the case's (Case.origin)
    # an image of the item shows pixels de-identification altered (burned-in text masked): a derivative, which a
    # no-derivatives licence does not allow to be shared (``release.no_derivatives``)
    pixels_altered: bool = False
    status: Literal["draft", "kept", "rejected", "reviewed", "unreviewed", "released"] = "draft"
    source_flags: list[str] = Field(default_factory=list, description="its case's flags (Case.flags), for review")

    @property
    def stable_id(self) -> str:
        """Its case's name that no project secret changes (``Case.stable_id``)."""
        return self.origin or self.case_id


class ReleaseManifest(Model):
    schema_version: str = SCHEMA_VERSION
    name: str
    version: str
    created_from: dict[str, str | None]
    counts: dict[str, dict[str, int]]
    files: dict[str, str]
    canary: str
    licenses: dict[str, int]
    reviewed_items: int
    unreviewed_items: int


class ReleaseImage(Model):
    """One image of a release row: its file name under ``images/`` and, once written or read, its PNG bytes."""

    path: str
    data: bytes | None = None


class ReleaseRow(Model):
    """One row of a release's Parquet files, in column order; the split is the file's name, not a column. The
    Parquet features, the Croissant fields, ``release verify``'s columns, ``release diff`` and the evaluation
    harness all derive from this model."""

    item_id: str = Field(description="Stable item identifier (content hash).")
    case_id: str = Field(description="Pseudonymous case identifier; all items of a case are in one split.")
    task_type: str = Field(description="Task family (direct_diagnosis, differential_diagnosis, lesion_recognition, "
                                       "...).")
    format: str = Field(description="mcq, open or multi_turn.")
    question: str = Field(description="The question shown with the images.")
    context: str = Field(description="Clinical context (EHR fields, presentation) given with the question.")
    options: list[str] = Field(description="Options of a multiple-choice item, in order (A, B, ...).")
    answer: str = Field(description="The correct answer (for an MCQ, the text of the correct option).")
    answer_index: int | None = Field(description="Index of the correct option (MCQ).")
    reference_answer: str = Field(description="Reference answer for open questions.")
    rationale: str = Field(description="Why the answer is correct.")
    turns: str = Field(description="Multi-turn dialogue as JSON [{role, text}].")
    images: list[ReleaseImage] = Field(description="The item's images (PNG bytes) for sources released as pixels.")
    image_refs: list[str] = Field(description="For sources released as references: per image a JSON object (source, "
                                              "render name, SHA-256 of the PNG) that `curate release rebuild` matches "
                                              "against renders of your own copy.")
    visual_dims: list[str] = Field(description="Visual dimensions: small_object, fine_detail, spatial.")
    reasoning_dims: list[str] = Field(description="Reasoning dimensions: temporal, causal, long_tail, multi_source.")
    template_id: str = Field(description="The question template that made the item (empty for none).")
    difficulty: str = Field(description="Difficulty rating from the filter stage (empty when unrated).")
    review_status: str = Field(description="reviewed or unreviewed (expert review).")
    review_verdict: str = Field(description="The reviewers' final verdict (empty when unreviewed).")
    source: str = Field(description=f"Source collection ({', '.join(SourceName)}).")
    license: str = Field(description="Licence of the item's source material.")
    attribution: str = Field(description="Attribution the licence requires, built from the item's own origin.")
    origin: str = Field(description="The source's own identifier or address of the item's case (a MedPix case id "
                                    "and page, a Radiopaedia case URL, an article DOI); for cohorts whose ids name a "
                                    "participant (ADNI, OASIS), the keyed hash of that id, which the case_id is.")
    license_spdx: str = Field(description="The SPDX id of the item's licence (empty where the source states no SPDX "
                                          "licence: then `license` holds the source's own named terms).")
    license_class: str = Field(description="commercial, non_commercial, reference_only or no_licence_stated "
                                           "(`curate release build --licence-filter`).")
    generator: str = Field(description="What made the item, as JSON: template id and version, or model and prompt "
                                       "hash, and every LLM augmentation (step, model, prompt id and version, cache "
                                       "key).")
    gates: str = Field(description="The quality gates' results recorded on the item, as JSON (verifier, text-only "
                                   "and difficulty pass rates where run) and its status after filtering and review.")
    evidence: str = Field(description="Where the answer can be seen, as a JSON list: what the item claims (kind "
                                      "claimed: series number, sequence, plane, slice index, position in mm, target "
                                      "and its share of the brain in that slice) and what reviewers marked (kind "
                                      "marked: label, shape, plane, slice, image, voxel and mm boxes); coordinates "
                                      "only, no ids, paths or pixels.")
    split: str = Field(default="test", exclude=True, description="The split (the Parquet file's name).")

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """The Parquet columns, in order."""
        return tuple(n for n in cls.model_fields if n != "split")

    @classmethod
    def from_item(cls, item: Item, *, image_files: list[str], image_refs: list[str], evidence: str,
                  license_spdx: str = "", license_class: str = "") -> ReleaseRow:
        """The row of ``item`` as released: its images by file name (pixels) or by reference, its evidence as the
        release writes it (``review.evidence.release_evidence``)."""
        return cls(
            item_id=item.item_id, case_id=item.case_id, split=item.split or "test", task_type=item.task_type.value,
            format=item.format.value, question=item.question, context=item.context, options=list(item.options),
            answer=item.answer, answer_index=item.answer_index, reference_answer=item.reference_answer or "",
            rationale=item.rationale or "", turns=json.dumps([t.model_dump() for t in item.turns]),
            images=[ReleaseImage(path=f) for f in image_files], image_refs=list(image_refs),
            visual_dims=[d.value for d in item.visual_dims], reasoning_dims=[d.value for d in item.reasoning_dims],
            template_id=item.template_id or "", difficulty=item.difficulty or "", review_status=item.status,
            review_verdict=(item.review.final_verdict if item.review else None) or "", source=item.source.value,
            license=item.license, attribution=item.attribution or "", origin=item.stable_id,
            license_spdx=license_spdx,
            license_class=license_class, evidence=evidence,
            generator=json.dumps({**item.generator.model_dump(exclude_none=True),
                                  "augmentations": [a.model_dump(exclude={"replaced"}) for a in item.augmentations]},
                                 sort_keys=True),
            gates=json.dumps({**item.quality.model_dump(mode="json"), "status": item.status}, sort_keys=True,
                             default=str))


EXPORTED_MODELS: dict[str, type[BaseModel]] = {
    m.__name__: m
    for m in (Case, Visit, Series, Figure, Finding, Item, Evidence, Augmentation, Review, ReleaseManifest)
}

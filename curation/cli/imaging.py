"""``curate imaging``: convert and render images outside the pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from curation.cli.common import ParamsOpt, clean_errors, echo_error, params_section, writer

app = typer.Typer(help="Convert and render images outside the pipeline.", no_args_is_help=True)


@app.command("convert")
@clean_errors
def imaging_convert(
    src: Annotated[Path, typer.Argument(help="DICOM file or series folder, Analyze .hdr, or NIfTI.")],
    out: Annotated[Path, typer.Argument(help="Output .nii.gz (canonical RAS+).")],
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Convert one image or series to a canonical RAS+ NIfTI (within normalize.bounds.max_volume_bytes)."""
    import nibabel as nib

    from curation.imaging.convert import MixedPatients, convert_path
    from curation.io.volumes import VolumeTooLarge, save_nifti

    if not src.exists():
        echo_error(f"{src}: does not exist")
        raise typer.Exit(3)
    try:
        img, info = convert_path(src, params_section(params, "normalize").bounds.max_volume_bytes)
    except VolumeTooLarge as exc:
        echo_error(f"{src}: volume_too_large ({exc})")
        raise typer.Exit(3) from None
    except MixedPatients as exc:
        echo_error(f"{src}: mixed_patients ({exc})")
        raise typer.Exit(3) from None
    except Exception as exc:
        echo_error(f"{src}: cannot convert ({type(exc).__name__}: {exc})")
        raise typer.Exit(3) from None
    from curation.records import writing

    with writer(out), writing(out):
        if out.name.endswith((".nii", ".nii.gz")):
            save_nifti(img, out)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            nib.save(img, str(out))
    typer.echo(f"{out}: shape {tuple(img.shape)}, orientation {info.orientation}")


@app.command("render")
@clean_errors
def imaging_render(
    volume: Annotated[Path, typer.Argument(help="A NIfTI/Analyze volume.")],
    out_dir: Annotated[Path, typer.Argument(help="Folder for PNG renders and renders.json.")],
    params: ParamsOpt = Path("params.yaml"),
    sequence: Annotated[str | None, typer.Option(help="The contrast (T1w, T2w, FLAIR, PD, ...): picks the "
                                                      "registration template and the lesion polarity.")] = None,
) -> None:
    """Render mid/key slices in three planes plus a montage, and list them in renders.json. Without --sequence the
    contrast is read from the file name's suffix (BIDS ``_T1w``, ``_T2w``, ``_FLAIR``, ``_PDw``, ...) when it has one;
    otherwise the T1 template is registered (mutual information copes, less well)."""
    from curation.imaging.normalize import process_series
    from curation.imaging.steps.base import SeriesTask
    from curation.ingest.sequences import sequence_from_name
    from curation.jsonio import write_json

    if sequence is None and (sequence := sequence_from_name(volume)) is not None:
        typer.echo(f"{volume.name}: sequence {sequence} (from the file name; --sequence to override)")
    fmt = "analyze" if volume.name.endswith(".hdr") else "nifti"
    with writer(out_dir):
        res = process_series(SeriesTask(fmt, [str(volume)], params_section(params, "normalize"), str(out_dir),
                                        str(out_dir), sequence))
        if not res.ok:
            echo_error(f"{volume}: {res.reason} ({res.detail})")
            raise typer.Exit(3)
        write_json(out_dir / "renders.json", res.value.renders)
    typer.echo(f"{out_dir}: {len(res.value.renders)} renders")


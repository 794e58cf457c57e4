"""The bottom I/O layer: format readers and writers below ingest, de-identification and imaging alike (none of them
reads a DICOM file, trusts a volume header, opens an image or writes a volume another way).

``dicom``: DICOM sniffing and checked reads. ``volumes``: Analyze/NIfTI header bounds and NIfTI writing. ``images``:
a figure image opened within a pixel bound.
"""

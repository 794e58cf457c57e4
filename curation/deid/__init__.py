"""De-identification: DICOM (PS3.15 Annex E), clinical text, image files, and a verifier."""

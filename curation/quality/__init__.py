"""Quality gates and patient-disjoint splits."""

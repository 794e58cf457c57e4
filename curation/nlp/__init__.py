"""Clinical text extraction: sections, findings with anatomy/laterality/sequence/negation, time, diagnosis."""

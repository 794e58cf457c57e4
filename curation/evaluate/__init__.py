"""Score models on a release: pass@k, MCQ accuracy, LLM judge, BERTScore, error taxonomy, reports."""

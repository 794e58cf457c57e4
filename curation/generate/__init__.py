"""Question generation: case facts, tagged templates, knowledge-table distractors."""

"""``make bench``: figures measured side by side with their anchors in the same run, reported as ratios."""

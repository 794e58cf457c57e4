"""Expert review: merging reviewers' decisions from a pinned annotation snapshot."""

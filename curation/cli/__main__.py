"""``python -m curation.cli``: the ``curate`` command."""

from curation.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()

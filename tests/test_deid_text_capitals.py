"""A first name that is also a dictionary word ("lucy", "heather" are lower-case entries in Webster's Second), typed
in capitals with no cue word before it, in a note otherwise in lower case: the capitals are the signal (issue #30).
Capitals in a run of capitals and common words in capitals stay."""

from __future__ import annotations

from benchmarks.bench_text import leaked
from curation.deid.text import TextDeidentifier
from curation.params import TextDeidParams

NOTE = ("Pt comfortable overnight. LUCY at bedside this am, updated on plan. Later HEATHER phoned for an update.\n"
        "Skin: small MARK on L arm, urine AMBER and clear, IRIS round. NPO after midnight, FRANK blood in ngt.")


def test_a_first_name_in_capitals_among_lower_case_words_is_removed() -> None:
    out, _ = TextDeidentifier(TextDeidParams(), b"test-secret").deidentify(NOTE)
    for phi in ("LUCY", "HEATHER"):
        assert not leaked(phi, out), (phi, out)
    for kept in ("Pt comfortable overnight", "at bedside", "MARK", "AMBER", "IRIS", "NPO", "FRANK blood"):
        assert kept in out, (kept, out)


VISITORS = ("pt slept well. bob at bedside this am, aware of plan. sitter at bedside overnight.\n"
            "PT RESTING. LUCY IN TO VISIT, UPDATED. AIDE AT BEDSIDE FOR CARE. MARK ON L HIP CHANGED.")


def test_a_first_name_before_a_visitors_phrase_is_removed_in_any_case() -> None:
    """No capitals to tell a name from a word (a note all in lower case, or all in capitals): a first name that
    comes before what a visitor does ("at bedside", "in to visit") is the name; the staff who do the same stay."""
    out, _ = TextDeidentifier(TextDeidParams(), b"test-secret").deidentify(VISITORS)
    for phi in ("bob", "LUCY"):
        assert not leaked(phi, out), (phi, out)
    for kept in ("sitter at bedside", "AIDE AT BEDSIDE", "MARK ON L HIP"):
        assert kept in out, (kept, out)

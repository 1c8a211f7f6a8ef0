"""Tokenizer: lowercase and a compiled regex (or whitespace for pre-tokenized text).

The settings are stored in the corpus attrs (``tokenizer``) so that new documents
are tokenized exactly like the training corpus (``Tokenizer.from_settings``).
Stopwords and frequency cuts are *vocabulary* filters (see :mod:`biglda.corpus.vocab`):
a token the vocabulary does not know is dropped when it is looked up.

Speed: ``re.findall`` over each document is about 3 M words/s on one core. A
``str.translate`` table for all of Unicode (a dict with ``__missing__``) was
measured slower than the regex; ingest instead uses a 128-entry table on ASCII
documents with the default pattern (:mod:`biglda.corpus.ingest`), tested to give
exactly :meth:`Tokenizer.tokenize`'s tokens.
"""

from __future__ import annotations

import re
from typing import Any

from biglda.errors import ConfigError, InputError

#: Words of two or more word characters (scikit-learn's default ``token_pattern``).
DEFAULT_TOKEN_PATTERN = r"(?u)\b\w\w+\b"

# A common English stopword list (function words, pronouns, auxiliaries, and a few
# very frequent adverbs), written out here so ingest needs no download.
ENGLISH_STOPWORDS = frozenset([
    "a", "about", "above", "across", "after", "afterwards", "again", "against", "all", "almost",
    "alone", "along", "already", "also", "although", "always", "am", "among", "amongst", "an",
    "and", "another", "any", "anyhow", "anyone", "anything", "anyway", "anywhere", "are", "aren",
    "around", "as", "at", "be", "became", "because", "become", "becomes", "becoming", "been",
    "before", "beforehand", "behind", "being", "below", "beside", "besides", "between", "beyond",
    "both", "but", "by", "can", "cannot", "could", "couldn", "did", "didn", "do", "does", "doesn",
    "doing", "don", "done", "down", "during", "each", "either", "else", "elsewhere", "enough",
    "etc", "even", "ever", "every", "everyone", "everything", "everywhere", "except", "few", "for",
    "former", "formerly", "from", "further", "had", "hadn", "has", "hasn", "have", "haven",
    "having", "he", "hence", "her", "here", "hereafter", "hereby", "herein", "hers", "herself",
    "him", "himself", "his", "how", "however", "i", "ie", "if", "in", "indeed", "into", "is", "isn",
    "it", "its", "itself", "just", "least", "less", "ll", "many", "may", "me", "meanwhile", "might",
    "mine", "more", "moreover", "most", "mostly", "much", "must", "my", "myself", "namely",
    "neither", "never", "nevertheless", "next", "no", "nobody", "none", "noone", "nor", "not",
    "nothing", "now", "nowhere", "of", "off", "often", "on", "once", "one", "only", "onto", "or",
    "other", "others", "otherwise", "our", "ours", "ourselves", "out", "over", "own", "per",
    "perhaps", "please", "rather", "re", "same", "seem", "seemed", "seeming", "seems", "several",
    "she", "should", "shouldn", "since", "so", "some", "somehow", "someone", "something",
    "sometime", "sometimes", "somewhere", "still", "such", "than", "that", "the", "their", "theirs",
    "them", "themselves", "then", "thence", "there", "thereafter", "thereby", "therefore",
    "therein", "thereupon", "these", "they", "this", "those", "though", "through", "throughout",
    "thru", "thus", "to", "together", "too", "toward", "towards", "under", "until", "up", "upon",
    "us", "ve", "very", "via", "was", "wasn", "we", "well", "were", "weren", "what", "whatever",
    "when", "whence", "whenever", "where", "whereafter", "whereas", "whereby", "wherein",
    "whereupon", "wherever", "whether", "which", "while", "whither", "who", "whoever", "whole",
    "whom", "whose", "why", "will", "with", "within", "without", "won", "would", "wouldn", "yet",
    "you", "your", "yours", "yourself", "yourselves"
])


class Tokenizer:
    r"""Split text into tokens: optional lowercasing, then a regex or whitespace split.

    Parameters
    ----------
    lowercase : bool
        Lowercase the text first (default true).
    token_pattern : str
        Regular expression whose matches are the tokens (at most one group; with a
        group, the group is the token). Ignored when ``pretokenized``.
    pretokenized : bool
        Tokens are the whitespace-separated pieces, kept exactly as given.
    ngrams : int
        Also emit the contiguous 2..``ngrams``-word sequences of each document, joined
        by a space (scikit-learn's ``ngram_range=(1, ngrams)``); the vocabulary filters
        then keep the frequent ones (see :mod:`biglda.corpus.vocab` for stopwords).

    Examples
    --------
    >>> Tokenizer().tokenize("The cat's 2 hats, Hat-box!")
    ['the', 'cat', 'hats', 'hat', 'box']
    >>> Tokenizer(pretokenized=True, lowercase=False).tokenize("A b\tC")
    ['A', 'b', 'C']
    >>> Tokenizer(ngrams=2).tokenize("New York subway")
    ['new', 'york', 'subway', 'new york', 'york subway']
    """

    def __init__(
        self,
        lowercase: bool = True,
        token_pattern: str = DEFAULT_TOKEN_PATTERN,
        pretokenized: bool = False,
        ngrams: int = 1,
    ) -> None:
        if not isinstance(ngrams, int) or not 1 <= ngrams <= 5:
            raise ConfigError(f"--ngrams must be a whole number from 1 to 5, got {ngrams}")
        self.ngrams = ngrams
        self.lowercase = bool(lowercase)
        self.token_pattern = str(token_pattern)
        self.pretokenized = bool(pretokenized)
        try:
            self._regex = re.compile(self.token_pattern)
        except re.error as exc:
            raise ConfigError(f"invalid --token-pattern {self.token_pattern!r}: {exc}") from None
        if self._regex.groups > 1:
            raise ConfigError(
                f"--token-pattern {self.token_pattern!r} has {self._regex.groups} groups; "
                "use at most one (non-capturing groups are (?:...))"
            )

    @property
    def settings(self) -> dict[str, Any]:
        """JSON-serializable settings, as stored in the corpus attrs."""
        out: dict[str, Any] = {"lowercase": self.lowercase,
                               "token_pattern": self.token_pattern,
                               "pretokenized": self.pretokenized}
        if self.ngrams > 1:  # stores of unigram corpora stay as they were
            out["ngrams"] = self.ngrams
        return out

    @classmethod
    def from_settings(cls, settings: dict[str, Any] | None) -> Tokenizer:
        """Rebuild the tokenizer a corpus was made with (``corpus.tokenizer``).

        Examples
        --------
        >>> t = Tokenizer.from_settings({"lowercase": False})
        >>> t.tokenize("Hello World")
        ['Hello', 'World']
        """
        s = dict(settings or {})
        return cls(lowercase=s.get("lowercase", True),
                   token_pattern=s.get("token_pattern", DEFAULT_TOKEN_PATTERN),
                   pretokenized=s.get("pretokenized", False), ngrams=int(s.get("ngrams", 1)))

    def tokenize(self, text: str) -> list[str]:
        """Tokens of one document, in order.

        Examples
        --------
        >>> Tokenizer().tokenize("Zarr stores arrays")
        ['zarr', 'stores', 'arrays']
        """
        if self.lowercase:
            text = text.lower()
        words = text.split() if self.pretokenized else self._regex.findall(text)
        if self.ngrams > 1:
            words = words + ngrams_of(words, self.ngrams)
        return words

    def __repr__(self) -> str:
        """Show the settings."""
        return f"Tokenizer({self.settings})"


#: Joins the words of an n-gram (scikit-learn's joiner; never inside a token).
NGRAM_JOINER = " "


def ngrams_of(words: list[str], n: int) -> list[str]:
    """Return the contiguous 2..n-word sequences of ``words``, shortest first.

    Examples
    --------
    >>> ngrams_of(["a", "b", "c"], 3)
    ['a b', 'b c', 'a b c']
    """
    return [NGRAM_JOINER.join(words[i:i + k]) for k in range(2, n + 1)
            for i in range(len(words) - k + 1)]


def load_stopwords(spec: str | list[str] | tuple[str, ...] | None
                   ) -> tuple[frozenset[str], str]:
    """Load stopwords from ``"english"``, ``"none"``, a file, or the union of several.

    A file has one word a line and ``#`` comments; several sources (``["english",
    "extra.txt"]``, from a repeated ``--stopwords``) give the union.

    Returns ``(words, description)``; the description goes into the corpus attrs.

    Examples
    --------
    >>> words, desc = load_stopwords("english")
    >>> "the" in words, desc
    (True, 'english')
    >>> load_stopwords(["none", "english"])[1]
    'english'
    """
    if isinstance(spec, list | tuple):
        parts = [load_stopwords(one) for one in spec]
        words = frozenset().union(*(w for w, _ in parts))
        descs = [d for _, d in parts if d != "none"]
        return words, "+".join(dict.fromkeys(descs)) or "none"
    if spec is None or spec == "none":
        return frozenset(), "none"
    if spec == "english":
        return ENGLISH_STOPWORDS, "english"
    try:
        with open(spec, encoding="utf-8") as f:
            words = {line.split("#", 1)[0].strip() for line in f}
    except FileNotFoundError:
        raise InputError(f"stopword file {spec} not found (use english, none or a file)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read stopword file {spec}: {exc}") from None
    words.discard("")
    return frozenset(words), f"file:{spec}"

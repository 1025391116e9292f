r"""Next-token datasets as distinct contexts with sparse soft labels (paper ``geo``, §3.1).

A training set of ``n`` pairs (context, next word) with fixed-length contexts is summarised,
without loss for the NTP loss, by its ``m`` *distinct* contexts and the joint counts

.. math::
    n_{z,j} = \#\{i : x_i = \bar x_j,\ z_i = z\},\qquad
    \hat\pi_j = \tfrac{1}{n}\textstyle\sum_z n_{z,j},\qquad
    \hat p_{j,z} = n_{z,j} / \textstyle\sum_{z'} n_{z',j}.

Orientation (project convention): ``counts``, ``P`` and ``S`` are ``(V, m)`` -- rows are
next words, columns are contexts.  The empirical conditional entropy

.. math:: \mathcal H = -\textstyle\sum_j \hat\pi_j \sum_{z\in\mathcal S_j}
          \hat p_{j,z}\log \hat p_{j,z}

is the infimum of the CE loss (reached only as the logits diverge).

Two generators build such datasets:

* :func:`synthetic_dataset` -- the project's own templated children's-story sentences with
  the structure of the paper's synthetic set: 16 five-word contexts, 3 next words each,
  a next-token vocabulary of about 30 words, exactly two pairs of contexts with identical
  supports (14 distinct supports) and multiplicities uniform in {1, ..., 4}.
* :func:`text_dataset` -- the §3.1.2 pipeline (frequent 5-grams with several continuations,
  frequency filter, synonym expansion by the project's substitution dictionary, resampled
  multiplicities) over a plain-text English corpus.  By default the corpus is
  ``lee_background.cor`` (Lee news corpus) shipped inside the gensim wheel; any local
  UTF-8 text file can be used instead.  Nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import itertools
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from ntpcore.errors import DataError

__all__ = [
    "ContextDataset",
    "SUBSTITUTIONS",
    "builtin_corpus_path",
    "dataset_from_pairs",
    "synthetic_dataset",
    "synthetic_sentences",
    "text_dataset",
    "tokenize",
]


# --------------------------------------------------------------------------------------
# The dataset container
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class ContextDataset:
    """Distinct contexts with their next-word counts.

    Attributes
    ----------
    name : str
        Short name printed in the book ("synthetic", "lee_background", ...).
    contexts : (m, T) int64 array
        Input-token ids (into ``input_vocab``) of the ``m`` distinct contexts.
    counts : (V, m) int64 array
        Joint counts ``n_{z,j}``: how often next word ``z`` follows context ``j``.
    input_vocab : tuple of str
        Id -> word for context tokens.
    next_vocab : tuple of str
        Id -> word for next tokens (``V`` words, the rows of ``counts``).
    description : str
        One line on how the set was built (printed in the book).
    n_original : int
        Number of contexts before synonym expansion (``m`` when there was none).

    Raises
    ------
    DataError
        On inconsistent shapes, negative counts, a context with an empty support, duplicated
        contexts or out-of-range token ids.
    """

    name: str
    contexts: NDArray[np.int64]
    counts: NDArray[np.int64]
    input_vocab: tuple[str, ...]
    next_vocab: tuple[str, ...]
    description: str = ""
    n_original: int = -1

    def __post_init__(self) -> None:
        contexts = np.array(self.contexts, copy=True)
        counts = np.array(self.counts, copy=True)
        if contexts.ndim != 2 or contexts.shape[0] < 1 or contexts.shape[1] < 1:
            raise DataError(f"contexts must be a non-empty (m, T) array, got {contexts.shape}")
        if counts.ndim != 2:
            raise DataError(f"counts must be a (V, m) array, got shape {counts.shape}")
        if not (np.issubdtype(contexts.dtype, np.integer)):
            raise DataError(f"contexts must hold integer token ids, got {contexts.dtype}")
        if not np.issubdtype(counts.dtype, np.integer):
            if np.issubdtype(counts.dtype, np.floating) and np.all(counts == np.round(counts)):
                counts = counts.astype(np.int64)
            else:
                raise DataError(f"counts must be integers, got dtype {counts.dtype}")
        m = contexts.shape[0]
        if counts.shape[1] != m:
            raise DataError(
                f"counts has {counts.shape[1]} columns but there are {m} contexts "
                "(counts is (V, m): rows are next words, columns are contexts)"
            )
        if counts.shape[0] != len(self.next_vocab):
            raise DataError(
                f"counts has {counts.shape[0]} rows but next_vocab has {len(self.next_vocab)} words"
            )
        if counts.shape[0] < 2:
            raise DataError("the next-token vocabulary needs at least 2 words")
        if np.any(counts < 0):
            raise DataError("counts must be non-negative")
        empty = np.flatnonzero(counts.sum(axis=0) == 0)
        if empty.size:
            raise DataError(
                f"context(s) {empty[:5].tolist()} have an empty support (no next word observed)"
            )
        if contexts.min() < 0 or contexts.max() >= len(self.input_vocab):
            raise DataError("context token ids must index input_vocab")
        if np.unique(contexts, axis=0).shape[0] != m:
            raise DataError("contexts must be distinct (merge duplicated rows by adding counts)")
        contexts = contexts.astype(np.int64)
        counts = counts.astype(np.int64)
        contexts.setflags(write=False)
        counts.setflags(write=False)
        object.__setattr__(self, "contexts", contexts)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "input_vocab", tuple(str(w) for w in self.input_vocab))
        object.__setattr__(self, "next_vocab", tuple(str(w) for w in self.next_vocab))
        if self.n_original < 0:
            object.__setattr__(self, "n_original", m)

    # -- sizes -------------------------------------------------------------------------
    @property
    def m(self) -> int:
        """Number of distinct contexts."""
        return int(self.contexts.shape[0])

    @property
    def T(self) -> int:
        """Context length (number of input tokens)."""
        return int(self.contexts.shape[1])

    @property
    def V(self) -> int:
        """Size of the next-token vocabulary."""
        return int(self.counts.shape[0])

    @property
    def n(self) -> int:
        """Number of training pairs (sum of all counts)."""
        return int(self.counts.sum())

    # -- soft labels -------------------------------------------------------------------
    @property
    def P(self) -> NDArray[np.float64]:
        """(V, m) conditional next-word distributions, columns sum to 1."""
        c = self.counts.astype(np.float64)
        return c / c.sum(axis=0, keepdims=True)

    @property
    def pi(self) -> NDArray[np.float64]:
        """(m,) empirical context probabilities."""
        c = self.counts.sum(axis=0).astype(np.float64)
        return c / c.sum()

    @property
    def S(self) -> NDArray[np.bool_]:
        """(V, m) boolean support matrix, ``S[z, j] = n_{z,j} > 0``."""
        return self.counts > 0

    @property
    def support_sizes(self) -> NDArray[np.int64]:
        """(m,) support sizes ``k_j``."""
        return self.S.sum(axis=0).astype(np.int64)

    @property
    def entropy(self) -> float:
        """Empirical conditional entropy in nats (the CE lower bound)."""
        c = self.counts.astype(np.float64)
        col = c.sum(axis=0, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(c > 0, c * np.log(c / col), 0.0)
        return float(-terms.sum() / c.sum())

    @property
    def support_groups(self) -> list[NDArray[np.int64]]:
        """Column indices grouped by identical support, in order of first appearance."""
        return support_groups(self.S)

    # -- convenience -------------------------------------------------------------------
    def context_strings(self) -> list[str]:
        """The contexts as space-joined words."""
        return [" ".join(self.input_vocab[t] for t in row) for row in self.contexts]

    def samples(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Expand to the ``n`` training pairs: (context index (n,), next-word id (n,))."""
        z, j = np.nonzero(self.counts)
        reps = self.counts[z, j]
        # order by context then word, for readability
        order = np.lexsort((z, j))
        return np.repeat(j[order], reps[order]), np.repeat(z[order], reps[order])

    def stats(self) -> dict[str, float | int | str]:
        """Summary statistics printed by the book."""
        k = self.support_sizes
        return {
            "name": self.name,
            "m": self.m,
            "V": self.V,
            "n": self.n,
            "T": self.T,
            "input_vocab": len(self.input_vocab),
            "entropy": self.entropy,
            "support_groups": len(self.support_groups),
            "mean_support": float(k.mean()),
            "max_support": int(k.max()),
            "n_original": self.n_original,
        }


def support_groups(S: NDArray[np.bool_]) -> list[NDArray[np.int64]]:
    """Group the columns of a (V, m) support matrix by identical pattern.

    Groups are listed in order of their first column; each is an increasing index array.
    """
    S = np.asarray(S, dtype=bool)
    _, first, inverse = np.unique(S.T, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(first, kind="stable")
    return [np.flatnonzero(inverse == g).astype(np.int64) for g in order]


# --------------------------------------------------------------------------------------
# Building a dataset from (context, next word) pairs
# --------------------------------------------------------------------------------------


def dataset_from_pairs(
    name: str,
    pair_counts: Mapping[tuple[tuple[str, ...], str], int],
    *,
    description: str = "",
    n_original: int = -1,
    group_order: bool = True,
) -> ContextDataset:
    """Build a :class:`ContextDataset` from counts of (context words, next word) pairs.

    Contexts are ordered by support group (groups contiguous, in order of first appearance
    in ``pair_counts``), next words by the first context that uses them (so ``S`` shows a
    staircase), input words by first appearance.
    """
    ctx_order: list[tuple[str, ...]] = []
    supp: dict[tuple[str, ...], dict[str, int]] = defaultdict(dict)
    for (ctx, z), c in pair_counts.items():
        if c < 0:
            raise DataError(f"negative count for ({' '.join(ctx)!r}, {z!r})")
        if c == 0:
            continue
        if ctx not in supp:
            ctx_order.append(ctx)
        supp[ctx][z] = supp[ctx].get(z, 0) + int(c)
    if not ctx_order:
        raise DataError(f"{name}: no (context, next word) pairs with a positive count")
    lengths = {len(c) for c in ctx_order}
    if len(lengths) != 1:
        raise DataError(f"{name}: contexts must all have the same length, got {sorted(lengths)}")
    if group_order:
        key_of = {c: frozenset(supp[c]) for c in ctx_order}
        first: dict[frozenset[str], int] = {}
        for i, c in enumerate(ctx_order):
            first.setdefault(key_of[c], i)
        ctx_order = sorted(ctx_order, key=lambda c: first[key_of[c]])  # stable
    next_vocab: list[str] = []
    seen: set[str] = set()
    for c in ctx_order:
        for z in sorted(supp[c], key=lambda w: (-supp[c][w], w)):
            if z not in seen:
                seen.add(z)
                next_vocab.append(z)
    in_vocab: list[str] = []
    in_seen: dict[str, int] = {}
    for c in ctx_order:
        for w in c:
            if w not in in_seen:
                in_seen[w] = len(in_vocab)
                in_vocab.append(w)
    z_id = {z: i for i, z in enumerate(next_vocab)}
    counts = np.zeros((len(next_vocab), len(ctx_order)), dtype=np.int64)
    for j, c in enumerate(ctx_order):
        for z, cnt in supp[c].items():
            counts[z_id[z], j] = cnt
    contexts = np.array([[in_seen[w] for w in c] for c in ctx_order], dtype=np.int64)
    return ContextDataset(
        name=name,
        contexts=contexts,
        counts=counts,
        input_vocab=tuple(in_vocab),
        next_vocab=tuple(next_vocab),
        description=description,
        n_original=n_original,
    )


def _resample(
    supports: Mapping[tuple[str, ...], Iterable[str]],
    rng: np.random.Generator,
    max_repeat: int,
) -> dict[tuple[tuple[str, ...], str], int]:
    """Draw a multiplicity uniform in {1, ..., max_repeat} for every (context, word) pair."""
    out: dict[tuple[tuple[str, ...], str], int] = {}
    for ctx, words in supports.items():
        for z in words:
            out[(ctx, z)] = int(rng.integers(1, max_repeat + 1))
    return out


# --------------------------------------------------------------------------------------
# Synthetic set
# --------------------------------------------------------------------------------------

# Priority words: when a context's observed endings contain several of them, its support
# takes the (up to 3) earliest in this list.  Shared priority words are what makes
# supports of different contexts coincide (the paper's "cheat list" device, §3.1.1).
_PRIORITY = ("cake", "soup", "pizza", "park", "zoo", "beach", "ball", "kite", "song")

# Sixteen five-word contexts, each with the endings observed in the templated sentences.
# Written for this project.  Design (checked by _check_synthetic_structure):
#  * templates 0/1 and 2/3 contain three priority words => identical supports;
#  * every other template has at most two priority words plus fillers from a pool no
#    template with the same priority subset shares => 14 distinct supports in total.
_TEMPLATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "ben wants to eat the",
        ("cake .", "soup .", "pizza now .", "red apple .", "warm bread .", "cookies ."),
    ),
    (
        "ben likes to cook the",
        ("pizza for mom .", "soup .", "cake .", "eggs .", "rice .", "noodles ."),
    ),
    ("ben went to the big", ("park .", "zoo with dad .", "beach .", "store .", "city .", "tree .")),
    ("they drove to the sunny", ("beach .", "park .", "zoo .", "hills .", "lake .")),
    (
        "mia and ben played with",
        ("ball .", "kite .", "the dog .", "blocks .", "sticks .", "their friends ."),
    ),
    ("after lunch they visited the", ("park .", "zoo .", "farm .", "library .", "museum .")),
    ("mia sang a happy little", ("song .", "tune .", "rhyme .", "melody .")),
    ("the dog ran after the", ("ball .", "cat .", "bird .", "car .", "boy .")),
    ("mia drew a picture of", ("cake .", "her dog .", "a tree .", "the sun .", "ben .")),
    (
        "ben was sad because his",
        ("kite broke .", "ball was lost .", "dog was sick .", "toy broke .", "friend left ."),
    ),
    ("at night mia likes to", ("sing .", "read .", "sleep .", "dream .", "hug her bear .")),
    ("on sunny days they fly", ("kite .", "plane .", "flag .", "balloon .")),
    ("grandma baked a big warm", ("cake .", "pie .", "bread .", "pizza .")),
    ("mia put on her new", ("hat .", "shoes .", "dress .", "coat .", "boots .")),
    ("ben found a shiny red", ("ball .", "kite .", "car .", "stone .", "box .")),
    ("they swam at the quiet", ("beach .", "lake .", "pool .", "river .")),
)


def synthetic_sentences() -> list[str]:
    """The templated sentences of the synthetic set (context + one observed ending each)."""
    return [f"{ctx} {end}" for ctx, ends in _TEMPLATES for end in ends]


def synthetic_dataset(
    seed: int = 0, *, support_size: int = 3, max_repeat: int = 4
) -> ContextDataset:
    """The project's synthetic set with the structure of the paper's (§3.1.1).

    Sentences are tokenised, the first 5 words form the context and the 6th is the next
    word.  For every context the support is the (up to ``support_size``) earliest priority
    words among its observed next words, filled up with random other observed next words;
    each (context, word) pair then gets a multiplicity uniform in {1, ..., max_repeat}.

    Parameters
    ----------
    seed : int
        Seed of the support fill and the multiplicities (``np.random.default_rng``).
    support_size : int
        ``k_j`` for every context (the paper: 3).
    max_repeat : int
        Largest multiplicity (the paper's ``range_repeat - 1``; 4 matches its entropy).
    """
    if support_size < 2:
        raise DataError("support_size must be at least 2 (several next words per context)")
    if max_repeat < 1:
        raise DataError("max_repeat must be >= 1")
    rng = np.random.default_rng(seed)
    observed: dict[tuple[str, ...], list[str]] = {}
    for sentence in synthetic_sentences():
        toks = tokenize(sentence)
        ctx, z = tuple(toks[:5]), toks[5]
        observed.setdefault(ctx, [])
        if z not in observed[ctx]:
            observed[ctx].append(z)
    supports: dict[tuple[str, ...], list[str]] = {}
    for ctx, words in observed.items():
        if len(words) < support_size:
            raise DataError(f"template {' '.join(ctx)!r} has fewer than {support_size} endings")
        prio = sorted((w for w in words if w in _PRIORITY), key=_PRIORITY.index)[:support_size]
        rest = [w for w in words if w not in prio and w not in _PRIORITY]
        fill = list(rng.choice(rest, size=support_size - len(prio), replace=False))
        supports[ctx] = prio + [str(w) for w in fill]
    pairs = _resample(supports, rng, max_repeat)
    ds = dataset_from_pairs(
        "synthetic",
        pairs,
        description=(
            f"16 templated five-word contexts, {support_size} next words each "
            f"(priority-list supports), multiplicities uniform in {{1..{max_repeat}}}, seed {seed}"
        ),
    )
    _check_synthetic_structure(ds)
    return ds


def _check_synthetic_structure(ds: ContextDataset) -> None:
    sizes = sorted(len(g) for g in ds.support_groups)
    if ds.m != len(_TEMPLATES) or sizes.count(2) < 2:
        raise DataError(  # a template edit broke the designed structure
            f"synthetic set lost its structure: m={ds.m}, group sizes {sizes}"
        )


# --------------------------------------------------------------------------------------
# Real text
# --------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(r"\w+(?:'\w+)?|[.,!?;:]", re.UNICODE)

#: Built-in corpora shipped inside installed wheels (resolved through importlib.resources).
BUILTIN_CORPORA: dict[str, tuple[str, str]] = {
    # name: (package, relative path)
    "lee_background": ("gensim", "test/test_data/lee_background.cor"),
    "crime_and_punishment": ("gensim", "test/test_data/crime-and-punishment.txt"),
}


def tokenize(text: str) -> list[str]:
    """Lower-case word tokenisation; keeps ``. , ! ? ; :`` as tokens, drops other symbols.

    Digits-only tokens are kept; words may contain an inner apostrophe (``laden's``).
    """
    return _TOKEN_RE.findall(text.lower())


def builtin_corpus_path(name: str = "lee_background") -> Path:
    """Path of a corpus shipped inside an installed package (no download).

    ``lee_background`` is the Lee news corpus (English, 360 kB) in the gensim wheel;
    ``crime_and_punishment`` is a 4 kB Russian excerpt in the same wheel (no 5-word context
    recurs with two continuations; usable with ``context_len=2``).
    """
    try:
        package, rel = BUILTIN_CORPORA[name]
    except KeyError as exc:
        raise DataError(
            f"unknown built-in corpus {name!r}; choose one of {sorted(BUILTIN_CORPORA)}"
        ) from exc
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError as exc:
        raise DataError(f"built-in corpus {name!r} needs the package {package!r}") from exc
    res = root.joinpath(*rel.split("/"))
    if not res.is_file():
        raise DataError(f"built-in corpus {name!r} not found inside {package} ({rel})")
    return Path(os.fspath(res))


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise DataError(f"corpus file {str(path)!r} does not exist or is not a file")
    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(f"corpus file {path.name!r} is empty")
    if b"\x00" in raw[:65536]:
        raise DataError(f"corpus file {path.name!r} is not text (it contains NUL bytes)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"corpus file {path.name!r} is not UTF-8 text ({exc.reason})") from exc


# Substitution dictionary written for this project (§3.1.2, step (a)): a word of a
# frequent context is replaced by each listed alternative, one position at a time, and the
# variant inherits the context's next-word set.  Keys cover frequent function-like words of
# news and story text (pronouns, reporting verbs, titles, time words, adjectives).
SUBSTITUTIONS: dict[str, tuple[str, ...]] = {
    # pronouns and people
    "he": ("she", "they", "it", "we"),
    "she": ("he", "they", "we"),
    "they": ("we", "he", "she"),
    "i": ("we", "you"),
    "we": ("i", "they", "you"),
    "mr": ("mrs", "ms", "dr", "senator", "minister"),
    "mrs": ("mr", "ms", "dr"),
    "man": ("woman", "boy", "girl", "person", "child"),
    "woman": ("man", "lady", "girl", "person"),
    "boy": ("girl", "kid", "child", "man"),
    "girl": ("boy", "kid", "child", "lady"),
    "people": ("residents", "workers", "officials", "soldiers", "children"),
    "spokesman": ("spokeswoman", "spokesperson", "representative", "official"),
    "police": ("officers", "authorities", "investigators"),
    # reporting verbs and tenses
    "said": ("says", "added", "stated", "told", "explained", "warned"),
    "says": ("said", "adds", "believes", "thinks", "claims"),
    "was": ("is", "seemed", "became"),
    "is": ("was", "seems", "remains"),
    "has": ("had", "have"),
    "went": ("goes", "ran", "walked"),
    # institutions
    "government": ("opposition", "parliament", "minister", "cabinet", "council"),
    "federal": ("state", "national", "local", "australian"),
    "commission": ("inquiry", "tribunal", "committee"),
    "company": ("firm", "group", "business", "airline"),
    # time and place words
    "day": ("night", "morning", "evening", "week", "afternoon"),
    "week": ("month", "year", "day", "weekend"),
    "today": ("yesterday", "tonight", "tomorrow"),
    "first": ("second", "third", "final", "last"),
    "next": ("coming", "following", "last"),
    "end": ("start", "middle", "beginning"),
    # news vocabulary (titles, nationalities, events)
    "minister": ("secretary", "leader", "spokesman", "premier"),
    "foreign": ("defence", "trade", "health", "treasury"),
    "defence": ("foreign", "trade", "health", "immigration"),
    "prime": ("deputy", "former", "acting"),
    "president": ("leader", "premier", "chancellor"),
    "senator": ("minister", "mr", "premier"),
    "attorney": ("solicitor", "treasurer", "premier"),
    "secretary": ("minister", "spokesman", "envoy"),
    "israeli": ("palestinian", "american", "british", "indian"),
    "australian": ("british", "american", "indian", "pakistani"),
    "us": ("former", "american", "british"),
    "royal": ("federal", "senate", "special"),
    "attacks": ("bombings", "strikes", "raids"),
    "attack": ("bombing", "strike", "raid"),
    "september": ("october", "november", "december"),
    "collapse": ("failure", "demise", "sale"),
    # adjectives
    "little": ("small", "young", "tiny", "happy", "kind"),
    "big": ("large", "huge", "small", "great"),
    "new": ("old", "big", "small", "young"),
    "good": ("great", "nice", "bad", "fine"),
}

# words never substituted (they carry the structure of a frequent context)
_FROZEN = frozenset({".", ",", "!", "?", ";", ":", "the", "a", "an", "of", "to", "in", "and"})


def _expand(
    contexts: Sequence[tuple[str, ...]],
    substitutions: Mapping[str, Sequence[str]],
    n_positions: int,
    max_subs: int = 1,
) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Variants of each context by substituting words among its first ``n_positions``.

    Up to ``max_subs`` positions are substituted at once (each by one of its listed
    alternatives).  Returns (variant, original) pairs; originals come first (paired with
    themselves), and a variant equal to an existing context or an earlier variant is
    dropped, so every variant inherits exactly one original's next-word set.
    """
    out: list[tuple[tuple[str, ...], tuple[str, ...]]] = [(c, c) for c in contexts]
    seen = set(contexts)
    for c in contexts:
        options = [
            (pos, substitutions.get(c[pos], ()))
            for pos in range(min(n_positions, len(c)))
            if c[pos] not in _FROZEN and substitutions.get(c[pos])
        ]
        for r in range(1, max_subs + 1):
            for combo in itertools.combinations(options, r):
                positions = [p for p, _ in combo]
                for alts in itertools.product(*(a for _, a in combo)):
                    v = list(c)
                    for p, alt in zip(positions, alts, strict=True):
                        v[p] = alt
                    tv = tuple(v)
                    if tv not in seen:
                        seen.add(tv)
                        out.append((tv, c))
    return out


@functools.lru_cache(maxsize=8)
def _ngram_table(text: str, T: int) -> dict[tuple[str, ...], Counter[str]]:
    toks = tokenize(text)
    if len(toks) <= T:
        raise DataError(
            f"corpus has only {len(toks)} word tokens; need more than {T} for {T}-word contexts"
        )
    nxt: dict[tuple[str, ...], Counter[str]] = defaultdict(Counter)
    for i in range(len(toks) - T):
        nxt[tuple(toks[i : i + T])][toks[i + T]] += 1
    return dict(nxt)


def text_dataset(
    path: str | os.PathLike[str] | None = None,
    *,
    corpus: str = "lee_background",
    context_len: int = 5,
    top_k: int = 40,
    min_count: int = 2,
    min_next: int = 2,
    many_next: int = 8,
    expand: bool = True,
    substitutions: Mapping[str, Sequence[str]] | None = None,
    n_positions: int = 3,
    max_subs: int = 2,
    counts: str = "resample",
    max_repeat: int = 4,
    seed: int = 0,
) -> ContextDataset:
    r"""Next-token dataset mined from a plain-text corpus by the §3.1.2 pipeline.

    1. Lower-case and tokenise (:func:`tokenize`); count all ``context_len``-grams and the
       word that follows each.
    2. Keep the ``top_k`` most frequent contexts seen at least ``min_count`` times with at
       least ``min_next`` distinct next words.
    3. Frequency filter: for a context with ``>= many_next`` distinct next words keep only
       next words seen at least twice (if fewer than ``min_next`` survive, keep its
       ``min_next`` most frequent ones).
    4. Synonym expansion (``expand``): every context is duplicated by replacing up to
       ``max_subs`` of its first ``n_positions`` words by alternatives listed in
       ``substitutions`` (default :data:`SUBSTITUTIONS`); each variant inherits the
       original's next-word set, so a context and its variants form one support group.
    5. Counts: ``"resample"`` draws each (context, word) multiplicity uniformly in
       {1, ..., ``max_repeat``} (the paper's choice); ``"observed"`` keeps the corpus counts
       (a variant copies its original's counts).

    Parameters
    ----------
    path : path-like or None
        A local UTF-8 text file.  ``None`` uses the built-in corpus named by ``corpus``
        (resolved inside the installed wheel by :func:`builtin_corpus_path`).

    Raises
    ------
    DataError
        If the file is missing, empty or not UTF-8 text, or too few contexts qualify.
    """
    if counts not in ("resample", "observed"):
        raise DataError(f"counts must be 'resample' or 'observed', got {counts!r}")
    for name, val, lo in (
        ("context_len", context_len, 1),
        ("top_k", top_k, 1),
        ("min_count", min_count, 1),
        ("min_next", min_next, 2),
        ("many_next", many_next, 2),
        ("max_repeat", max_repeat, 1),
    ):
        if int(val) < lo:
            raise DataError(f"{name} must be >= {lo}, got {val}")
    if path is None:
        file = builtin_corpus_path(corpus)
        name = corpus
    else:
        file = Path(path)
        name = file.stem
    table = _ngram_table(_read_text(file), context_len)

    # step 2: frequent contexts with several continuations (ties broken alphabetically)
    cands = [
        (sum(c.values()), ctx)
        for ctx, c in table.items()
        if sum(c.values()) >= min_count and len(c) >= min_next
    ]
    cands.sort(key=lambda t: (-t[0], t[1]))
    chosen = [ctx for _, ctx in cands[:top_k]]
    if not chosen:
        raise DataError(
            f"{file.name}: only {len(chosen)} {context_len}-word context(s) occur >= {min_count} "
            f"times with >= {min_next} different next words; the corpus is too small"
        )

    # step 3: frequency filter
    kept: dict[tuple[str, ...], dict[str, int]] = {}
    for ctx in chosen:
        c = table[ctx]
        if len(c) >= many_next:
            sel = {z: k for z, k in c.items() if k >= 2}
            if len(sel) < min_next:
                sel = dict(sorted(c.items(), key=lambda t: (-t[1], t[0]))[:min_next])
        else:
            sel = dict(c)
        kept[ctx] = sel

    # step 4: synonym expansion
    subs = SUBSTITUTIONS if substitutions is None else substitutions
    pairs_of = _expand(chosen, subs, n_positions, max_subs) if expand else [(c, c) for c in chosen]

    # step 5: multiplicities
    rng = np.random.default_rng(seed)
    if counts == "resample":
        pair_counts = _resample({v: sorted(kept[o]) for v, o in pairs_of}, rng, max_repeat)
    else:
        pair_counts = {(v, z): k for v, o in pairs_of for z, k in kept[o].items()}
    how = "observed counts"
    if counts == "resample":
        how = f"multiplicities uniform in {{1..{max_repeat}}}"
    desc = (
        f"{file.name}: top {len(chosen)} {context_len}-grams with >= {min_next} continuations, "
        f"{'expanded by substitution' if expand else 'no expansion'}, {how}"
    )
    return dataset_from_pairs(name, pair_counts, description=desc, n_original=len(chosen))

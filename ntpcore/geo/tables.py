r"""Literal tables of the two dataset generators [geo, Sec. 3].

Written for this project (the authors' word lists are not copied):

* :data:`PRIORITY_WORDS` and :data:`SYNTHETIC_TEMPLATES` -- the templated children's-story
  sentences of the synthetic set and the priority list that makes supports of different
  contexts coincide (:mod:`ntpcore.geo.synthetic`);
* :data:`BUILTIN_CORPORA` -- plain-text corpora shipped inside installed wheels;
* :data:`SUBSTITUTIONS` and :data:`FROZEN_WORDS` -- the substitution dictionary of the
  synonym expansion of the real-text set and the words it never replaces
  (:mod:`ntpcore.geo.text`).
"""

from __future__ import annotations

# Priority words: when a context's observed endings contain several of them, its support
# takes the (up to 3) earliest in this list.  Shared priority words are what makes
# supports of different contexts coincide (the device of the paper's synthetic set).
PRIORITY_WORDS = ("cake", "soup", "pizza", "park", "zoo", "beach", "ball", "kite", "song")

# Sixteen five-word contexts, each with the endings observed in the templated sentences.
# Written for this project.  Design (checked by ntpcore.geo.synthetic):
#  * templates 0/1 and 2/3 contain three priority words => identical supports;
#  * every other template has at most two priority words plus fillers from a pool no
#    template with the same priority subset shares => 14 distinct supports in total.
SYNTHETIC_TEMPLATES: tuple[tuple[str, tuple[str, ...]], ...] = (
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

#: Built-in corpora shipped inside installed wheels (resolved through importlib.resources).
BUILTIN_CORPORA: dict[str, tuple[str, str]] = {
    # name: (package, relative path)
    "lee_background": ("gensim", "test/test_data/lee_background.cor"),
    "crime_and_punishment": ("gensim", "test/test_data/crime-and-punishment.txt"),
    # the shortened English Wikipedia dump (bz2 XML) of gensim's test data
    "enwiki-shortened": (
        "gensim",
        "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
    ),
}

#: Substitution dictionary written for this project (the synonym expansion of the paper's
#: real-text set): a word of a frequent context is replaced by each listed alternative, one
#: position at a time, and the variant inherits the context's next-word set.  Keys cover
#: frequent function-like words of news and story text (pronouns, reporting verbs, titles,
#: time words, adjectives).
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
FROZEN_WORDS = frozenset({".", ",", "!", "?", ";", ":", "the", "a", "an", "of", "to", "in", "and"})

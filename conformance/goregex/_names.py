"""Unicode class names as Go 1.26's regexp resolves them (regexp/syntax ``unicodeTable``), and the
RE2 class items for each: Go accepts names RE2 spells otherwise (``\\pl``, ``\\p{Letter}``,
``\\p{Assigned}``) and refuses names RE2 knows (``\\p{Old_Italic}``: Go 1.26 looks up a canonical
name without underscores, which finds no script of two words)."""

from __future__ import annotations

__all__ = ["table", "negated_items"]

_GO_TABLES = frozenset((
    "Adlam Ahom Arabic Armenian Avestan Balinese Bamum Batak Bengali Bhaiksuki Bopomofo Brahmi Braille Buginese "
    "Buhid C Carian Cc Cf Chakma Cham Cherokee Chorasmian Cn Co Common Coptic Cs Cuneiform Cypriot Cyrillic Deseret "
    "Devanagari Dogra Duployan Elbasan Elymaic Ethiopic Georgian Glagolitic Gothic Grantha Greek Gujarati Gurmukhi "
    "Han Hangul Hanunoo Hatran Hebrew Hiragana Inherited Javanese Kaithi Kannada Katakana Kawi Kharoshthi Khmer "
    "Khojki Khudawadi L Lao Latin Lepcha Limbu Lisu Ll Lm Lo Lt Lu Lycian Lydian M Mahajani Makasar Malayalam "
    "Mandaic Manichaean Marchen Mc Me Medefaidrin Miao Mn Modi Mongolian Mro Multani Myanmar N Nabataean "
    "Nandinagari Nd Newa Nko Nl No Nushu Ogham Oriya Osage Osmanya P Palmyrene Pc Pd Pe Pf Phoenician Pi Po Ps "
    "Rejang Runic S Samaritan Saurashtra Sc Sharada Shavian Siddham Sinhala Sk Sm So Sogdian Soyombo Sundanese "
    "Syriac Tagalog Tagbanwa Takri Tamil Tangsa Tangut Telugu Thaana Thai Tibetan Tifinagh Tirhuta Toto Ugaritic "
    "Vai Vithkuqi Wancho Yezidi Yi Z Zl Zp Zs").split())
_GO_ALIASES = dict(pair.split("=") for pair in (
    "Casedletter=Lc Closepunctuation=Pe Combiningmark=M Connectorpunctuation=Pc Control=Cc Currencysymbol=Sc "
    "Dashpunctuation=Pd Decimalnumber=Nd Enclosingmark=Me Finalpunctuation=Pf Format=Cf Initialpunctuation=Pi "
    "Letter=L Letternumber=Nl Lineseparator=Zl Lowercaseletter=Ll Mark=M Mathsymbol=Sm Modifierletter=Lm "
    "Modifiersymbol=Sk Nonspacingmark=Mn Number=N Openpunctuation=Ps Other=C Otherletter=Lo Othernumber=No "
    "Otherpunctuation=Po Othersymbol=So Paragraphseparator=Zp Privateuse=Co Punctuation=P Separator=Z "
    "Spaceseparator=Zs Spacingmark=Mc Surrogate=Cs Symbol=S Titlecaseletter=Lt Unassigned=Cn Uppercaseletter=Lu "
    "Cntrl=Cc Digit=Nd Punct=P").split())
_ASSIGNED = r"\p{L}\p{M}\p{N}\p{P}\p{S}\p{Z}\p{Cc}\p{Cf}\p{Co}\p{Cs}"
# (class items for RE2, negated): tables RE2 names otherwise or not at all
_SPECIAL = {"Any": (r"\x00-\x{10FFFF}", False), "Ascii": (r"\x00-\x7F", False), "Lc": (r"\p{Lu}\p{Ll}\p{Lt}", False),
            "Assigned": (_ASSIGNED, False), "Cn": (_ASSIGNED, True)}


def _canonical(name: str) -> str:
    """Go's canonicalName: first letter upper case, the rest lower, no ``_``, ``-`` or space."""
    out, first = [], True
    for c in name:
        if c in "_- ":
            continue
        if first:
            out.append(c.upper() if "a" <= c <= "z" else c)
            first = False
        else:
            out.append(c.lower() if "A" <= c <= "Z" else c)
    return "".join(out)


def table(name: str) -> tuple[str, bool] | None:
    """RE2 class items for Go's table ``name`` and whether they are negated; None: Go has none."""
    key = _canonical(name)
    key = _GO_ALIASES.get(key, key) if key not in _GO_TABLES and key not in _SPECIAL else key
    if key in _SPECIAL:
        return _SPECIAL[key]
    if key in _GO_TABLES:
        return ("\\p{" + key + "}", False)
    return None



def negated_items(items: str) -> str | None:
    """Class items for the complement of ``items`` inside a class, when RE2 can spell it."""
    if items.startswith("\\p{") and items.count("\\p") == 1:
        return "\\P" + items[2:]
    return {r"\x00-\x{10FFFF}": "", r"\x00-\x7F": r"\x{80}-\x{10FFFF}"}.get(items)

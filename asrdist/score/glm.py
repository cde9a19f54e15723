"""NIST GLM word mapping as csrfilt.sh and rfilter1 apply it before hubscr.pl scores.

A GLM rule ``A => B / C __ D`` rewrites the string A (with left context C and right context D
in the *input*) into B. rfilter1 moves a cursor through the line; at each position the first
rule in file order whose A, C and D match fires, else one character is copied. Sections after
``;; INPUT_DEPENDENT_APPLICATION = "REGEX"`` apply only when REGEX matches the input type
(``stm``/``ctm``) or purpose (``ref``/``hyp``). csrfilt.sh up-cases ASCII letters, spaces out
parentheses, applies the rules, splits hyphenated words (``-dh``), splits an optionally
deletable group ``(A B)`` into ``(A) (B)`` and closes the parentheses again; this module does
the same steps in the same order, so its output is what hubscr.pl's ``*.filt`` files hold.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from asrdist.errors import AsrdistError

_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_SECTION = re.compile(r'^;;\s+INPUT_DEPENDENT_APPLICATION\s*=\s*"([^"]*)"')
_HYPHEN = re.compile(r"([^( ])-(?=[^) ])")
_OPT_DEL_GROUP = re.compile(r"(\(\s+[^()\s]+\s+)([^()\s]+)")


@dataclass(frozen=True)
class Rule:
    """One rewrite rule; strings are compared without regard to case (CASE_SENSITIVE 'F')."""

    source: str
    target: str
    left: str = ""
    right: str = ""


def _field(text: str) -> str:
    """A rule field: bracketed or quoted fields keep their spaces, bare ones are trimmed."""
    text = text.strip()
    if len(text) >= 2 and (text[0], text[-1]) in {("[", "]"), ("'", "'"), ('"', '"')}:
        return text[1:-1]
    return text


def _parse_rule(line: str, where: str) -> Rule:
    if "=>" not in line:
        raise AsrdistError(f"{where}: a GLM rule needs 'A => B', got {line.strip()!r}")
    source, rest = line.split("=>", 1)
    left = right = ""
    if " / " in rest and "__" in rest.rsplit(" / ", 1)[1]:
        rest, context = rest.rsplit(" / ", 1)
        left, right = context.split("__", 1)
    rule = Rule(_field(source), _field(rest), _field(left), _field(right))
    if not rule.source:
        raise AsrdistError(f"{where}: GLM rule with an empty left-hand side")
    return rule


def read_glm(path: str | os.PathLike, input_type: str, purpose: str) -> Glm:
    """The rules of a GLM file that csrfilt.sh applies to ``input_type`` data for ``purpose``,
    compiled."""
    try:
        lines = open(path, encoding="latin-1").read().splitlines()
    except OSError as e:
        raise AsrdistError(f"--glm {path}: cannot read the GLM file ({e.strerror})") from e
    rules, applies = [], True
    for n, line in enumerate(lines, 1):
        section = _SECTION.match(line)
        if section:
            pattern = section.group(1).lower()
            applies = bool(re.search(pattern, input_type) or re.search(pattern, purpose))
            continue
        body = line.split(";;", 1)[0]
        if not body.strip() or body.lstrip().startswith("*") or not applies:
            continue
        rules.append(_parse_rule(body, f"{path}:{n}"))
    if not lines:
        raise AsrdistError(f"--glm {path}: the GLM file is empty")
    return Glm(rules)


class Glm:
    """A GLM's rules compiled once into one regular expression, and the texts filtered so far.

    rfilter1 tries the rules in file order at each cursor position; a regex alternation tries
    its branches in order too, so one alternation of ``SOURCE(?<=LEFT SOURCE)(?=RIGHT)`` per
    rule finds, from the leftmost position where any rule fits, the rule rfilter1 would fire.
    Branches are grouped by the first letter of their source (two rules with different first
    letters never fit at one position, so the order that matters is kept), which lets the
    regex engine skip a group on one character instead of trying every rule. A sweep filters
    the same ctm words again and again: each distinct text is filtered once.
    """

    def __init__(self, rules: list[Rule]):
        groups: dict[str, list[Rule]] = {}
        for rule in rules:
            groups.setdefault(rule.source.upper()[0], []).append(rule)
        branches, self._targets = [], []
        for first, members in groups.items():
            alts = []
            for rule in members:
                source = rule.source.upper()
                alt = re.escape(source[1:])
                if rule.left:
                    alt += f"(?<={re.escape(rule.left.upper() + source)})"
                if rule.right:
                    alt += f"(?={re.escape(rule.right.upper())})"
                alts.append(alt + "()")
                self._targets.append(rule.target)
            branches.append(f"{re.escape(first)}(?:{'|'.join(alts)})")
        self._pattern = re.compile("|".join(branches)) if branches else None
        self._filtered: dict[tuple[str, str], str] = {}

    def apply(self, text: str) -> str:
        """rfilter1: first matching rule at each cursor position, contexts read from the input."""
        if self._pattern is None:
            return text
        out, last = [], 0
        for m in self._pattern.finditer(text.upper()):
            out.append(text[last:m.start()])
            out.append(self._targets[m.lastindex - 1])
            last = m.end()
        out.append(text[last:])
        return "".join(out)

    def filter(self, text: str, pad: str = "") -> str:
        """:func:`filter_text`, once per distinct (text, pad)."""
        key = (text, pad)
        if key not in self._filtered:
            self._filtered[key] = _filter(text, self, pad)
        return self._filtered[key]


def filter_text(text: str, glm: Glm, pad: str = "") -> str:
    """csrfilt.sh -dh on one text field: up-case, GLM, hyphen split, optional-deletion groups.

    ``pad`` is the space csrfilt leaves around the field before adding its own: one for an stm
    text (cut from a padded line), none for a ctm word; a rule's context may see it.
    """
    return glm.filter(text, pad)


def _filter(text: str, glm: Glm, pad: str) -> str:
    text = re.sub(r"[ \t]+", " ", text.translate(_UPPER).strip())
    text = " " + pad + text.replace("(", "( ").replace(")", " )") + pad + " "
    text = glm.apply(text)
    text = _HYPHEN.sub(r"\1 ", text)
    while True:
        text, n = _OPT_DEL_GROUP.subn(r"\1) ( \2", text, count=1)
        if not n:
            break
    text = re.sub(r"\(\s+", "(", text)
    text = re.sub(r"\s+\)", ")", text)
    return " ".join(text.split())

"""The ``---`` frontmatter of a Markdown file (a user's command file, a skill's ``SKILL.md``): flat ``key: value``
pairs only, keys lower-cased, one pair of quotes stripped — the subset those files use, without a YAML parser."""

from __future__ import annotations

__all__ = ["frontmatter"]


def frontmatter(text: str) -> tuple[dict[str, str], str]:
    """A Markdown file's ``---`` frontmatter as flat ``key: value`` pairs (quotes stripped), and its body."""
    if not text.startswith("---"):
        return {}, text
    lines = text.split("\n")
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        return {}, text
    fields: dict[str, str] = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(":")
        if sep and key.strip() and not key.startswith((" ", "\t")):
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            fields[key.strip().lower()] = value
    return fields, "\n".join(lines[end + 1 :]).lstrip("\n")

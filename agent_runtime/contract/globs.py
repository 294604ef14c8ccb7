"""Path normalisation and path globs for argument rules.

Paths are normalised lexically (no filesystem access, so no symlink resolution): ``//`` collapses,
``.`` disappears and ``..`` consumes its parent, so ``/data/x/../.env`` is tested as ``/data/.env``.
Globs are segment-aware: ``*`` and ``?`` stay within one path segment, ``**`` spans any number of
segments (``**/`` also matches nothing, so ``**/.env*`` matches ``.env`` and ``/a/b/.env.local``).
"""

from __future__ import annotations

import functools
import posixpath
import re


def normalise_path(value: str) -> str:
    if not value:
        return value
    # A leading "//" is kept by posixpath.normpath (POSIX allows it); collapse it too.
    collapsed = re.sub(r"/{2,}", "/", value.replace("\\", "/"))
    return posixpath.normpath(collapsed)


@functools.lru_cache(maxsize=512)
def glob_to_regex(glob: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def glob_match(glob: str, path: str) -> bool:
    return glob_to_regex(glob).fullmatch(normalise_path(path)) is not None

"""Passwords in URLs (`postgresql+psycopg://USER:PASSWORD@HOST/DB`): never printed, never written.
Hydra writes every override into each job's `.hydra/overrides.yaml` and `hydra.yaml`, so a password
on the command line is taken out before Hydra sees it: PostgreSQL's goes to PGPASSWORD, which libpq
(psycopg) reads when the URL has none; any other is refused in one line. What is shown to people
has `***` in its place. A password may hold `@`, `:`, `/` or `%`-escapes: the user part ends at the
last `@` of the URL."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

# scheme://user:password@rest, the password running to the last "@" before whitespace
URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<password>\S*)@(?P<rest>[^@\s]*)")


def hide_password(text: str) -> str:
    """`text` with the password of every URL in it shown as ***."""
    return URL.sub(lambda m: f"{m['scheme']}{m['user']}:***@{m['rest']}", str(text))


def without_password(text: str) -> tuple[str, str | None]:
    """`text` with its URL's password taken out (`scheme://user@rest`), and the password (%-escapes
    decoded, as libpq wants it), or None when it holds none."""
    m = URL.search(text)
    if not m:
        return text, None
    return text[:m.start()] + f"{m['scheme']}{m['user']}@{m['rest']}" + text[m.end():], unquote(m["password"])


def take_passwords(args: list[str]) -> tuple[list[str], str | None]:
    """The arguments with every PostgreSQL password moved into PGPASSWORD (this process and those it
    starts), and the problem in one line for a password libpq cannot take that way."""
    out = []
    for a in args:
        clean, password = without_password(a)
        if password is not None:
            if "postgresql" not in URL.search(a)["scheme"]:
                return args, (f"{hide_password(a)}: a password in a URL would be written into every job's .hydra/ "
                              f"files; leave it out of the URL and give it the way its driver reads one (for "
                              f"PostgreSQL: PGPASSWORD or ~/.pgpass)")
            os.environ["PGPASSWORD"] = password
        out.append(clean)
    return out, None

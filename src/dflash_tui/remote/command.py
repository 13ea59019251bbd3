"""Remote commands are argv lists; this is the one place they become shell text.

The remote login shell parses the string we send exactly once, so every word
is quoted with `shlex.quote`. Shell features (pipes, redirections, `$$`) come
only from fixed script text written in this codebase, run as
`sh -c SCRIPT sh ARG...`: values from config or user input travel as
positional arguments and never become part of a script.

One exception, for commands shown to people (a job's command): a `HomePath` word,
`~/REL`, is written `"$HOME"/REL` (REL quoted as any word), so the shell it is
pasted into puts the home directory in instead of looking for a folder named `~`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class HomePath(str):
    """A word naming a path under the remote user's home: `~/REL`, or `--opt=~/REL`.

    Its text is unchanged (`~/REL`); quoted for a shell it is `"$HOME"/REL`, which that
    shell expands wherever the word is (a quoted `'~/REL'` names a folder called `~`).
    The shell that reads the line decides whose home: the host's login shell, so
    not for commands run behind an exec prefix (`pct exec`), whose home may differ.
    """

    rel: str
    prefix: str

    def __new__(cls, rel: str, prefix: str = "") -> HomePath:
        word = super().__new__(cls, f"{prefix}~/{rel}")
        word.rel, word.prefix = rel, prefix
        return word

    def quoted(self) -> str:
        head = shlex.quote(self.prefix) if self.prefix else ""
        return f'{head}"$HOME"/{shlex.quote(self.rel)}' if self.rel else f'{head}"$HOME"'


_HOME_WORD = re.compile(r"^(--?[A-Za-z0-9][A-Za-z0-9_-]*=)?~/(.*)$", re.S)


def home_words(argv: Sequence[str]) -> list[str]:
    """`argv` with each `~/REL` (or `--opt=~/REL`) word made a HomePath: for a command
    shown to people, who run it in a shell on the host (`~user/...` stays literal)."""
    out: list[str] = []
    for word in argv:
        match = _HOME_WORD.match(word)
        out.append(HomePath(match.group(2), match.group(1) or "") if match else word)
    return out


def quote(word: str) -> str:
    """One word for a POSIX shell: `shlex.quote`, or a HomePath's `"$HOME"/REL`."""
    return word.quoted() if isinstance(word, HomePath) else shlex.quote(str(word))


def shell_join(argv: Sequence[str]) -> str:
    """Quote each word for a POSIX shell and join them with spaces."""
    if not argv:
        raise ValueError("empty command")
    return " ".join(quote(word) for word in argv)


def shell_script(script: str, *args: str) -> list[str]:
    """argv that runs a fixed `script` with `args` as `$1..$n` under /bin/sh."""
    return ["sh", "-c", script, "sh", *args]


@dataclass(frozen=True)
class RemoteCommand:
    """What to run on a host: argv, extra environment, and the host's exec prefix.

    Environment variables are put inside the command (`env K=V ...`) because
    sshd drops most environment requests.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    exec_prefix: tuple[str, ...] = ()

    def full_argv(self) -> list[str]:
        argv = list(self.argv)
        if self.env:
            for name in self.env:
                if not _ENV_NAME.match(name):
                    raise ValueError(f"invalid environment variable name {name!r}")
            argv = ["env", *(f"{k}={v}" for k, v in self.env.items()), *argv]
        return [*self.exec_prefix, *argv]

    def render(self) -> str:
        """The exact string sent to the SSH server."""
        return shell_join(self.full_argv())

    def display(self, secret_names: Sequence[str] = ()) -> str:
        """The command for logs and the UI, with secret values masked."""
        env = {k: ("***" if _is_secret(k, secret_names) else v) for k, v in self.env.items()}
        return RemoteCommand(self.argv, env, self.exec_prefix).render()


_SECRET_HINTS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL")


def _is_secret(name: str, extra: Sequence[str]) -> bool:
    upper = name.upper()
    return name in extra or any(hint in upper for hint in _SECRET_HINTS)


# Runs argv in a new session (so the whole group can be killed later) and
# prints that session's id first. `setsid -w` waits and passes the exit status on.
_GROUP_SCRIPT = 'printf "%s\\n" "$$"; exec "$@"'


def in_new_process_group(argv: Sequence[str]) -> list[str]:
    """argv that prints its process-group id on the first stdout line, then runs `argv`.

    OpenSSH before 10 ignores signal requests for root sessions, and closing a
    channel does not stop a `tail -F` on a quiet file, so stopping a remote
    command reliably means killing its process group by id.
    """
    return ["setsid", "-w", "sh", "-c", _GROUP_SCRIPT, "sh", *argv]


def kill_group_argv(pgid: int, signal: str = "TERM") -> list[str]:
    """argv that signals a whole process group (quietly, if it is already gone)."""
    return shell_script('kill -s "$1" -- "-$2" 2>/dev/null || true', signal, str(int(pgid)))

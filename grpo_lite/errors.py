"""The two kinds of error a run ends with, besides grpo-lite's own bugs.

- :class:`UserError`: what the user gave cannot work (a setting, a file, a column, a model path). Raised before
  anything heavy loads where it can be; ``grpo-lite`` prints its message, one line per problem, and exits 2.
- :class:`RunFault`: the run started and could not go on (out of memory, a full disk, NaN, a reward that keeps
  failing); its message says what was kept and what to change, and ``grpo-lite`` exits 1.

Anything else is a bug in grpo-lite: the command line shows its traceback.
"""

from __future__ import annotations

from rewards.errors import UserError  # the reward package's refusals are UserErrors too

__all__ = ["UserError", "RunFault", "NotFound"]


class RunFault(Exception):
    """A started run could not go on; the message says what was kept and what to change."""


class NotFound(UserError, FileNotFoundError):
    """A file or folder the user named is not there (a run folder without its record, a data file)."""

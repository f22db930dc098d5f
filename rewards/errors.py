"""What the user gave cannot work: the one base of every refusal, in the reward package and in grpo_lite alike.

The reward package is the bottom of grpo-lite and stands alone, so the base class lives here and
``grpo_lite.errors`` speaks of the same class: ``except grpo_lite.errors.UserError`` catches a misspelt reward
name as it catches a bad run setting.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user gave cannot work; the message names it and says how to fix it."""


class RewardError(UserError, ValueError):
    """A reward reference, a reward's option or rows for the reward lab that cannot be used; the message says which."""

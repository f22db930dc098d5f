"""What a set of scores says about a GRPO run, judged one way everywhere.

The reward lab, ``preview``, ``rescore_run`` and the live health monitor all read these thresholds.
"""

from __future__ import annotations

TIE = 1e-6  # advantages closer to 0 than this are 0: the completion teaches nothing

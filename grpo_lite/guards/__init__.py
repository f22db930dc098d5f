"""The faults a long run survives, each turned into an error that says what was kept and what to change.

- ``faults``: the one handler around ``trainer.train()`` that saves what can be saved
- ``out_of_memory``, ``disk``, ``nan``: out of GPU memory, a full disk, a loss that stops being a number
- ``reward_calls``, ``time_limit``: a reward function that raises or hangs scores ``None`` instead of ending the run
"""

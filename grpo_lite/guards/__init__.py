"""The faults a long run survives, each turned into an error that says what was kept and what to change.

- ``faults``: the one handler around ``trainer.train()`` that saves what can be saved
- ``out_of_memory``, ``disk``, ``nan``: out of GPU memory, a full disk, a loss that stops being a number
- ``user_code``, ``time_limit``: every call of user code (rewards, tools, environments, rollout functions, the servers
  they call) under a time limit, its failures said by name and row, a batch scored ``None`` or a tool call answered
  instead of ending the run
"""

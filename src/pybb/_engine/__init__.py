"""The repair controller of seed 000: the engine behind the ``pybb`` façade.

Nothing here knows an application: attestation, the human loop, the inbox, the command
line and the workloads live beside this package and import it (through ``pybb``), never
the other way round (``tests/test_layers.py``). Read it in this order:

- ``types``, ``values``, ``entries``: the seed's values and the checks on them;
- ``projection``: every entry's state, folded record by record from the board's log;
- ``journal``: the only writer of the board: records, batches, commits, fences, catch-up;
- ``blackboard``: the seed's ``Blackboard``, the user's API over the journal;
- ``source``, ``attempt``: knowledge sources and one attempt of one;
- ``routes``, ``steps``, ``controller``: the seed's ``Controller``;
- ``worker``: many controllers sharing one board through leased claims.
"""

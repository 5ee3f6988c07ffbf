"""Gang: an ActorGroup whose members rendezvous by rank before working.

eval-leader (rank 0) scatters each job over the gang's ranks and gathers the results; the
eval-worker ranks serve it. Locally the leader plays every rank in its own process.

Run it: asya dev examples/gang --input examples/gang/inputs.jsonl
"""

ROUTE = ["eval-leader"]

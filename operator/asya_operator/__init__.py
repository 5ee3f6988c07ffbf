"""The asya operator: asya's five custom resources on Kubernetes — AsyncActor (one actor: a
Deployment of runtime and sidecar that KEDA scales on its queue), ActorGroup (members that run
together as gangs, admitted whole), ResourcePool and Cohort (quota, as Kueue's ClusterQueue and
Cohort) and ResourceFlavor (a kind of node).

Its layers, each importing only those below it (import-linter contracts in pyproject.toml):
- `cli`: `asya-operator run` and `asya-operator plan`;
- `operator`: the wiring — one cluster client, one admission loop, the reconcilers, and kopf's
  handlers on a registry (`build(config)`);
- `handlers`: kopf registrations only; each hands its object to a reconciler or tells the
  admission loop that something changed;
- `reconcile`: what happens to an AsyncActor (`actors`) or an ActorGroup (`groups`), and the
  admission loop (`admission`): the one task that decides quota, priority and gangs;
- `kube` (the one async cluster client, over a table of kinds) and `queues` (the broker);
- `plans`: pure — spec and observed state in, the objects and statuses to write out; shared
  parts (pods, conditions, statuses, quota documents, workloads, scaling, files) under what
  the actors, groups, statuses, admission and the what-if get;
- `api`: the typed model of the custom resources, the CRDs and chart schemas generated from it,
  and the decoding of stored objects against their CRD's rules;
- `config` and `metrics`: the operator's own settings and Prometheus metrics.
"""

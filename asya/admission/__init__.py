"""Admission: team quotas, borrowing, priority preemption and gang admission, as pure code.

Kueue's semantics, for asya's pools of GPUs and CPUs:
- `quantity`: Kubernetes quantities as integer milli-units;
- `quotas`: the quota vocabulary (quotas per flavor and resource, preemption policies),
  defined once for the engine and the operator's ResourcePool and Cohort CRDs;
- `model`: pools, cohorts, workloads, and the two ways a scenario comes in, checked alike: a
  file (`asya admission simulate`) or typed parts (the operator's snapshot);
- `tree`: quota and usage through the cohort tree (nominal, borrowing and lending limits);
- `accelerators`: which resources are accelerators, and keeping their flavors for work that
  asks for them;
- `assign`: flavor assignment and partial (gang minCount) admission for one workload;
- `preemption`: which admitted workloads to evict so a pending one fits;
- `scheduler`: the scheduling cycle, and running cycles until nothing changes;
- `readiness`: what happens to an admitted gang that does not become ready.
No I/O and no clock anywhere here: `now` is an argument. The operator and the local runner
hand in a snapshot and carry out the decisions.
"""

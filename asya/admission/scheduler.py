"""The scheduling cycle, and running cycles until nothing changes.

One cycle, as in Kueue's `schedule()`:
1. heads: the first pending workload of each pool (priority, then age);
2. nominate: try each head against quota as it stands (`assign`);
3. order: non-borrowing first, then those borrowing closest to their pool (the lowest cohort
   of the tree with room for them: Kueue's borrowing level), then priority, then age;
4. admit, in that order: a FIT is re-checked against what earlier entries took this cycle
   and admitted; a PREEMPT evicts its victims (`preemption`) and stays at the head, to be
   admitted once their quota is back — unless another entry already changed its cohort this
   cycle, which invalidates its calculation (it is retried next cycle);
5. requeue: a head that cannot be admitted blocks its pool under StrictFIFO, and steps aside
   under BestEffortFIFO until quota is released in its cohort (an eviction).

`Scheduler` holds the working state (the equivalent of Kueue's cache and queues) built from a
scenario; `simulate` is the pure entry point: scenario in, result out.
"""

from __future__ import annotations

import bisect
import enum
import heapq
import itertools
from dataclasses import dataclass, field

from asya.admission.accelerators import AcceleratorFallback, AcceleratorFallbackCause, fallback
from asya.admission.assign import Assignment, Mode, assign, explain, workload_usage
from asya.admission.model import FlavorResource, Pool, QueueingStrategy, Scenario, Workload
from asya.admission.preemption import (
    Admitted,
    Preemptor,
    Target,
    admission_rank,
    choose_targets,
)
from asya.admission.tree import Node, QuotaTree


class PendingReason(enum.StrEnum):
    INSUFFICIENT_QUOTA = "InsufficientQuota"
    QUEUED_BEHIND_HEAD = "QueuedBehindHead"
    NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"
    POOL_NOT_FOUND = "PoolNotFound"
    NOT_EVALUATED = "NotEvaluated"


@dataclass(frozen=True, slots=True)
class AdmittedResult:
    workload: str
    pool: str
    borrowing: bool
    pod_sets: tuple[tuple[str, str, int], ...]
    """(pod set, flavor, count)."""
    accelerator_fallbacks: tuple[AcceleratorFallback, ...] = ()
    """Its pod sets that ask for no accelerator but are on a flavor that offers them, and why."""


@dataclass(frozen=True, slots=True)
class PreemptedResult:
    workload: str
    preemptor: str
    reason: str


@dataclass(frozen=True, slots=True)
class PendingResult:
    workload: str
    reason: PendingReason
    message: str


@dataclass(frozen=True, slots=True)
class SimulationResult:
    admitted: tuple[AdmittedResult, ...]
    preempted: tuple[PreemptedResult, ...]
    pending: tuple[PendingResult, ...]
    cycles: int
    quiescent: bool
    """False when the cycle limit stopped the run before nothing changed."""


@dataclass
class _Holding:
    """A workload holding quota."""

    workload: Workload
    info: Admitted
    borrowing: bool
    pod_sets: tuple[tuple[str, str, int], ...]
    accelerator_fallbacks: tuple[AcceleratorFallback, ...]


@dataclass
class _PoolQueue:
    pool: Pool
    node: Node
    active: list[tuple[int, int, str, int]] = field(default_factory=list)
    """Heap of (-priority, created, name, token); an entry whose token is stale is skipped."""
    inadmissible: list[Workload] = field(default_factory=list)


@dataclass
class CycleReport:
    admitted: list[str] = field(default_factory=list)
    preempted: list[PreemptedResult] = field(default_factory=list)
    set_aside: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.admitted or self.preempted or self.set_aside)


class Scheduler:
    """Working state for cycles over one scenario; see the module docstring."""

    def __init__(self, scenario: Scenario) -> None:
        self.tree = QuotaTree(scenario.cohorts, scenario.pools)
        self.workloads = {w.name: w for w in scenario.workloads}
        self.queues = {p.name: _PoolQueue(p, self.tree.pools[p.name]) for p in scenario.pools}
        self.holding: dict[str, _Holding] = {}
        self.by_pool: dict[str, list[Admitted]] = {p.name: [] for p in scenario.pools}
        self.pending: dict[str, PendingResult] = {}
        self.preempted: list[PreemptedResult] = []
        self._sequence = itertools.count(1)
        self._tokens = itertools.count(1)
        self._queued: dict[str, int] = {}
        """Name -> token of its one live queue entry (so requeues never duplicate it)."""
        already = sorted(
            (w for w in scenario.workloads if w.admitted is not None), key=lambda w: w.created
        )
        for wl in already:
            counts = {a.pod_set: a.count for a in wl.admitted or ()}
            flavors = {a.pod_set: a.flavor for a in wl.admitted or ()}
            self._hold(wl, counts, flavors, borrowing=None)
        for wl in scenario.workloads:
            if wl.admitted is None:
                self._enqueue(wl)

    def _enqueue(self, wl: Workload) -> None:
        queue = self.queues.get(wl.pool)
        if queue is None:
            self.pending[wl.name] = PendingResult(
                wl.name, PendingReason.POOL_NOT_FOUND, f"pool '{wl.pool}' does not exist"
            )
            return
        allowed = queue.pool.namespaces
        if allowed is not None and wl.namespace not in allowed:
            self.pending[wl.name] = PendingResult(
                wl.name,
                PendingReason.NAMESPACE_NOT_ALLOWED,
                f"namespace '{wl.namespace}' may not use pool '{wl.pool}'"
                f" (allowed: {', '.join(allowed) or 'none'})",
            )
            return
        self._push(queue, wl)
        self.pending[wl.name] = PendingResult(
            wl.name, PendingReason.NOT_EVALUATED, "not yet considered by a scheduling cycle"
        )

    def _push(self, queue: _PoolQueue, wl: Workload) -> None:
        token = next(self._tokens)
        self._queued[wl.name] = token
        heapq.heappush(queue.active, (-wl.priority, wl.created, wl.name, token))

    def _head(self, queue: _PoolQueue) -> Workload | None:
        """The first live entry of the pool's queue, dropping stale ones on the way."""
        while queue.active:
            _, _, name, token = queue.active[0]
            if self._queued.get(name) == token:
                return self.workloads[name]
            heapq.heappop(queue.active)
        return None

    def _hold(
        self,
        wl: Workload,
        counts: dict[str, int],
        flavors: dict[str, str],
        *,
        borrowing: bool | None,
    ) -> None:
        node = self.tree.pools[wl.pool]
        usage = workload_usage(wl, counts, flavors)
        self.tree.add_usage(node, usage)
        # Admitted now, a pod set reaches a flavor with accelerators only when none without
        # had room (the order `assign` tries them in); held from before, why is not known.
        unexplained = AcceleratorFallbackCause.NO_ROOM
        if borrowing is None:  # already admitted in the scenario: borrowing as things stand
            borrowing = node.parent is not None and self.tree.is_borrowing(node, usage)
            unexplained = AcceleratorFallbackCause.HELD
        info = Admitted(wl.name, wl.pool, wl.priority, wl.created, next(self._sequence), usage)
        held = [ps for ps in wl.pod_sets if ps.name in counts]
        pod_sets = tuple((ps.name, flavors[ps.name], counts[ps.name]) for ps in held)
        pool = self.queues[wl.pool].pool

        def potential(fr: FlavorResource) -> int:
            return self.tree.potential_available(node, fr)

        fallbacks = tuple(
            found
            for ps in held
            if (found := fallback(ps, flavors[ps.name], pool, unexplained, potential)) is not None
        )
        self.holding[wl.name] = _Holding(wl, info, borrowing, pod_sets, fallbacks)
        bisect.insort(self.by_pool[wl.pool], info, key=admission_rank)
        self.pending.pop(wl.name, None)

    def _evict(self, name: str) -> None:
        held = self.holding.pop(name)
        self.tree.remove_usage(self.tree.pools[held.info.pool], held.info.usage)
        self.by_pool[held.info.pool].remove(held.info)
        self._enqueue(held.workload)

    def cycle(self) -> CycleReport:
        """One scheduling cycle; see the module docstring for its steps."""
        report = CycleReport()
        # 1-2. Heads, nominated against quota as it stands.
        entries = []
        for queue in self.queues.values():
            wl = self._head(queue)
            if wl is not None:
                entries.append((queue, wl, assign(wl, queue.pool, self.tree)))
        # 3. Non-borrowing first, then borrowing closest to the pool, then higher priority,
        # then older (Kueue's classical order, borrowing by level as with hierarchical cohorts).
        entries.sort(key=lambda e: (e[2].borrowing_level, -e[1].priority, e[1].created, e[1].name))
        # 4. Admit or preempt. Anything that changed a cohort this cycle means later entries
        # in it are re-checked; a preemption there makes later preemptions wait a cycle.
        touched: set[str] = set()
        preempted_in: set[str] = set()
        reserved: list[tuple[Node, dict[FlavorResource, int]]] = []
        for queue, wl, nominated in entries:
            root = queue.node.root().name
            assignment = nominated
            if nominated.mode is Mode.FIT and root in touched:
                assignment = assign(wl, queue.pool, self.tree)
                if assignment.mode is not Mode.FIT:
                    continue  # taken by an earlier entry this cycle: retried next cycle
            if assignment.mode is Mode.FIT:
                self._admit(queue, wl, assignment)
                report.admitted.append(wl.name)
                touched.add(root)
                continue
            if assignment.mode is Mode.PREEMPT:
                if root in preempted_in:
                    continue
                targets = self._targets(queue, wl, assignment)
                if targets:
                    self._preempt(wl, targets, report)
                    preempted_in.add(root)
                else:
                    report.set_aside += self._set_aside(queue, wl, assignment)
                # Hold what it may use for the rest of the cycle, so that quota freed for it
                # is not taken by a later entry (Kueue's resourcesToReserve).
                hold = self._reservation(queue.node, assignment)
                self.tree.add_usage(queue.node, hold)
                reserved.append((queue.node, hold))
                touched.add(root)
                continue
            report.set_aside += self._set_aside(queue, wl, assignment)
        for node, hold in reserved:
            self.tree.remove_usage(node, hold)
        return report

    def _reservation(self, node: Node, assignment: Assignment) -> dict[FlavorResource, int]:
        hold = {}
        for fr, usage in assignment.usage.items():
            used = node.usage.get(fr, 0)
            quota = node.quotas.get(fr)
            if quota is None:
                continue
            if assignment.borrowing and quota.borrowing_limit is None:
                hold[fr] = usage
            elif assignment.borrowing and quota.borrowing_limit is not None:
                hold[fr] = max(0, min(usage, quota.nominal + quota.borrowing_limit - used))
            else:
                hold[fr] = max(0, min(usage, quota.nominal - used))
        return hold

    def _targets(self, queue: _PoolQueue, wl: Workload, assignment: Assignment) -> list[Target]:
        preemptor = Preemptor(wl.name, queue.pool, wl.priority, wl.created, assignment)
        return choose_targets(preemptor, self.tree, self.by_pool)

    def _admit(self, queue: _PoolQueue, wl: Workload, assignment: Assignment) -> None:
        # Not a heappop: an eviction earlier in this cycle may have put another workload on top.
        del self._queued[wl.name]
        counts = {c.pod_set: c.count for c in assignment.choices}
        flavors = {c.pod_set: c.flavor for c in assignment.choices}
        self._hold(wl, counts, flavors, borrowing=assignment.borrowing)

    def _preempt(self, wl: Workload, targets: list[Target], report: CycleReport) -> None:
        for target in targets:
            self._evict(target.victim.name)
            result = PreemptedResult(target.victim.name, wl.name, target.reason.value)
            self.preempted.append(result)
            report.preempted.append(result)
        self.pending[wl.name] = PendingResult(
            wl.name,
            PendingReason.INSUFFICIENT_QUOTA,
            f"waiting for {len(targets)} preempted workload(s) to release quota",
        )
        # Quota came back to this cohort: workloads that stepped aside may fit now.
        released = {self.tree.pools[t.victim.pool].root() for t in targets}
        for root in released:
            for node in self.tree.subtree_pools(root):
                queue = self.queues[node.name]
                for waiting in queue.inadmissible:
                    self._push(queue, waiting)
                queue.inadmissible.clear()

    def _set_aside(self, queue: _PoolQueue, wl: Workload, assignment: Assignment) -> int:
        message = explain(assignment, queue.pool, self.tree)
        if assignment.mode is Mode.PREEMPT:
            policy = queue.pool.preemption
            message += (
                f"; preemption could make room, but no admitted workload qualifies under pool"
                f" {queue.pool.name}'s policy (withinPool: {policy.within_pool.value},"
                f" reclaimWithinCohort: {policy.reclaim_within_cohort.value})"
            )
        self.pending[wl.name] = PendingResult(wl.name, PendingReason.INSUFFICIENT_QUOTA, message)
        if queue.pool.queueing_strategy is QueueingStrategy.STRICT_FIFO:
            return 0  # the head stays and blocks the pool
        del self._queued[wl.name]
        queue.inadmissible.append(wl)
        return 1

    def result(self, cycles: int, *, quiescent: bool) -> SimulationResult:
        """Everything holding quota, every eviction so far, everything still pending."""
        for queue in self.queues.values():
            head_workload = self._head(queue)
            if queue.pool.queueing_strategy is QueueingStrategy.STRICT_FIFO and head_workload:
                head = head_workload.name
                for _, _, name, token in queue.active:
                    if self._queued.get(name) != token or name == head:
                        continue
                    if self.pending[name].reason is PendingReason.NOT_EVALUATED:
                        self.pending[name] = PendingResult(
                            name,
                            PendingReason.QUEUED_BEHIND_HEAD,
                            f"pool {queue.pool.name} is StrictFIFO and its head {head}"
                            " does not fit",
                        )
        admitted = tuple(
            AdmittedResult(name, h.info.pool, h.borrowing, h.pod_sets, h.accelerator_fallbacks)
            for name, h in sorted(self.holding.items(), key=lambda item: item[1].info.sequence)
        )
        pending = tuple(self.pending[name] for name in sorted(self.pending))
        return SimulationResult(admitted, tuple(self.preempted), pending, cycles, quiescent)


def simulate(scenario: Scenario, *, max_cycles: int | None = None) -> SimulationResult:
    """Run cycles until one changes nothing (or `max_cycles`) and report the end state.

    Without `max_cycles`, a generous bound (20 cycles per workload) still stops a scenario
    whose preemptions would go round for ever; `quiescent` then says so.
    """
    limit = max_cycles if max_cycles is not None else 100 + 20 * len(scenario.workloads)
    scheduler = Scheduler(scenario)
    cycles = 0
    while cycles < limit:
        cycles += 1
        if not scheduler.cycle().changed:
            return scheduler.result(cycles, quiescent=True)
    return scheduler.result(cycles, quiescent=False)


def result_as_dict(result: SimulationResult) -> dict[str, object]:
    """The documented output of `asya admission simulate`."""
    return {
        "admitted": [_admitted_as_dict(a) for a in result.admitted],
        "preempted": [
            {"workload": p.workload, "preemptor": p.preemptor, "reason": p.reason}
            for p in result.preempted
        ],
        "pending": [
            {"workload": p.workload, "reason": p.reason.value, "message": p.message}
            for p in result.pending
        ],
        "cycles": result.cycles,
        "quiescent": result.quiescent,
    }


def _admitted_as_dict(admitted: AdmittedResult) -> dict[str, object]:
    entry: dict[str, object] = {
        "workload": admitted.workload,
        "pool": admitted.pool,
        "borrowing": admitted.borrowing,
        "podSets": [{"name": n, "flavor": f, "count": c} for n, f, c in admitted.pod_sets],
    }
    if admitted.accelerator_fallbacks:  # only where it happened, as the exception it is
        entry["acceleratorFallbacks"] = [
            {"podSet": f.pod_set, "flavor": f.flavor, "cause": f.cause.value, "message": f.message}
            for f in admitted.accelerator_fallbacks
        ]
    return entry

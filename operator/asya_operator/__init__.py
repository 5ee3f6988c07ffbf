"""The asya operator: AsyncActor and ResourceFlavor custom resources on Kubernetes.

It holds the typed model of the custom resources (`resources`), the CRDs generated from it
(`crds`), the operator's own settings (`config`), and the pure `plan_*` functions that turn an
AsyncActor into the objects to apply: its Deployment (`deployment`, with the namespace's end
actors), its KEDA ScaledObject and TriggerAuthentication (`scaling`), its status (`status`),
and a whole set of CRs at once (`plan`, behind `asya-operator plan` in `cli`). The controller
(`controller`: kopf handlers) applies them, reading and writing the cluster through `cluster`
and the broker's queues through `queues`.
"""

"""The asya operator: AsyncActor and ResourceFlavor custom resources on Kubernetes.

So far it holds the typed model of the custom resources (`resources`) and the CRDs generated
from it (`crds`); the controller that turns an AsyncActor into a Deployment, a KEDA
ScaledObject and queues comes next.
"""

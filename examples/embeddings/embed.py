"""`embed`: a batch actor that turns support messages into embeddings.

asya calls it with up to 16 messages at once (or what arrived within 20 ms); the model is
fitted once per worker, in `__init__`, before the first batch. `gpus=1` asks for one GPU per
worker: on Kubernetes the pod waits for one; locally each worker gets a device of its own, or,
with `cpu_fallback=True`, runs on CPU when none is free (a laptop). Where PyTorch is installed
and the worker has a GPU, the projection runs on it; otherwise numpy does it on CPU. Both give
the same embeddings to within float rounding, so the pipeline's output does not depend on
where it ran; `device` in each output says where.
"""

from __future__ import annotations

from collections.abc import Callable

from asya import actor

from .lsa import Matrix, model, normalize

DECIMALS = 5
"""Embeddings travel as JSON: rounded, to keep envelopes small and readable."""


def _projection(components: Matrix) -> tuple[Callable[[Matrix], Matrix], str]:
    """(project TF-IDF rows onto the model's directions, the device doing it)."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        return (lambda rows: rows @ components.T), "cpu"
    weights = torch.from_numpy(components.T.copy()).to("cuda")

    def on_gpu(rows: Matrix) -> Matrix:
        result: Matrix = (torch.from_numpy(rows).to("cuda") @ weights).cpu().numpy()
        return result

    return on_gpu, "cuda"


@actor(batch=16, batch_wait_ms=20, gpus=1, cpu_fallback=True, max_replicas=2)
class Embed:
    """A batch of messages in, the same messages with `embedding` and `coverage` out."""

    def __init__(self) -> None:
        self.model = model()
        self.project, self.device = _projection(self.model.components)

    def __call__(self, docs: list[dict]) -> list[dict]:
        texts = [doc["text"] for doc in docs]
        vectors = normalize(self.project(self.model.tfidf(texts)))
        # .tolist() turns numpy floats into Python floats: a numpy value is not JSON.
        return [
            {
                **doc,
                "embedding": [round(x, DECIMALS) for x in vector.tolist()],
                "coverage": round(self.model.coverage(text), 3),
                "device": self.device,
            }
            for doc, text, vector in zip(docs, texts, vectors, strict=True)
        ]

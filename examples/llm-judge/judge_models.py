"""The three model calls of the judge loop, and the two models that can make them.

`StandIn` is deterministic and needs nothing: it answers from a small table of facts
(`facts.tsv`), judges an answer by the rubric points it mentions, and refines an answer by
adding the fact for the first missing point, when it has one. It makes the loop's behaviour
exact and testable.

`OpenAICompatible` calls a real model: any server speaking the OpenAI chat completions API
(OpenAI, vLLM, Ollama, llama.cpp's server, LiteLLM...). It uses the standard library's
`urllib` only, so the example needs no client package. `from_environment` picks it when
`LLM_BASE_URL` is set:

    LLM_BASE_URL   the API root, e.g. http://localhost:8000/v1
    LLM_MODEL      the model name the server knows (required with LLM_BASE_URL)
    LLM_API_KEY    sent as a bearer token, if set
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

FACTS = Path(__file__).with_name("facts.tsv")


@dataclass(frozen=True)
class Verdict:
    """A judge's answer: a score from 0 to 1 and the rubric points still missing."""

    score: float
    missing: list[str]


class Model(Protocol):
    """What the loop's actors need from a model."""

    def generate(self, question: str) -> str: ...

    def judge(self, question: str, answer: str, rubric: Sequence[str]) -> Verdict: ...

    def refine(self, question: str, answer: str, missing: Sequence[str]) -> str: ...


class StandIn:
    """A deterministic model: facts from a table, judged by the rubric points mentioned."""

    name = "stand-in"

    def __init__(self, facts: Path = FACTS) -> None:
        self.facts: dict[str, str] = {}
        for line in facts.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                point, sentence = line.split("\t", 1)
                self.facts[point] = sentence

    def generate(self, question: str) -> str:
        """The facts whose point the question names, or an admission that it knows none."""
        asked = question.lower()
        found = [sentence for point, sentence in self.facts.items() if point in asked]
        return " ".join(found) or "I am not sure."

    def judge(self, question: str, answer: str, rubric: Sequence[str]) -> Verdict:
        """Score: the share of rubric points the answer mentions."""
        said = answer.lower()
        missing = [point for point in rubric if point.lower() not in said]
        score = 1.0 - len(missing) / len(rubric) if rubric else 1.0
        return Verdict(round(score, 3), missing)

    def refine(self, question: str, answer: str, missing: Sequence[str]) -> str:
        """The answer with the fact for the first missing point, if there is one."""
        fact = self.facts.get(missing[0].lower()) if missing else None
        return f"{answer} {fact}" if fact else answer


class ModelError(Exception):
    """A model server's answer could not be used (retried by the actor's policy)."""


class OpenAICompatible:
    """A model behind an OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 50.0
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.name = model
        self.api_key = api_key
        self.timeout_s = timeout_s

    def chat(self, system: str, user: str, *, json_reply: bool = False) -> str:
        """One chat completion: the reply's text.

        Raises:
            ModelError: the server cannot be reached or its reply has no message.
        """
        body: dict[str, Any] = {
            "model": self.name,
            "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
        if json_reply:
            body["response_format"] = {"type": "json_object"}
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                reply = json.load(response)
            return str(reply["choices"][0]["message"]["content"]).strip()
        except (urllib.error.URLError, TimeoutError, ValueError, KeyError, IndexError) as exc:
            raise ModelError(f"{self.url} (model {self.name}): {exc}") from exc

    def generate(self, question: str) -> str:
        return self.chat("Answer the question accurately in at most three sentences.", question)

    def judge(self, question: str, answer: str, rubric: Sequence[str]) -> Verdict:
        points = "\n".join(f"- {point}" for point in rubric)
        reply = self.chat(
            "You grade answers. Reply with a JSON object only: "
            '{"missing": [the rubric points the answer does not cover, verbatim]}.',
            f"Question: {question}\nAnswer: {answer}\nRubric:\n{points}",
            json_reply=True,
        )
        try:
            missing = [str(point) for point in json.loads(_json_object(reply))["missing"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"the judge's reply is not the JSON asked for: {reply!r}") from exc
        missing = [point for point in rubric if point in missing]
        score = 1.0 - len(missing) / len(rubric) if rubric else 1.0
        return Verdict(round(score, 3), missing)

    def refine(self, question: str, answer: str, missing: Sequence[str]) -> str:
        return self.chat(
            "Improve the answer so that it also covers the points listed. Keep it short and"
            " reply with the new answer only.",
            f"Question: {question}\nAnswer: {answer}\nAlso cover: {'; '.join(missing)}",
        )


def _json_object(text: str) -> str:
    """The first {...} in a reply: some servers wrap JSON in prose or a code fence."""
    found = re.search(r"\{.*\}", text, re.S)
    return found.group(0) if found else text


def from_environment(environ: Mapping[str, str] = os.environ) -> Model:
    """The real model if `LLM_BASE_URL` is set, else the stand-in.

    Raises:
        ValueError: `LLM_BASE_URL` is set without `LLM_MODEL`.
    """
    base_url = environ.get("LLM_BASE_URL")
    if not base_url:
        return StandIn()
    model = environ.get("LLM_MODEL")
    if not model:
        raise ValueError(
            f"LLM_BASE_URL is set ({base_url}) but LLM_MODEL is not: name the model the server"
            " serves, e.g. LLM_MODEL=gpt-4o-mini"
        )
    return OpenAICompatible(base_url, model, environ.get("LLM_API_KEY"))

"""Judge backends: the OpenAI-compatible one (production) and the offline heuristic (a labelled demo fallback).

Judges are configured by name (settings.JUDGES; `default` is the JUDGE_* one) and a criteria version names the one
that grades under it. A process builds each named judge once (`judge_named`, `draft_judge_named`) and reuses it for
every review: they share one HTTP client, so judge calls ride warm keep-alive connections, and what the server said
about itself (the model it serves, its context window) and what the process learned about its tokenizer are kept.
"""

import hashlib
import json
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Protocol, Unpack

from django.conf import settings

from grading.checks.checks import internal_link_slugs, proof_terms_referenced
from grading.checks.definitions import UNKNOWN, AnswerKind, CheckSet
from grading.checks.rules import DraftRules, rules_as_text
from grading.checks.structure import is_question_heading, parse_draft
from grading.core.evidence import EvidenceMessage
from grading.core.evidence_text import Stage, content_text, estimate_tokens
from grading.core.untrusted import SIZING_NONCE
from grading.judge.client import ZERO_USAGE, ChatJudgeClient, Completion, JudgeContextExceeded, Usage
from grading.judge.confidence import LOGPROBS, check_confidences
from grading.judge.conversation import (
    PROMPT_TEMPLATE_HASH,
    SYSTEM_PROMPT,
    StageAsked,
    answer_model,
    answer_schema_text,
    answers_by_key,
    user_prompt,
)
from grading.judge.draft import PROMPT_TEMPLATE_HASH as DRAFT_PROMPT_HASH
from grading.judge.draft import SYSTEM_PROMPT as DRAFT_SYSTEM_PROMPT
from grading.judge.draft import JudgeIssue
from grading.judge.draft import answer_model as draft_answer_model
from grading.judge.draft import answers_by_key as draft_answers_by_key
from grading.judge.draft import user_prompt as draft_user_prompt
from grading.judge.examples import PromptExample
from grading.judge.scores import mean_and_spread, score_distribution


@dataclass(frozen=True)
class JudgeIdentity:
    """Who graded: part of every review's score identity.

    `model` is the model asked for; `served_model` the one the server says it serves (llama.cpp and vLLM serve one
    model whatever the request names; OpenAI answers with a dated snapshot), recorded when known. `name` is the
    configured judge's (settings.JUDGES). The key leaves `served_model` out, so it is the same before and after the
    server first said it, in every process. It holds `name` unless that is `default`: two named judges of one
    model are two judges (a review by one is never taken for the other's), and a review graded before judges had
    names keeps its key.
    """

    backend: str
    model: str
    prompt_hash: str
    temperature: float
    served_model: str | None = None
    name: str = "default"

    def as_json(self) -> dict:
        data = asdict(self)
        if self.served_model is None:
            del data["served_model"]
        return data

    @cached_property  # asked on every review; the identity is frozen (a new server name makes a new one)
    def key(self) -> str:
        keyed = {k: v for k, v in self.as_json().items() if k != "served_model"}
        if self.name == "default":
            del keyed["name"]
        return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class StageJudgement:
    verdicts: dict[str, dict]  # per check key: {"verdict": its answer, "message_ids", "rationale"}
    usage: Usage
    # Per check key, the probability the judge gave its answer (grading/judge/confidence.py); a check left out has
    # none (no log-probabilities, or they do not tell). And where they came from.
    confidences: dict[str, float] = field(default_factory=dict)
    confidence_source: str = LOGPROBS


class ConversationJudge(Protocol):
    identity: JudgeIdentity

    def stage_budget(
        self, *, rubric: str, criteria_number: int, checks: CheckSet, examples: Sequence[PromptExample]
    ) -> int:
        """Tokens of rendered evidence (context and slice) one stage may carry, after the criteria, their checks and
        examples."""
        ...

    def measure(self, text: str) -> int:
        """What `text` costs against the stage budget, in this judge's tokens (an estimate)."""
        ...

    def judge_stage(self, **asked: Unpack[StageAsked]) -> StageJudgement: ...


# A chat template wraps each message in a few tokens of its own, and the estimate is an estimate.
_TEMPLATE_SLACK_TOKENS = 64
# When the server says nothing about its context window and no setting does either.
DEFAULT_CONTEXT_TOKENS = 16_384


@dataclass
class TokenMeter:
    """This process's estimate of the judge's token counts: `estimate_tokens` scaled by the worst underestimate
    seen so far (a usage report or a context-length refusal that counted more tokens than we did). It only
    grows, so once a prompt was refused, a prompt of the same text is never sent at that size again."""

    factor: float = 1.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def measure(self, text: str) -> int:
        return math.ceil(estimate_tokens(text) * self.factor)

    def learn(self, *, text: str, actual_tokens: int) -> None:
        estimated = estimate_tokens(text)
        if estimated > 0 and actual_tokens > estimated * self.factor:
            with self._lock:
                self.factor = max(self.factor, actual_tokens / estimated)


class _ChatJudge:
    """A judge on any OpenAI-compatible chat-completions endpoint, through the one production client: its context
    window is the `JUDGE_CONTEXT_TOKENS` setting, else what the server says, else DEFAULT_CONTEXT_TOKENS; its
    identity names the prompt it sends (`prompt_hash`). Each call keeps what it knows of the server current
    (`_call`)."""

    prompt_hash: str

    def __init__(
        self,
        client: ChatJudgeClient,
        *,
        context_tokens: int | None = None,
        meter: TokenMeter | None = None,
        name: str = "default",
    ):
        self.client = client
        self.meter = meter or TokenMeter()
        profile = client.server_profile()
        self.context_tokens = context_tokens or profile.context_tokens or DEFAULT_CONTEXT_TOKENS
        self.identity = JudgeIdentity(
            "openai", client.model, self.prompt_hash, 0.0, served_model=profile.model, name=name
        )

    def _call(self, *, system: str, user: str, schema) -> Completion:
        """One judge call that keeps the process's knowledge of the server current: the model it says answered,
        its context window and its token counts (from the reply's usage, or from a context-length refusal)."""
        try:
            completion = self.client.complete(system=system, user=user, schema=schema)
        except JudgeContextExceeded as exc:
            if exc.context_tokens:
                self.context_tokens = min(self.context_tokens, exc.context_tokens)
            if exc.prompt_tokens:
                self.meter.learn(text=system + user, actual_tokens=exc.prompt_tokens)
            raise
        if completion.usage.prompt_tokens:
            self.meter.learn(text=system + user, actual_tokens=completion.usage.prompt_tokens)
        served = completion.served_model
        if served and served != self.identity.served_model and served != self.identity.model:
            self.identity = replace(self.identity, served_model=served)
        return completion


class OpenAIJudge(_ChatJudge):
    """The conversation judge. Its stage budget is the context window less the reply's token limit and the fixed
    part of the prompt. A context-length refusal teaches it the server's own figures (the window, and how many
    tokens the prompt really was), so the caller's next staging is smaller.
    """

    prompt_hash = PROMPT_TEMPLATE_HASH

    def measure(self, text: str) -> int:
        return self.meter.measure(text)

    def stage_budget(
        self, *, rubric: str, criteria_number: int, checks: CheckSet, examples: Sequence[PromptExample]
    ) -> int:
        empty = Stage(0, [], [])
        fixed = SYSTEM_PROMPT + user_prompt(
            rubric=rubric,
            criteria_number=criteria_number,
            checks=checks,
            stage=empty,
            stage_count=1,
            examples=examples,
            nonce=SIZING_NONCE,
        )
        # The answer's schema grows with the checks, and a server in JSON mode reads it in the system message.
        schema = answer_schema_text(checks) if self.client.mode == "json_object" else ""
        reserved = self.client.max_output_tokens + _TEMPLATE_SLACK_TOKENS + self.measure(fixed + schema)
        return max(self.context_tokens - reserved, 1)

    def judge_stage(self, **asked: Unpack[StageAsked]) -> StageJudgement:
        checks = asked["checks"]
        completion = self._call(system=SYSTEM_PROMPT, user=user_prompt(**asked), schema=answer_model(checks))
        verdicts = answers_by_key(completion.parsed)
        given = {key: answer["verdict"] for key, answer in verdicts.items()}
        confidences = check_confidences(completion.token_logprobs, checks, given)
        return StageJudgement(verdicts=verdicts, usage=completion.usage, confidences=confidences)


_FIGURE = re.compile(r"\d[\d,.]*\d|\d")
_REFUSAL = re.compile(r"\b(i can(?:no|')t|i am unable|i'm unable|unfortunately|an error occurred)\b", re.IGNORECASE)


class HeuristicJudge:
    """Deterministic, offline, and labelled as such everywhere it appears. For demos without an LLM.

    grounded: every figure an agent states appears earlier in the conversation (user or tool messages);
    complete: the slice ends on an agent reply and no user request in it is left unanswered;
    usable: the final agent reply is substantive and is not a refusal or an error.
    """

    identity = JudgeIdentity("heuristic", "offline-heuristic-v1", "heuristic-v1", 0.0)

    def measure(self, text: str) -> int:
        return estimate_tokens(text)

    def stage_budget(
        self, *, rubric: str, criteria_number: int, checks: CheckSet, examples: Sequence[PromptExample]
    ) -> int:
        return settings.JUDGE_CONTEXT_TOKENS or DEFAULT_CONTEXT_TOKENS

    def judge_stage(self, **asked: Unpack[StageAsked]) -> StageJudgement:
        """Its three verdicts for the checks keyed grounded, complete and usable; unknown for any other check (it
        reads no question, so it cannot answer one)."""
        stage = asked["stage"]
        messages = [*stage.context, *stage.messages]
        agent = [m for m in stage.messages if m.role == "assistant" and _text(m)]
        readable = {
            "grounded": lambda: _grounded(messages, agent),
            "complete": lambda: _complete(stage.messages),
            "usable": lambda: _usable(agent),
        }
        verdicts = {
            check.key: readable[check.key]()
            if check.kind == AnswerKind.VERDICT and check.key in readable
            else _answer(UNKNOWN, [], "The offline heuristic judge cannot read this check.")
            for check in asked["checks"].checks
        }
        return StageJudgement(verdicts=verdicts, usage=ZERO_USAGE)


def _answer(verdict: str, message_ids: list[str], rationale: str) -> dict:
    return {"verdict": verdict, "message_ids": message_ids, "rationale": rationale}


def _text(message: EvidenceMessage) -> str:
    """What the message says, as an LLM judge would read it, minus its header and any tool calls."""
    return content_text(message.content).strip()


def _grounded(messages: list[EvidenceMessage], agent: list[EvidenceMessage]) -> dict:
    if not agent:
        return _answer("unknown", [], "No agent reply in this slice.")
    agent_ids = {m.id for m in agent}
    seen: set[str] = set()
    for message in messages:
        figures = set(_FIGURE.findall(_text(message)))
        if message.id in agent_ids:
            unsupported = sorted(figures - seen)
            if unsupported:
                return _answer(
                    "fail",
                    [message.id],
                    f"States {', '.join(unsupported[:3])} which no earlier message or tool result contains.",
                )
        seen |= figures
    return _answer("pass", [m.id for m in agent], "Every figure the agent states appears earlier in the conversation.")


def _complete(messages: list[EvidenceMessage]) -> dict:
    unanswered = None
    for message in messages:
        if message.role == "user":
            unanswered = message
        elif message.role == "assistant" and _text(message) and not message.tool_calls:
            unanswered = None
    if unanswered is not None:
        return _answer("fail", [unanswered.id], "A user request got no agent reply.")
    replies = [m.id for m in messages if m.role == "assistant"]
    if not replies:
        return _answer("unknown", [], "No agent reply in this slice.")
    return _answer("pass", replies[-1:], "Every user request got a reply.")


def _usable(agent: list[EvidenceMessage]) -> dict:
    if not agent:
        return _answer("unknown", [], "No agent reply in this slice.")
    final = agent[-1]
    text = _text(final)
    if _REFUSAL.search(text):
        return _answer("fail", [final.id], "The final reply refuses or reports an error.")
    if len(text) < 20:
        return _answer("unknown", [final.id], "The final reply is too short to judge.")
    return _answer("pass", [final.id], "The final reply is substantive.")


class UnknownJudge(LookupError):
    """A judge name that settings.JUDGES does not hold (a version naming a judge since removed from JUDGES_FILE)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"No judge named {name!r} is configured; the configured ones are {', '.join(judge_names())} "
            "(JUDGE_* is `default`, the others are in JUDGES_FILE)."
        )
        self.name = name


def judge_names() -> list[str]:
    """The configured judges' names, `default` first."""
    return sorted(settings.JUDGES, key=lambda name: (name != "default", name))


def judge_named(name: str) -> ConversationJudge:
    """The conversation judge configured as `name`: the OpenAI-compatible one, or the offline heuristic for a
    `default` with no JUDGE_BASE_URL; one per process per configuration. Raises UnknownJudge."""
    entry = judge_entry(name)
    if not entry["base_url"]:
        return HeuristicJudge()
    return _process_judges(name, entry).conversation


def draft_judge_named(name: str) -> "DraftJudge":
    """The draft judge (asking for log-probabilities) configured as `name`, as `judge_named`. Raises UnknownJudge."""
    entry = judge_entry(name)
    if not entry["base_url"]:
        return HeuristicDraftJudge()
    return _process_judges(name, entry).draft


def judge_from_settings() -> ConversationJudge:
    """The default judge: the OpenAI-compatible one when JUDGE_BASE_URL is set, else the offline heuristic."""
    return judge_named("default")


def judge_entry(name: str) -> dict:
    """The configuration of the judge `name` (settings.JUDGES), asking nothing of its server. Raises UnknownJudge."""
    entry = settings.JUDGES.get(name)
    if entry is None:
        raise UnknownJudge(name)
    return entry


@dataclass(frozen=True)
class _ProcessJudges:
    conversation: "OpenAIJudge"
    draft: "OpenAIDraftJudge"


# Per judge name: the configuration its judges were built from, and the judges.
_judges: dict[str, tuple[tuple, _ProcessJudges]] = {}
_judges_lock = threading.Lock()


def _process_judges(name: str, entry: dict) -> _ProcessJudges:
    """This process's judges named `name` for its configuration `entry`, built on first use (in the worker process,
    never in a parent that forks: a connection pool must not be shared across a fork) and reused by every review
    after. A changed configuration (tests change settings) builds them again."""
    key = tuple(sorted(entry.items()))
    built = _judges.get(name)
    if built is None or built[0] != key:
        with _judges_lock:
            built = _judges.get(name)
            if built is None or built[0] != key:
                # Both judges ask for log-probabilities: the draft's score distribution and every answer's
                # confidence (grading/judge/confidence.py) are read from them.
                client = ChatJudgeClient(
                    base_url=entry["base_url"],
                    model=entry["model"],
                    api_key=entry["api_key"] or "unused",
                    timeout=entry["timeout_seconds"],
                    max_retries=entry["max_retries"],
                    max_output_tokens=entry["max_output_tokens"],
                    want_logprobs=True,
                )
                meter = TokenMeter()
                context = entry["context_tokens"] or None
                judges = _ProcessJudges(
                    conversation=OpenAIJudge(client, context_tokens=context, meter=meter, name=name),
                    draft=OpenAIDraftJudge(client, context_tokens=context, meter=meter, name=name),
                )
                built = _judges[name] = (key, judges)
    return built[1]


# --- drafts ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DraftJudgement:
    overall: int
    passed: bool
    issues: list[JudgeIssue]
    answers: dict[str, int | dict | None]  # per check key (draft.answers_by_key)
    score: float  # the probability-weighted overall when log-probabilities came back, else the overall itself
    spread: float | None
    usage: Usage
    # The overall score's distribution (score -> probability) when log-probabilities came back and tell it.
    distribution: dict[int, float] | None = None
    # Per check key, the probability the judge gave its answer (grading/judge/confidence.py), and where it came from.
    confidences: dict[str, float] = field(default_factory=dict)
    confidence_source: str = LOGPROBS


@dataclass(frozen=True)
class DraftPrompt:
    """Everything the draft judge may read, and nothing else."""

    rubric: str
    criteria_number: int
    rules: DraftRules
    checks: CheckSet
    examples: tuple[PromptExample, ...]
    strategy: str | None
    learnings: list[str]
    facts: list[str]
    proof_terms: list[str]
    title: str
    body: str


class DraftJudge(Protocol):
    identity: JudgeIdentity

    def judge_draft(self, *, prompt: DraftPrompt) -> DraftJudgement: ...


class OpenAIDraftJudge(_ChatJudge):
    prompt_hash = DRAFT_PROMPT_HASH

    def judge_draft(self, *, prompt: DraftPrompt) -> DraftJudgement:
        user = draft_user_prompt(
            rubric=prompt.rubric,
            criteria_number=prompt.criteria_number,
            threshold=prompt.rules.threshold,
            max_issues=prompt.rules.max_judge_issues,
            rules_text=rules_as_text(prompt.rules),
            checks=prompt.checks,
            examples=prompt.examples,
            strategy=prompt.strategy,
            learnings=prompt.learnings,
            facts=prompt.facts,
            title=prompt.title,
            body=prompt.body,
        )
        completion = self._call(system=DRAFT_SYSTEM_PROMPT, user=user, schema=draft_answer_model(prompt.checks))
        verdict = completion.parsed
        distribution = score_distribution(completion.token_logprobs, field="overall")
        score, spread = mean_and_spread(distribution) if distribution else (float(verdict.overall), None)
        answers = draft_answers_by_key(verdict, prompt.checks)
        given = {key: answer["verdict"] if isinstance(answer, dict) else answer for key, answer in answers.items()}
        return DraftJudgement(
            overall=verdict.overall,
            passed=verdict.passed,
            issues=verdict.issues,
            answers=answers,
            score=score,
            spread=spread,
            usage=completion.usage,
            distribution=distribution,
            confidences=check_confidences(completion.token_logprobs, prompt.checks, given),
        )


class HeuristicDraftJudge:
    """Deterministic, offline, labelled as such. Reads the draft's structure the way the checks do:
    aeo from question headings, internal links and the callout; writing from AI-tell vocabulary;
    org fit from proof points referenced. Any other check it cannot read: null for a score, unknown otherwise."""

    identity = JudgeIdentity("heuristic", "offline-heuristic-v1", "heuristic-draft-v1", 0.0)

    def judge_draft(self, *, prompt: DraftPrompt) -> DraftJudgement:
        structure = parse_draft(prompt.body)
        rules = prompt.rules
        questions = sum(1 for h2 in structure.h2s if is_question_heading(h2.text, rules.h2.openings))
        links = len(internal_link_slugs(structure, rules.internal_links))
        aeo = 2 + (bool(structure.h2s) and questions / len(structure.h2s) >= 0.8) + (links >= 2) + (links >= 3)
        tells = len(re.findall(r"\b(?:really|very|truly|simply|just)\b", structure.prose, re.IGNORECASE))
        writing = max(1, 5 - tells // 2)
        referenced = proof_terms_referenced(prompt.body, prompt.proof_terms)
        org_fit = 5 if referenced else (3 if not prompt.proof_terms else 1)
        score = round((aeo + writing + org_fit) / 15 * 10, 1)
        overall = max(1, min(10, round(score)))
        readable = {"aeo": min(aeo, 5), "writing": writing, "org_fit": org_fit}
        unread = {"verdict": UNKNOWN, "quotes": [], "rationale": "The offline heuristic judge cannot read this check."}
        answers = {
            check.key: (readable.get(check.key) if check.scale == 5 else None)
            if check.kind == AnswerKind.SCORE
            else dict(unread)
            for check in prompt.checks.checks
        }
        return DraftJudgement(
            overall=overall,
            passed=score >= rules.threshold,
            issues=_heuristic_issues(aeo, writing, org_fit)[: rules.max_judge_issues],
            answers=answers,
            score=max(1.0, score),
            spread=None,
            usage=ZERO_USAGE,
        )


def _heuristic_issues(aeo: int, writing: int, org_fit: int) -> list[JudgeIssue]:
    issues = []
    if aeo < 4:
        issues.append(JudgeIssue(issue="Few headings answer a reader's question.", fix="Phrase H2s as questions."))
    if writing < 4:
        issues.append(JudgeIssue(issue="Intensifiers weaken the prose.", fix="Cut 'really', 'very', 'just'."))
    if org_fit < 4:
        issues.append(JudgeIssue(issue="No proof point backs the claims.", fix="Cite a customer result."))
    return issues


def draft_judge_from_settings() -> DraftJudge:
    """The default draft judge: the OpenAI-compatible one when JUDGE_BASE_URL is set, else the offline heuristic."""
    return draft_judge_named("default")

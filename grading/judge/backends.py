"""Judge backends: the OpenAI-compatible one (production) and the offline heuristic (a labelled demo fallback)."""

import hashlib
import json
import re
from dataclasses import asdict, dataclass, replace
from typing import Protocol

from django.conf import settings

from grading.checks import internal_link_slugs, is_question_heading, parse_draft, proof_terms_referenced
from grading.evidence import EvidenceMessage, Stage, render_message
from grading.judge.client import ZERO_USAGE, ChatJudgeClient, Usage, weighted_score
from grading.judge.conversation import (
    PROMPT_TEMPLATE_HASH,
    SYSTEM_PROMPT,
    CheckVerdict,
    ConversationVerdicts,
    user_prompt,
)
from grading.judge.draft import PROMPT_TEMPLATE_HASH as DRAFT_PROMPT_HASH
from grading.judge.draft import SYSTEM_PROMPT as DRAFT_SYSTEM_PROMPT
from grading.judge.draft import DraftVerdict, JudgeIssue
from grading.judge.draft import user_prompt as draft_user_prompt
from grading.rules import DraftRules, rules_as_text


@dataclass(frozen=True)
class JudgeIdentity:
    """Who graded: part of every review's score identity."""

    backend: str
    model: str
    prompt_hash: str
    temperature: float

    def as_json(self) -> dict:
        return asdict(self)

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.as_json(), sort_keys=True).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class StageJudgement:
    verdicts: ConversationVerdicts
    usage: Usage


class ConversationJudge(Protocol):
    identity: JudgeIdentity

    def judge_stage(self, *, rubric: str, criteria_number: int, stage: Stage, stage_count: int) -> StageJudgement: ...


class OpenAIJudge:
    """Any OpenAI-compatible chat-completions endpoint, through the one production client."""

    def __init__(self, client: ChatJudgeClient) -> None:
        self.client = client
        self.identity = JudgeIdentity("openai", client.model, PROMPT_TEMPLATE_HASH, 0.0)

    def judge_stage(self, *, rubric: str, criteria_number: int, stage: Stage, stage_count: int) -> StageJudgement:
        user = user_prompt(rubric=rubric, criteria_number=criteria_number, stage=stage, stage_count=stage_count)
        completion = self.client.complete(system=SYSTEM_PROMPT, user=user, schema=ConversationVerdicts)
        return StageJudgement(verdicts=completion.parsed, usage=completion.usage)


_FIGURE = re.compile(r"\d[\d,.]*\d|\d")
_REFUSAL = re.compile(r"\b(i can(?:no|')t|i am unable|i'm unable|unfortunately|an error occurred)\b", re.IGNORECASE)


class HeuristicJudge:
    """Deterministic, offline, and labelled as such everywhere it appears. For demos without an LLM.

    grounded: every figure an agent states appears earlier in the conversation (user or tool messages);
    complete: the slice ends on an agent reply and no user request in it is left unanswered;
    usable: the final agent reply is substantive and is not a refusal or an error.
    """

    identity = JudgeIdentity("heuristic", "offline-heuristic-v1", "heuristic-v1", 0.0)

    def judge_stage(self, *, rubric: str, criteria_number: int, stage: Stage, stage_count: int) -> StageJudgement:
        messages = [*stage.context, *stage.messages]
        agent = [m for m in stage.messages if m.role == "assistant" and _text(m)]
        verdicts = ConversationVerdicts(
            grounded=_grounded(messages, agent), complete=_complete(stage.messages), usable=_usable(agent)
        )
        return StageJudgement(verdicts=verdicts, usage=ZERO_USAGE)


def _text(message: EvidenceMessage) -> str:
    """What the message says, as an LLM judge would read it, minus its header and any tool calls."""
    return render_message(replace(message, tool_calls=None)).partition("\n")[2].strip()


def _grounded(messages: list[EvidenceMessage], agent: list[EvidenceMessage]) -> CheckVerdict:
    if not agent:
        return CheckVerdict(verdict="unknown", message_ids=[], rationale="No agent reply in this slice.")
    agent_ids = {m.id for m in agent}
    seen: set[str] = set()
    for message in messages:
        figures = set(_FIGURE.findall(_text(message)))
        if message.id in agent_ids:
            unsupported = sorted(figures - seen)
            if unsupported:
                return CheckVerdict(
                    verdict="fail",
                    message_ids=[message.id],
                    rationale=f"States {', '.join(unsupported[:3])} which no earlier message or tool result contains.",
                )
        seen |= figures
    return CheckVerdict(
        verdict="pass",
        message_ids=[m.id for m in agent],
        rationale="Every figure the agent states appears earlier in the conversation.",
    )


def _complete(messages: list[EvidenceMessage]) -> CheckVerdict:
    unanswered = None
    for message in messages:
        if message.role == "user":
            unanswered = message
        elif message.role == "assistant" and _text(message) and not message.tool_calls:
            unanswered = None
    if unanswered is not None:
        return CheckVerdict(verdict="fail", message_ids=[unanswered.id], rationale="A user request got no agent reply.")
    replies = [m.id for m in messages if m.role == "assistant"]
    if not replies:
        return CheckVerdict(verdict="unknown", message_ids=[], rationale="No agent reply in this slice.")
    return CheckVerdict(verdict="pass", message_ids=replies[-1:], rationale="Every user request got a reply.")


def _usable(agent: list[EvidenceMessage]) -> CheckVerdict:
    if not agent:
        return CheckVerdict(verdict="unknown", message_ids=[], rationale="No agent reply in this slice.")
    final = agent[-1]
    text = _text(final)
    if _REFUSAL.search(text):
        return CheckVerdict(
            verdict="fail", message_ids=[final.id], rationale="The final reply refuses or reports an error."
        )
    if len(text) < 20:
        return CheckVerdict(
            verdict="unknown", message_ids=[final.id], rationale="The final reply is too short to judge."
        )
    return CheckVerdict(verdict="pass", message_ids=[final.id], rationale="The final reply is substantive.")


def judge_from_settings() -> ConversationJudge:
    """The OpenAI-compatible judge when JUDGE_BASE_URL is set, else the offline heuristic."""
    if not settings.JUDGE_BASE_URL:
        return HeuristicJudge()
    return OpenAIJudge(_client_from_settings(want_logprobs=False))


def _client_from_settings(*, want_logprobs: bool) -> ChatJudgeClient:
    return ChatJudgeClient(
        base_url=settings.JUDGE_BASE_URL,
        model=settings.JUDGE_MODEL,
        api_key=settings.JUDGE_API_KEY or "unused",
        timeout=settings.JUDGE_TIMEOUT_SECONDS,
        max_retries=settings.JUDGE_MAX_RETRIES,
        want_logprobs=want_logprobs,
    )


# --- drafts ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DraftJudgement:
    verdict: DraftVerdict
    score: float  # the probability-weighted overall when log-probabilities came back, else the overall itself
    spread: float | None
    usage: Usage


@dataclass(frozen=True)
class DraftPrompt:
    """Everything the draft judge may read, and nothing else."""

    rubric: str
    criteria_number: int
    rules: DraftRules
    strategy: str | None
    learnings: list[str]
    facts: list[str]
    proof_terms: list[str]
    title: str
    body: str


class DraftJudge(Protocol):
    identity: JudgeIdentity

    def judge_draft(self, *, prompt: DraftPrompt) -> DraftJudgement: ...


class OpenAIDraftJudge:
    def __init__(self, client: ChatJudgeClient) -> None:
        self.client = client
        self.identity = JudgeIdentity("openai", client.model, DRAFT_PROMPT_HASH, 0.0)

    def judge_draft(self, *, prompt: DraftPrompt) -> DraftJudgement:
        user = draft_user_prompt(
            rubric=prompt.rubric,
            criteria_number=prompt.criteria_number,
            threshold=prompt.rules.threshold,
            max_issues=prompt.rules.max_judge_issues,
            rules_text=rules_as_text(prompt.rules),
            strategy=prompt.strategy,
            learnings=prompt.learnings,
            facts=prompt.facts,
            title=prompt.title,
            body=prompt.body,
        )
        completion = self.client.complete(system=DRAFT_SYSTEM_PROMPT, user=user, schema=DraftVerdict)
        verdict = completion.parsed
        distribution = weighted_score(completion.token_logprobs, field="overall")
        score, spread = distribution if distribution else (float(verdict.overall), None)
        return DraftJudgement(verdict=verdict, score=score, spread=spread, usage=completion.usage)


class HeuristicDraftJudge:
    """Deterministic, offline, labelled as such. Reads the draft's structure the way the checks do:
    aeo from question headings, internal links and the callout; writing from AI-tell vocabulary;
    org fit from proof points referenced."""

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
        verdict = DraftVerdict(
            overall=overall,
            aeo=min(aeo, 5),
            writing=writing,
            org_fit=org_fit,
            passed=score >= rules.threshold,
            issues=_heuristic_issues(aeo, writing, org_fit)[: rules.max_judge_issues],
        )
        return DraftJudgement(verdict=verdict, score=max(1.0, score), spread=None, usage=ZERO_USAGE)


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
    if not settings.JUDGE_BASE_URL:
        return HeuristicDraftJudge()
    return OpenAIDraftJudge(_client_from_settings(want_logprobs=True))

"""What the criteria page tests share: an org with graded drafts and conversations, an unpublished draft version with
one more banned word, and a trial of it, run."""

from dataclasses import dataclass
from html.parser import HTMLParser

from grading.conversations.grader import conversation_grade
from grading.criteria.trials import criteria_trial_start, trial_item_grade
from grading.drafts.gate import draft_grade
from grading.models import Conversation, CriteriaTrial, CriteriaVersion, Draft, ItemKind, Org
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_update
from tests.builders.conversations import llm_judge, support_conversation, upsert, verdicts_reply
from tests.builders.drafts import CLEAN_BODY, draft_reply, llm_draft_judge, save_draft, setup_org_memory
from tests.fakes.openai_server import FakeLLM

GIZMO_BODY = CLEAN_BODY.replace("Start with the questions", "Start with the gizmo questions")


@dataclass(frozen=True)
class Criteria:
    org: Org
    active: CriteriaVersion  # draft v1
    draft_version: CriteriaVersion  # draft v2, unpublished: "gizmo" banned
    conversation_active: CriteriaVersion
    draft: Draft  # clean
    gizmo_draft: Draft  # passes v1, fails v2
    conversation: Conversation
    trial: CriteriaTrial


def with_banned_word(version: CriteriaVersion, word: str) -> dict:
    rules = version.draft_rules().model_dump(mode="json")
    rules["banned_words"]["terms"].append(word)
    return rules


def graded_org(org: Org, fake_llm: FakeLLM, author=None) -> Criteria:
    setup_org_memory(org)
    draft = save_draft(org, external_id="clean")
    gizmo_draft = save_draft(org, GIZMO_BODY, external_id="gizmo")
    fake_llm.set_default(draft_reply(8))
    for item in (draft, gizmo_draft):
        draft_grade(draft_id=item.pk, judge=llm_draft_judge(fake_llm))
    conversation = upsert(org, support_conversation("cv-1")).conversation
    fake_llm.set_default(verdicts_reply(conversation.active_path_ids))
    conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    fake_llm.reset()
    active = criteria_active(org=org, kind=ItemKind.DRAFT)
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT, author=author)
    version = criteria_update(version=version, actor=author, rules=with_banned_word(version, "gizmo"))
    trial = criteria_trial_start(version=version, size=1, counted_calls=1, actor=author)
    fake_llm.set_default(draft_reply(6))
    trial_item_grade(trial_id=trial.pk, index=0, draft_judge=llm_draft_judge(fake_llm))  # done: the next may start
    fake_llm.reset()
    trial.refresh_from_db()
    return Criteria(
        org=org,
        active=active,
        draft_version=version,
        conversation_active=criteria_active(org=org, kind=ItemKind.CONVERSATION),
        draft=draft,
        gizmo_draft=gizmo_draft,
        conversation=conversation,
        trial=trial,
    )


def editor_data(version: CriteriaVersion, **changes: str) -> dict[str, str]:
    """What the editor posts when saved as it opened, with `changes` (by field name) typed over it."""
    from reviewer.criteria.forms import CriteriaForm

    form = CriteriaForm.for_version(version)
    bound_fields = list(form)
    formsets = [form.characters, form.components] if form.is_draft else []
    formsets += [check.rules for check in form.checks.forms if check.rules is not None]
    for formset in (form.checks, *formsets):
        bound_fields += list(formset.management_form)
        for row in formset.forms:
            bound_fields += list(row)
    data: dict = {}
    for field in bound_fields:
        value = field.value()
        if isinstance(value, bool) or value is None:
            if value:
                data[field.html_name] = "on"
            continue
        data[field.html_name] = [str(v) for v in value] if isinstance(value, list) else str(value)
    return data | changes


class _EditorForm(HTMLParser):
    """The fields of the page's editor form (`<form class="editor">`) as a browser posts them: text inputs and
    textareas as they read, ticked boxes, each select's selected option (else its first)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.data: dict[str, list[str]] = {}
        self._in_form = False
        self._select: str | None = None
        self._options: list[tuple[str, bool]] = []
        self._textarea: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {name: value or "" for name, value in attrs}
        if tag == "form":
            self._in_form = "editor" in attr.get("class", "").split()
        if not self._in_form or "name" not in attr and tag != "option":
            return
        if tag == "input":
            kind = attr.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in attr:
                    self._add(attr["name"], attr.get("value", "on"))
            elif kind not in ("submit", "button"):
                self._add(attr["name"], attr.get("value", ""))
        elif tag == "select":
            self._select, self._options = attr["name"], []
        elif tag == "option" and self._select is not None:
            self._options.append((attr.get("value", ""), "selected" in attr))
        elif tag == "textarea":
            self._textarea, self._text = attr["name"], ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_form = False
        elif tag == "select" and self._select is not None:
            chosen = [value for value, selected in self._options if selected] or [self._options[0][0]]
            self._add(self._select, chosen[0])
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            self._add(self._textarea, self._text.removeprefix("\n"))  # the newline after the tag is not content
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text += data

    def _add(self, name: str, value: str) -> None:
        self.data.setdefault(name, []).append(value)


def page_form_data(html: str, **changes) -> dict:
    """What the browser posts when the editor on `html` is saved as it reads, with `changes` typed over it."""
    parser = _EditorForm()
    parser.feed(html)
    return {name: values if len(values) > 1 else values[0] for name, values in parser.data.items()} | changes

from django.db import migrations, models

# The checks every version asked before a version could define its own (grading.checks.definitions, as of this
# migration: kept here so that later changes to the defaults do not rewrite history).
CONVERSATION_CHECKS = {
    "checks": [
        {
            "key": "grounded",
            "name": "Grounded",
            "question": "Is every claim the assistant makes supported by the conversation or its tool results?",
            "kind": "verdict",
            "guidance": {},
            "required": True,
            "categories": [],
            "scale": 5,
            "passing": [],
            "pass_from": None,
            "rules": [],
        },
        {
            "key": "complete",
            "name": "Complete",
            "question": "Did the assistant address everything the user asked?",
            "kind": "verdict",
            "guidance": {},
            "required": True,
            "categories": [],
            "scale": 5,
            "passing": [],
            "pass_from": None,
            "rules": [],
        },
        {
            "key": "usable",
            "name": "Usable",
            "question": "Could the user act on the answer as given?",
            "kind": "verdict",
            "guidance": {},
            "required": True,
            "categories": [],
            "scale": 5,
            "passing": [],
            "pass_from": None,
            "rules": [],
        },
    ],
    "judge_after_rule_fail": True,
}
DRAFT_CHECKS = {
    "checks": [
        {
            "key": "aeo",
            "name": "AEO compliance",
            "question": "How well does the draft answer the questions it names?",
            "kind": "score",
            "guidance": {},
            "required": False,
            "categories": [],
            "scale": 5,
            "passing": [],
            "pass_from": None,
            "rules": [],
        },
        {
            "key": "writing",
            "name": "Writing quality",
            "question": "How good is the writing?",
            "kind": "score",
            "guidance": {},
            "required": False,
            "categories": [],
            "scale": 5,
            "passing": [],
            "pass_from": None,
            "rules": [],
        },
        {
            "key": "org_fit",
            "name": "Org fit",
            "question": "How well does the draft fit the organisation?",
            "kind": "score",
            "guidance": {},
            "required": False,
            "categories": [],
            "scale": 5,
            "passing": [],
            "pass_from": None,
            "rules": [],
        },
    ],
    "judge_after_rule_fail": True,
}


def checks_of_today(apps, schema_editor):
    """Every existing version asks what it always asked: its stored reviews, decisions, labels and counters read as
    before."""
    CriteriaVersion = apps.get_model("grading", "CriteriaVersion")
    for kind, defaults in (("conversation", CONVERSATION_CHECKS), ("draft", DRAFT_CHECKS)):
        CriteriaVersion.objects.filter(kind=kind, checks={}).update(checks=defaults)


class Migration(migrations.Migration):
    dependencies = [("grading", "0027_service_target_counters")]

    operations = [
        migrations.AddField(
            model_name="criteriaversion",
            name="checks",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="What it asks (grading.checks.definitions.CheckSet): the checks in order, with their rules.",
            ),
        ),
        migrations.RunPython(checks_of_today, migrations.RunPython.noop),
    ]

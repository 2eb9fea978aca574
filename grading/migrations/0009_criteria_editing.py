"""Criteria editing: a version's revision (the editor's optimistic lock), who saved it last and what it was cloned
from; trial runs; and trial reviews exempt from the identity constraints, so a trial under a version that is later
published never stands in for the real grading of the same identity."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('grading', '0008_labels_and_audit'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='CriteriaTrial',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('sample', models.JSONField(default=list, help_text='Ids of the drafts or conversations, in sample order.')),
                ('judge_calls', models.PositiveIntegerField(help_text='Counted before the run, and shown to whoever started it.')),
                ('judge_calls_made', models.PositiveIntegerField(default=0)),
                ('review_ids', models.JSONField(default=list)),
                ('requested_at', models.DateTimeField(auto_now_add=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.RemoveConstraint(
            model_name='review',
            name='review_unique_conversation_identity',
        ),
        migrations.RemoveConstraint(
            model_name='review',
            name='review_unique_draft_identity',
        ),
        migrations.AddField(
            model_name='criteriaversion',
            name='based_on',
            field=models.ForeignKey(blank=True, help_text='Cloned from it.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='grading.criteriaversion'),
        ),
        migrations.AddField(
            model_name='criteriaversion',
            name='revision',
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.AddField(
            model_name='criteriaversion',
            name='updated_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='criteriaversion',
            name='updated_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddConstraint(
            model_name='review',
            constraint=models.UniqueConstraint(condition=models.Q(models.Q(('route', 'error'), _negated=True), models.Q(('state', 'trial'), _negated=True)), fields=('conversation', 'fingerprint', 'criteria_version', 'judge_key'), name='review_unique_conversation_identity'),
        ),
        migrations.AddConstraint(
            model_name='review',
            constraint=models.UniqueConstraint(condition=models.Q(models.Q(('route', 'error'), _negated=True), models.Q(('state', 'trial'), _negated=True)), fields=('draft', 'fingerprint', 'criteria_version', 'judge_key', 'memory_snapshot'), name='review_unique_draft_identity'),
        ),
        migrations.AddField(
            model_name='criteriatrial',
            name='criteria_version',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='trials', to='grading.criteriaversion'),
        ),
        migrations.AddField(
            model_name='criteriatrial',
            name='org',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='grading.org'),
        ),
        migrations.AddField(
            model_name='criteriatrial',
            name='requested_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
    ]

"""Review state (one stored column instead of is_current), decisions on grading's side, and threshold and
band only in the rules document (where criteria_update already kept them)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('grading', '0005_one_active_strategy'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Decision',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('outcome', models.CharField(choices=[('approve', 'approve'), ('reject', 'reject'), ('send_back', 'send back'), ('pass', 'pass'), ('fail', 'fail'), ('unknown', 'unknown')], max_length=16)),
                ('checks', models.JSONField(blank=True, default=dict, help_text='Conversations: the human verdict per check.')),
                ('note', models.TextField(blank=True)),
                ('decided_at', models.DateTimeField()),
            ],
        ),
        migrations.AddField(
            model_name='review',
            name='state',
            field=models.CharField(choices=[('current', 'current'), ('waiting', 'waiting for a person'), ('decided', 'decided by a person'), ('stale', 'stale'), ('superseded', 'superseded'), ('trial', 'trial')], default='superseded', max_length=16),
            preserve_default=False,
        ),
        # Each item's latest review (is_current) gets the state its columns say; decisions move over from the
        # people side in reviewer 0004, which marks their reviews decided.
        migrations.RunSQL(
            """
            UPDATE grading_review r SET state = CASE
                WHEN NOT r.is_current THEN 'superseded'
                WHEN r.fingerprint <> COALESCE(
                    (SELECT c.fingerprint FROM grading_conversation c WHERE c.id = r.conversation_id),
                    (SELECT d.fingerprint FROM grading_draft d WHERE d.id = r.draft_id)) THEN 'stale'
                WHEN r.route = 'human' THEN 'waiting'
                ELSE 'current' END
            """,
            migrations.RunSQL.noop,
        ),
        migrations.RemoveConstraint(
            model_name='review',
            name='review_one_current_per_conversation',
        ),
        migrations.RemoveConstraint(
            model_name='review',
            name='review_one_current_per_draft',
        ),
        migrations.RemoveIndex(
            model_name='review',
            name='review_current',
        ),
        migrations.RemoveField(
            model_name='criteriaversion',
            name='band',
        ),
        migrations.RemoveField(
            model_name='criteriaversion',
            name='threshold',
        ),
        migrations.RemoveField(
            model_name='review',
            name='is_current',
        ),
        migrations.AlterField(
            model_name='criteriaversion',
            name='rules',
            field=models.JSONField(blank=True, default=dict, help_text='Drafts: the rules document (grading/rules.py), threshold and band included.'),
        ),
        migrations.AddIndex(
            model_name='review',
            index=models.Index(condition=models.Q(('state__in', ('current', 'waiting', 'decided'))), fields=['org', 'kind', 'route'], name='review_counting'),
        ),
        migrations.AddIndex(
            model_name='review',
            index=models.Index(condition=models.Q(('state', 'waiting')), fields=['criteria_version', 'finished_at', 'id'], name='review_queue'),
        ),
        migrations.AddIndex(
            model_name='review',
            index=models.Index(condition=models.Q(('state', 'waiting')), fields=['criteria_version', 'reason', 'finished_at', 'id'], name='review_queue_reason'),
        ),
        migrations.AddConstraint(
            model_name='review',
            constraint=models.UniqueConstraint(condition=models.Q(('state__in', ('current', 'waiting', 'decided', 'stale'))), fields=('conversation',), name='review_one_live_per_conversation'),
        ),
        migrations.AddConstraint(
            model_name='review',
            constraint=models.UniqueConstraint(condition=models.Q(('state__in', ('current', 'waiting', 'decided', 'stale'))), fields=('draft',), name='review_one_live_per_draft'),
        ),
        migrations.AddField(
            model_name='decision',
            name='decided_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='decision',
            name='learning',
            field=models.ForeignKey(blank=True, help_text='The org learning the note became, when the person asked for one.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='grading.memoryitem'),
        ),
        migrations.AddField(
            model_name='decision',
            name='org',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='grading.org'),
        ),
        migrations.AddField(
            model_name='decision',
            name='review',
            field=models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='decision', to='grading.review'),
        ),
        migrations.AddIndex(
            model_name='decision',
            index=models.Index(fields=['org', 'decided_at'], name='decision_org_decided_at'),
        ),
    ]

# A waiting call's log records move from one JSON list on its row (read back and rewritten whole by every request that
# added one) to a row each; what they add up to is kept on the call as they are appended.

import hashlib
import json

import django.db.models.deletion
from django.db import migrations, models

LAST_EVENTS = {"gen_ai.choice", "gen_ai.client.inference.operation.details"}


def events_to_rows(apps, schema_editor):
    """Each call's [[name, fields, time], ...] as PendingEvent rows, in their order, with the call's sums."""
    PendingCall = apps.get_model("otlp", "PendingCall")
    PendingEvent = apps.get_model("otlp", "PendingEvent")
    for call in PendingCall.objects.exclude(events=[]).iterator(chunk_size=500):
        rows, seen, stored = [], set(), 0
        for name, values, time in call.events:
            document = json.dumps([name, values, time], sort_keys=True, ensure_ascii=False)
            key = hashlib.sha256(document.encode()).hexdigest()
            if key in seen:
                continue
            seen.add(key)
            stored += len(json.dumps(values, ensure_ascii=False).encode())
            rows.append(PendingEvent(call=call, name=name, values=values, time=time, key=key))
        PendingEvent.objects.bulk_create(rows)
        PendingCall.objects.filter(pk=call.pk).update(
            event_count=len(rows), stored_bytes=stored, replied=any(row.name in LAST_EVENTS for row in rows)
        )


class Migration(migrations.Migration):

    dependencies = [
        ('grading', '0017_conversation_content_awaited'),
        ('otlp', '0003_pending_call_end_user'),
    ]

    operations = [
        migrations.CreateModel(
            name='PendingEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100)),
                ('values', models.JSONField(help_text="The event's fields: the record's attributes and, over them, its body's.")),
                ('time', models.BigIntegerField(help_text="The record's time in nanoseconds.")),
                ('key', models.CharField(help_text='SHA-256 of name, fields and time: what makes it itself.', max_length=64)),
                ('call', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='otlp.pendingcall')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('call', 'key'), name='pending_event_one_per_record')],
            },
        ),
        migrations.AddField(
            model_name='pendingcall',
            name='event_count',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='pendingcall',
            name='refused',
            field=models.CharField(blank=True, help_text='Why the call can never be written: its content went, its parts are refused.', max_length=500),
        ),
        migrations.AddField(
            model_name='pendingcall',
            name='replied',
            field=models.BooleanField(default=False, help_text="A reply event (the last of a call's) is here."),
        ),
        migrations.AddField(
            model_name='pendingcall',
            name='stored_bytes',
            field=models.BigIntegerField(default=0, help_text="The UTF-8 JSON size of its events' fields."),
        ),
        migrations.RunPython(events_to_rows, migrations.RunPython.noop, elidable=True),
        migrations.RemoveField(
            model_name='pendingcall',
            name='events',
        ),
        migrations.AddIndex(
            model_name='pendingcall',
            index=models.Index(fields=['received_at'], name='pending_call_expiry'),
        ),
        migrations.AddIndex(
            model_name='pendingcall',
            index=models.Index(condition=models.Q(('refused', ''), ('written_at', None)), fields=['org'], include=('stored_bytes',), name='pending_call_waiting'),
        ),
    ]

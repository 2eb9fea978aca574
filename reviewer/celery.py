"""The Celery app: configured from Django settings under the CELERY_ namespace."""

import contextlib
import os
import warnings

from celery import Celery, Task
from celery.app.amqp import AMQP
from celery.exceptions import CPendingDeprecationWarning
from celery.worker.consumer import Consumer
from celery.worker.request import Request
from kombu import Connection, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")


class TaskRequest(Request):
    """A task's request in the worker, whose acknowledgement cannot stop the worker.

    A task that ends after the worker lost its connection to Redis acknowledges on the lost connection's channel.
    kombu's Redis transport can answer with AttributeError (a channel whose close was cut short) rather than a
    connection error, and a prefork worker's event loop does not catch it: the worker stops. Counted with the
    connection errors, it is logged as an acknowledgement that could not be made: the message is delivered again,
    as after any lost acknowledgement (a grading task then finds its work done; a webhook is sent once more).
    """

    def __init__(self, *args, connection_errors: tuple[type[Exception], ...] | None = None, **kwargs) -> None:
        super().__init__(*args, connection_errors=(*(connection_errors or ()), AttributeError), **kwargs)


class TollgateTask(Task):
    Request = TaskRequest


class BrokerConnection(Connection):
    """A connection to the broker whose close cannot fail on a channel that lost Redis.

    A worker that loses Redis drops its connection (`collect`) and then closes it. The drop closes the channels,
    but a close cut short (the tasks' channel's, by its BRPOP on the dead socket, and then another channel's before
    that one was closed again) leaves a channel open, and the drop leaves the transport without a client. Closing
    that channel then restores the messages the worker holds unacknowledged through the missing client: kombu's
    Redis transport raises AttributeError, which kombu ignores when closing a connection but not a channel, and the
    worker stopped ("Unrecoverable error"). Ignored here too: the messages are delivered again when their visibility
    timeout passes, as after any lost acknowledgement.
    """

    def maybe_close_channel(self, channel) -> None:
        with contextlib.suppress(AttributeError):
            super().maybe_close_channel(channel)


class BrokerAMQP(AMQP):
    """Celery's broker plumbing, every connection the app opens (a worker's, a sender's, remote control's) a
    `BrokerConnection`."""

    Connection = BrokerConnection


# The start of Celery's warning at every reconnection (WorkerConsumer).
_CANCEL_TASKS_BY_DEFAULT = r"\s*In Celery 5\.1 we introduced an optional breaking change"


class WorkerConsumer(Consumer):
    """A worker's consumer, as `celery worker --without-gossip --without-mingle` makes it, however it is started.

    Nothing here reads the workers' gossip (their events to one another) or needs mingle (revoked tasks and clocks
    learnt from the others at start): Tollgate revokes no task, and reaches a worker by its remote control. At every
    reconnection to the broker, Gossip's restart failed on the connection it had dropped (an ERROR with a traceback
    in a thread-pool worker's log), and mingle waited a second for answers before the worker took work again.

    Celery's consumer also warns, at every reconnection, that Celery 6.0 will cancel running tasks by default, when
    the setting says not to on purpose (CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS in
    reviewer/settings.py). That warning is ignored from here: the worker's logging set-up, which runs before the
    consumer is made, sets every Celery warning to "always".
    """

    def __init__(self, *args, worker_options: dict | None = None, **kwargs) -> None:
        warnings.filterwarnings("ignore", _CANCEL_TASKS_BY_DEFAULT, CPendingDeprecationWarning)
        options = {**(worker_options or {}), "without_gossip": True, "without_mingle": True}
        super().__init__(*args, worker_options=options, **kwargs)


app = Celery("reviewer", task_cls=TollgateTask, amqp=BrokerAMQP)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in ("judge", "default", "webhooks")]
app.conf.worker_consumer = "reviewer.celery:WorkerConsumer"
app.autodiscover_tasks(["grading", "grading.otlp", "reviewer"])

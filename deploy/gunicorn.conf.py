"""gunicorn for Tollgate behind the nginx site in deploy/nginx/: `gunicorn -c deploy/gunicorn.conf.py reviewer.wsgi`
(deploy/systemd/tollgate-web.service runs it so). WEB_CONCURRENCY and WEB_THREADS size it; anything here may be
overridden on the command line (`-b`, `-w`, ...).

Threads (`gthread`), not the sync worker: a sync worker that answers for longer than `timeout` is killed mid-answer,
and a streamed export (the dashboard's CSV or JSON Lines) may take minutes for a large org. In a
gthread worker the timeout only says the process hangs: its main thread keeps reporting while other threads answer.
What bounds a request is the application's own limits (MAX_REQUEST_BYTES, the OTLP and label limits, the preview's
CPU budget), sized to be served well inside 30 s.
"""

import os

# A process per core runs Python (the GIL holds one core each), plus one; its threads overlap the waits on
# PostgreSQL. PostgreSQL connections grow with processes: each has its own pool of up to DATABASE_POOL_MAX_SIZE.
workers = int(os.environ.get("WEB_CONCURRENCY", (os.cpu_count() or 1) + 1))
worker_class = "gthread"
threads = int(os.environ.get("WEB_THREADS", 4))

# Only nginx on this machine talks to gunicorn.
bind = ["127.0.0.1:8000"]
# nginx's X-Forwarded-Proto is believed from loopback only (Django reads it too: BEHIND_TLS_PROXY).
forwarded_allow_ips = "127.0.0.1,::1"

timeout = 30  # a process silent this long is stuck: restarted
graceful_timeout = 30  # on a reload or stop, what answers are in flight get this long to finish
# Longer than the keepalive of nginx's upstream block (60 s), so gunicorn never closes a connection nginx is about to
# reuse. Idle connections wait in the worker's poller, not in a thread.
keepalive = 65

# systemd manages the processes (reload: HUP); a control socket under the service user's home is not wanted.
control_socket_disable = True

# To the journal. %(h)s is nginx; the client is the last X-Forwarded-For entry, the one nginx appended.
accesslog = "-"
access_log_format = '%({x-forwarded-for}i)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s"'

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")

from reviewer.chunked import chunked_bodies  # noqa: E402 - reads the settings named above

application = chunked_bodies(get_wsgi_application())

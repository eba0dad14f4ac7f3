"""Settings of the error-path test's server: the project's, with one more route that reads
the database and then fails holding text no encoding takes (a lone surrogate), as a forged
cursor once did deep in a query.

    DJANGO_SETTINGS_MODULE=tests.serving.raising_settings daphne gloveapp.asgi:application
"""

from gloveapp.settings import *  # noqa: F403

ROOT_URLCONF = "tests.serving.raising_urls"

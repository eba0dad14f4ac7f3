"""The project's routes, and `/raise-unencodable`: a view that takes a pooled connection,
reads, and raises an error whose message and locals hold a lone surrogate."""

from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.urls import path

from gloveapp.urls import handler400, handler500
from gloveapp.urls import urlpatterns as project_urls

__all__ = ["handler400", "handler500", "urlpatterns"]


def raise_unencodable(request: HttpRequest) -> HttpResponse:
    tie = "\ud800"
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    raise UnicodeEncodeError("utf-8", tie, 0, 1, f"surrogates not allowed: {tie}")


urlpatterns = [path("raise-unencodable", raise_unencodable), *project_urls]

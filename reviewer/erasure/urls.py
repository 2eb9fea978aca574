from django.urls import path

from reviewer.erasure import views

urlpatterns = [
    path("", views.erasure, name="erasure"),
]

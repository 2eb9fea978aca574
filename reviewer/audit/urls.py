from django.urls import path

from reviewer.audit import views

urlpatterns = [
    path("", views.audit, name="audit"),
    path("events.csv", views.audit_csv_export, name="audit_csv"),
]

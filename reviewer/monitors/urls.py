from django.urls import path

from reviewer.monitors import views

urlpatterns = [
    path("", views.monitors, name="monitors"),
    path("new/", views.monitor_new, name="monitor_new"),
    path("<int:pk>/", views.monitor_detail, name="monitor_detail"),
    path("<int:pk>/items/", views.monitor_items, name="monitor_items"),
    path("<int:pk>/edit/", views.monitor_edit, name="monitor_edit"),
    path("<int:pk>/remove/", views.monitor_remove, name="monitor_remove"),
]

from django.contrib import admin
from django.urls import path

from webapp.core import views as core_views

urlpatterns = [
    path("healthz", core_views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
]

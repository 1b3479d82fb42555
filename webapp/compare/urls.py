from django.urls import path

from webapp.compare import api, views

urlpatterns = [
    path("compare", views.compare, name="compare"),
    path("compare/summary.csv", views.compare_csv, name="compare_csv"),
    path("compare/ablations", views.ablation_new, name="ablation_new"),
    path("compare/ablations/estimate", views.ablation_estimate, name="ablation_estimate"),
    path("api/compare", api.compare, name="api_compare"),
]

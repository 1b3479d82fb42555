from django.contrib.auth import views as auth_views
from django.urls import path

from webapp.accounts import views

urlpatterns = [
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(template_name="accounts/login.html", redirect_authenticated_user=True),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<id:pk>/revoke/", views.token_revoke, name="token_revoke"),
]

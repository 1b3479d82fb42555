import django.db.models.functions.text
from django.db import migrations, models


def rename_repeated_names(apps, schema_editor):
    """Tokens made before names were unique: a name a user already has (in any case) gets " (2)", " (3)", ...
    in the order the tokens were made, so each can still be told apart and revoked."""
    ApiToken = apps.get_model("accounts", "ApiToken")
    taken: dict[tuple[int, str], int] = {}
    names = {(token.user_id, token.name.lower()) for token in ApiToken.objects.only("user_id", "name")}
    for token in ApiToken.objects.order_by("user_id", "created_at", "pk"):
        key = (token.user_id, token.name.lower())
        taken[key] = taken.get(key, 0) + 1
        if taken[key] == 1:
            continue
        number = taken[key]
        while (token.user_id, numbered(token.name, number).lower()) in names:
            number += 1
        token.name = numbered(token.name, number)
        names.add((token.user_id, token.name.lower()))
        token.save(update_fields=["name"])


def numbered(name: str, number: int) -> str:
    suffix = f" ({number})"
    return name[: 100 - len(suffix)] + suffix  # within the field's 100 characters


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [
        migrations.RunPython(rename_repeated_names, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="apitoken",
            constraint=models.UniqueConstraint(
                models.F("user"),
                django.db.models.functions.text.Lower("name"),
                name="one_token_name_per_user",
            ),
        ),
    ]

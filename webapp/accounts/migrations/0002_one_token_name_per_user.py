import django.db.models.functions.text
from django.db import migrations, models
from django.db.models.functions import Lower


def rename_repeated_names(apps, schema_editor):
    """Tokens made before names were unique: a name a user already has (in any case) gets " (2)", " (3)", ...
    in the order the tokens were made, so each can still be told apart and revoked. Names are lower-cased by
    the database, as the constraint compares them (Python's lower() differs on a few letters)."""
    ApiToken = apps.get_model("accounts", "ApiToken")
    tokens = list(ApiToken.objects.annotate(folded=Lower("name")).order_by("user_id", "created_at", "pk"))
    names = {(token.user_id, token.folded) for token in tokens}
    seen: set[tuple[int, str]] = set()
    for token in tokens:
        if (token.user_id, token.folded) not in seen:
            seen.add((token.user_id, token.folded))
            continue
        number = 2
        while (key := (token.user_id, folded(schema_editor, numbered(token.name, number)))) in names:
            number += 1
        token.name = numbered(token.name, number)
        names.add(key)
        token.save(update_fields=["name"])


def numbered(name: str, number: int) -> str:
    suffix = f" ({number})"
    return name[: 100 - len(suffix)] + suffix  # within the field's 100 characters


def folded(schema_editor, name: str) -> str:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT lower(%s)", [name])
        return cursor.fetchone()[0]


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

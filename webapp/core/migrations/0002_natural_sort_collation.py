from django.contrib.postgres.operations import CreateCollation
from django.db import migrations

from webapp.core.natural_sort import COLLATION


class Migration(migrations.Migration):
    # On Postgres only (the operation does nothing elsewhere); SQLite gets it per connection.
    dependencies = [("core", "0001_initial")]
    operations = [CreateCollation(COLLATION, provider="icu", locale="und-u-kn-true")]

"""``manage.py create_api_key NAME --read SCOPE… --write SCOPE…``: create a key and print it once."""

from django.core.management.base import BaseCommand, CommandError

from artifacts import selectors, services
from vocabulary.errors import DomainError
from vocabulary.text import stored_text_problem


class Command(BaseCommand):
    help = (
        "Create an API key with read and/or write grants on existing scopes. The key is printed once on "
        "stdout (alone on its line, for scripts); only its SHA-256 is stored."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="a unique name for the key (the host it is for)")
        parser.add_argument(
            "--read", nargs="+", action="extend", default=[], metavar="SCOPE", help="scopes the key may read"
        )
        parser.add_argument(
            "--write", nargs="+", action="extend", default=[], metavar="SCOPE", help="scopes the key may write"
        )

    def handle(self, *args, name, read, write, **options):
        # Checked before any query: PostgreSQL cannot even compare text holding U+0000.
        problem = stored_text_problem(name)
        if problem:
            raise CommandError(f"name: {problem}")
        wanted = list(dict.fromkeys([*read, *write]))
        for scope_id in wanted:
            problem = stored_text_problem(scope_id)
            if problem:
                raise CommandError(f"scope {scope_id!r}: {problem}")
        scopes = selectors.scope_get_many(scope_ids=wanted)
        unknown = [scope_id for scope_id in wanted if scope_id not in scopes]
        if unknown:
            raise CommandError(f"unknown scope{'s' if len(unknown) > 1 else ''}: {', '.join(map(repr, unknown))}")
        if selectors.api_key_find_by_name(name=name) is not None:
            raise CommandError(f"an API key named {name!r} already exists")
        try:
            api_key, plaintext = services.api_key_create(
                name=name,
                read_scopes=[scopes[s] for s in dict.fromkeys(read)],
                write_scopes=[scopes[s] for s in dict.fromkeys(write)],
            )
        except DomainError as exc:
            raise CommandError(f"{getattr(exc, 'path', '') or 'name'}: {exc}") from exc
        rights = [f"read {', '.join(read)}"] if read else []
        rights += [f"write {', '.join(write)}"] if write else []
        self.stderr.write(
            f"Created API key {api_key.name!r} ({'; '.join(rights) or 'no grants'}). "
            "Store it now: it is not shown again."
        )
        self.stdout.write(plaintext)

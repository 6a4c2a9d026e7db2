"""Django's flush, able to empty the append-only tables.

flush wipes every table on purpose (tests between transactional cases, operators resetting a
database); the immutability triggers guard against changing history, not against deleting all of
it. They are lifted for the flush alone, in the same database, and always put back.
"""

from django.core.management.commands.flush import Command as FlushCommand
from django.db import connections

from artifacts.immutability import install_triggers, uninstall_triggers


class Command(FlushCommand):
    help = FlushCommand.help + " Immutability triggers are lifted for the flush and put back."

    def handle(self, **options):
        connection = connections[options["database"]]
        uninstall_triggers(connection)
        try:
            return super().handle(**options)
        finally:
            install_triggers(connection)

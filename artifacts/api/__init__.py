"""The artifacts app over HTTP: exact reads, history and writes (serializers, views, urls)."""

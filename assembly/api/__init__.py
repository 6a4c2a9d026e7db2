"""The assembly app over HTTP: POST /v1/context/prepare (serializers, views, urls)."""

"""Error mapping of the client: one exception type per status, transport failures, and no retries."""

import httpx
import pytest
from powercontext_client import (
    APIError,
    Conflict,
    ContentErased,
    Forbidden,
    InvalidRequest,
    InvalidResponse,
    NotFound,
    PowerContextClient,
    PowerContextError,
    ServerError,
    ServiceUnavailable,
    Timeout,
    TransportError,
    Unauthenticated,
)


def client_for(handler) -> PowerContextClient:
    return PowerContextClient("http://powercontext.test", "k" * 32, transport=httpx.MockTransport(handler))


def error(status: int, code: str, fields=(), headers=None):
    body = {"error": {"code": code, "message": f"{code} happened", "fields": list(fields)}}

    def handler(request):
        handler.calls += 1
        return httpx.Response(status, json=body, headers=headers)

    handler.calls = 0
    return handler


@pytest.mark.parametrize(
    ("status", "code", "exception"),
    [
        (401, "unauthenticated", Unauthenticated),
        (403, "forbidden", Forbidden),
        (404, "not_found", NotFound),
        (409, "conflict", Conflict),
        (410, "content_erased", ContentErased),
        (422, "invalid_request", InvalidRequest),
        (503, "service_unavailable", ServiceUnavailable),
        (500, "internal_error", ServerError),
        (405, "method_not_allowed", APIError),
    ],
)
def test_error_responses_map_to_one_exception_each_and_are_not_retried(status, code, exception):
    handler = error(status, code)
    with pytest.raises(exception) as raised:
        client_for(handler).prepare_context("project:demo", "q", assembly={})
    assert raised.value.status_code == status
    assert raised.value.code == code
    assert raised.value.message == f"{code} happened"
    assert isinstance(raised.value, PowerContextError)
    assert handler.calls == 1


def test_invalid_request_carries_field_paths():
    handler = error(422, "invalid_request", [{"path": "assembly.sections[1].family", "message": "duplicate"}])
    with pytest.raises(InvalidRequest) as raised:
        client_for(handler).prepare_context("project:demo", "q", assembly={})
    assert [(f.path, f.message) for f in raised.value.fields] == [("assembly.sections[1].family", "duplicate")]


def test_service_unavailable_carries_retry_after():
    handler = error(503, "service_unavailable", headers={"Retry-After": "5"})
    with pytest.raises(ServiceUnavailable) as raised:
        client_for(handler).read_exact_revision("project:demo", "experience", "experience-1", 1)
    assert raised.value.retry_after == "5"


def test_non_json_error_body_still_maps_by_status():
    with pytest.raises(ServerError) as raised:
        client_for(lambda request: httpx.Response(502, text="<html>bad gateway</html>")).prepare_context("s", "q")
    assert raised.value.code == "unknown"


def test_redirects_are_not_followed():
    def handler(request):
        return httpx.Response(302, headers={"Location": "http://elsewhere.test/"})

    with pytest.raises(InvalidResponse):
        client_for(handler).prepare_context("s", "q")


def test_timeout_is_a_transport_error():
    def handler(request):
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(Timeout):
        client_for(handler).prepare_context("s", "q")


def test_connection_refused_is_a_transport_error():
    def handler(request):
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(TransportError):
        client_for(handler).prepare_context("s", "q")


def test_closed_port_is_a_transport_error():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with PowerContextClient(f"http://127.0.0.1:{port}", "k" * 32, timeout=2) as client, pytest.raises(TransportError):
        client.prepare_context("s", "q")


def test_malformed_success_body_is_an_invalid_response():
    with pytest.raises(InvalidResponse):
        client_for(lambda request: httpx.Response(200, json={"unexpected": True})).read_exact_revision(
            "project:demo", "experience", "experience-1", 1
        )


def test_api_key_is_required():
    with pytest.raises(ValueError):
        PowerContextClient("http://powercontext.test", "")

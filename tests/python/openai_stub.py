"""A local HTTP server that speaks just enough of OpenAI's Chat Completions and Responses APIs
for agent-framework-openai's real clients: its first answer asks for one execute_code call
with the given code, the next one ends the turn; it keeps every request body, so a test can
read what the model would have been sent after the tool ran."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

USAGE_CHAT = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
USAGE_RESPONSES = {
    "input_tokens": 1,
    "output_tokens": 1,
    "total_tokens": 2,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens_details": {"reasoning_tokens": 0},
}


def _chat_answer(n, code):
    if code is not None:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": "execute_code", "arguments": json.dumps({"code": code})},
                }
            ],
        }
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": "done"}, "stop"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE_CHAT,
    }


def _responses_answer(n, code):
    if code is not None:
        item = {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": "execute_code",
            "arguments": json.dumps({"code": code}),
            "status": "completed",
        }
    else:
        item = {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "done", "annotations": []}],
        }
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": "stub",
        "output": [item],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": USAGE_RESPONSES,
    }


class OpenAIStub:
    """with OpenAIStub(code) as stub: stub.base_url for the client; stub.bodies afterwards."""

    def __init__(self, code):
        self.code = code
        self.bodies = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                stub.bodies.append(body.decode("utf-8"))
                n = len(stub.bodies)
                code = stub.code if n == 1 else None
                if self.path.endswith("/chat/completions"):
                    answer = _chat_answer(n, code)
                elif self.path.endswith("/responses"):
                    answer = _responses_answer(n, code)
                else:
                    self.send_error(404)
                    return
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def next_turn(self):
        """The second request: what the model is sent once execute_code has answered."""
        assert len(self.bodies) >= 2, self.bodies
        return json.loads(self.bodies[1])

"""A chat client for the Agent Framework tests that plays a model: it asks for execute_code
once with the code it was given, then answers with the tool's result."""
import json

from agent_framework import BaseChatClient, ChatResponse, Content, FunctionInvocationLayer, Message


class ScriptedChatClient(FunctionInvocationLayer, BaseChatClient):
    def __init__(self, code):
        super().__init__()
        self.code = code
        self.requests = []  # (messages, options) of each request, as the agent sent them

    async def _inner_get_response(self, *, messages, stream, options, **kwargs):
        self.requests.append((list(messages), dict(options)))
        results = [c for m in messages for c in m.contents if c.type == "function_result"]
        if not results:
            call = Content.from_function_call(
                call_id="call-1", name="execute_code", arguments=json.dumps({"code": self.code})
            )
            return ChatResponse(messages=[Message(role="assistant", contents=[call])])
        return ChatResponse(messages=[Message(role="assistant", contents=[Content.from_text(str(results[-1].result))])])

"""A Microsoft Agent Framework agent that acts in code through snapcell.

The chat client is scripted (it plays a model that writes one program and then reports its
output), so the sample runs offline; swap in any real client (OpenAI, Azure, ...) and keep the
rest. Run: python examples/agent_codeact.py  (after `pip install '.[agent-framework]'`)."""

import asyncio
import json

from agent_framework import Agent, BaseChatClient, ChatResponse, Content, FunctionInvocationLayer, Message, tool

from snapcell.agent_framework import CodeActProvider

PROGRAM = """
orders = call_tool("list_orders", customer="ada")
total = sum(call_tool("price", sku=o["sku"]) * o["qty"] for o in orders)
with open("/output/invoice.txt", "w") as f:
    for o in orders:
        f.write(f"{o['sku']} x{o['qty']}\\n")
    f.write(f"total {total:.2f}\\n")
print(f"{len(orders)} orders, total {total:.2f}")
"""


@tool
def list_orders(customer: str) -> list[dict]:
    """The open orders of a customer: sku and quantity."""
    return [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}, {"sku": "A-1", "qty": 3}]


@tool
def price(sku: str) -> float:
    """Unit price of a product."""
    return {"A-1": 9.5, "B-7": 120.0}[sku]


class ScriptedModel(FunctionInvocationLayer, BaseChatClient):
    """Plays a model: first asks for execute_code with PROGRAM, then answers with its output."""

    async def _inner_get_response(self, *, messages, stream, options, **kwargs):
        results = [c for m in messages for c in m.contents if c.type == "function_result"]
        if not results:
            call = Content.from_function_call(
                call_id="call-1", name="execute_code", arguments=json.dumps({"code": PROGRAM})
            )
            return ChatResponse(messages=[Message(role="assistant", contents=[call])])
        return ChatResponse(messages=[Message(role="assistant", contents=[Content.from_text(str(results[-1].result))])])


async def main() -> None:
    with CodeActProvider(tools=[list_orders, price], timeout=10) as codeact:
        agent = Agent(ScriptedModel(), instructions="Answer billing questions.", context_providers=[codeact])
        response = await agent.run("What does Ada owe?")
        print(response.text)


if __name__ == "__main__":
    asyncio.run(main())
